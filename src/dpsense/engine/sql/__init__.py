"""The SQL text of the engine's steps, run by ``DuckDBEngine``; ``SparkEngine`` shares the steward's helpers.

``_query``: quoting, the dialect, derived keys and the release steps (bounding, aggregates, order
statistics); ``_index_query``: the unit index and its rotation; ``_portable_query``: the portable
rules of ``dpsense.engine._portable`` in DuckDB SQL; ``_steward_query``: fingerprint, data quality
and policies. Text only: nothing here imports DuckDB or runs a query.
"""
