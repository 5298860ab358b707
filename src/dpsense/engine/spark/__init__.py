"""The Spark backend: ``SparkEngine`` (``_engine``), always on the portable rules of ``dpsense.engine._portable``.

``_source`` loads sources, ``_expr`` spells the steps as column expressions, ``_bound`` bounds
contributions, ``_aggregate`` groups, ``_select`` selects order statistics and ``_steward`` applies
the steward's policies. Reached through ``dpsense.engine.SparkEngine``, which imports pyspark on
first use; this package imports nothing itself.
"""
