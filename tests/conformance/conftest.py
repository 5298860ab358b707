"""The engine fixture: every conformance test runs once per engine (DuckDB now; Spark later)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from dpsense.engine import DuckDBEngine, Engine

ENGINE_FACTORIES: dict[str, Callable[[], Engine]] = {"duckdb": DuckDBEngine}


@pytest.fixture(params=sorted(ENGINE_FACTORIES))
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    eng = ENGINE_FACTORIES[request.param]()
    try:
        yield eng
    finally:
        eng.close()
