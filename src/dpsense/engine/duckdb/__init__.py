"""The DuckDB backend: ``DuckDBEngine`` (``_engine``) and the steward's steps it mixes in (``_steward``).

Its SQL is in ``dpsense.engine.sql``. Reached through ``dpsense.engine.DuckDBEngine``, which imports
DuckDB on first use; this package imports nothing itself.
"""
