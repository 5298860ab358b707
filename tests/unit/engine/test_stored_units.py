"""Stored grid units (``index_units(sums=...)``): the same exact sums as clipping every release, read faster.

The index stores, per row, the integer grid units of each declared clipped sum; a release on the
indexed path then adds that BIGINT column. The sums must be bit-for-bit those of the per-release
expression, for missing values, out-of-range values, ties at half a grid step, bounds off the grid
and integer columns; a sum with other bounds still clips per release.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpsense.engine import DuckDBEngine, clipped_sum, count_rows
from dpsense.noise.entropy import random_bytes

KEY = random_bytes(32)
SPECS = [
    clipped_sum("x", low=-1.0, high=2.0, grid_exponent=-20, name="wide"),
    clipped_sum("x", low=0.1, high=0.7, grid_exponent=-3, name="off_grid"),  # bounds are not grid points
    clipped_sum("i", low=0.0, high=10.0, grid_exponent=-2, name="ints"),
]


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    n = 4000
    x = rng.uniform(-3, 4, n)
    x[::7] = np.round(x[::7] * 8) / 8 + 1 / 16  # ties halfway between points of the 2^-3 grid
    x[::11] = (np.floor(x[::11] * 2**20) + 0.5) / 2**20  # ties on the 2^-20 grid
    x[5::13] = np.nan
    frame = pd.DataFrame({"person": rng.integers(0, 300, n), "g": rng.integers(0, 4, n), "x": x})
    frame["i"] = pd.array(rng.integers(-5, 15, n), dtype="Int64")
    frame.loc[3::17, "i"] = pd.NA
    frame.loc[4::19, "x"] = None
    return frame


@pytest.fixture
def engines() -> Iterator[tuple[DuckDBEngine, DuckDBEngine, list[str]]]:
    stored, plain = DuckDBEngine(), DuckDBEngine()
    for engine, sums in ((stored, SPECS), (plain, [])):
        engine.register("t", _frame())
        engine.index_units("t", unit_column="person", key=KEY, sums=sums)
    sql: list[str] = []
    run = stored._run

    def spy(text: str, params: Any) -> Any:
        sql.append(text)
        return run(text, params)

    stored._run = spy  # type: ignore[method-assign]
    yield stored, plain, sql
    stored.close()
    plain.close()


def _sums(engine: DuckDBEngine, salt: bytes, aggregates: list[Any]) -> list[Any]:
    with engine.release_scope():
        view = engine.bounded_rows("t", unit_column="person", max_rows_per_unit=5, salt=salt)
        return engine.group_aggregates(view, group_column="g", keys=[0, 1, 2, 3], aggregates=aggregates)


def test_stored_units_give_the_same_exact_sums_and_are_what_the_release_reads(engines: Any) -> None:
    stored, plain, sql = engines
    for _ in range(5):
        salt = random_bytes(32)
        aggregates = [count_rows("n"), *SPECS]
        assert _sums(stored, salt, aggregates) == _sums(plain, salt, aggregates)
    text = sql[-1]
    assert all(f'sum("__dps_q{i}")' in text for i in range(len(SPECS)))
    assert "round(" not in text  # no row is clipped or rounded again


def test_the_sums_are_those_of_exact_rational_arithmetic(engines: Any) -> None:
    stored, _, _ = engines
    everything = 10**9  # keep every row: the exact sum over the whole column
    with stored.release_scope():
        view = stored.bounded_rows("t", unit_column="person", max_rows_per_unit=everything, salt=random_bytes(32))
        (row,) = stored.group_aggregates(view, group_column=None, keys=None, aggregates=SPECS)
    frame = _frame()
    for spec in SPECS:
        grid = Fraction(2) ** spec.grid_exponent
        total = 0
        for v in frame[spec.clip.column]:
            if v is pd.NA or v is None or (isinstance(v, float) and np.isnan(v)):
                continue
            clipped = Fraction(min(max(float(v), spec.clip.low), spec.clip.high)) / grid
            q = int(clipped + Fraction(1, 2)) if clipped >= 0 else -int(-clipped + Fraction(1, 2))  # half away
            total += min(max(q, spec.q_low), spec.q_high)
        assert row.sums[spec.name].units == total, spec.name


def test_other_bounds_still_clip_per_release(engines: Any) -> None:
    stored, plain, sql = engines
    other = clipped_sum("x", low=0.0, high=1.0, grid_exponent=-20, name="other")
    salt = random_bytes(32)
    assert _sums(stored, salt, [other]) == _sums(plain, salt, [other])
    assert 'sum("__dps_q' not in sql[-1] and "round(" in sql[-1]
