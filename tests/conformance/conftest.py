"""The engine fixture: every conformance test runs once per engine.

Engines: DuckDB with its default rules, DuckDB with the portable rules, and Spark (always portable) on
one local SparkSession shared by the whole test run (tests/spark_support.py), skipped when pyspark or
Java is missing. Spark collects with a public default bound (``collect_limit``) because the suite's
``collect`` calls pass none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from dpsense.engine import DuckDBEngine, Engine
from tests.spark_support import spark_available, spark_session

#: The public bound a Spark engine applies to ``collect`` calls that give none.
SPARK_COLLECT_LIMIT = 10_000_000


def _portable_duckdb() -> Engine:
    return DuckDBEngine(portable=True)


def _spark() -> Engine:
    from dpsense.engine import SparkEngine

    engine: Engine = SparkEngine(spark_session(), collect_limit=SPARK_COLLECT_LIMIT)
    return engine


ENGINE_FACTORIES: dict[str, Callable[[], Engine]] = {"duckdb": DuckDBEngine, "duckdb-portable": _portable_duckdb}
if spark_available():
    ENGINE_FACTORIES["spark"] = _spark


@pytest.fixture(params=sorted(ENGINE_FACTORIES))
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    eng = ENGINE_FACTORIES[request.param]()
    try:
        yield eng
    finally:
        eng.close()
