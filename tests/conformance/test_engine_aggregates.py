"""Conformance: counts of present values and exact clipped sums with missing and non-finite values."""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest

from dpsense.core.errors import UsageError
from dpsense.engine import (
    Aggregate,
    CountPresent,
    Engine,
    UnknownColumn,
    clipped_sum,
    count_outside,
    count_present,
    count_rows,
)
from tests.conformance.test_engine_conformance import bound, expected_units

INF, NAN = math.inf, math.nan


def awkward() -> pa.Table:
    return pa.table(
        {
            "person": pa.array([1, 1, 2, 2, 3, 3, 4, 4, 5, 5], type=pa.int64()),
            "g": pa.array(["a", "a", "a", "b", "b", "b", "b", "c", "c", "c"]),
            "x": pa.array([1.5, NAN, None, INF, -INF, 2.25, NAN, 7.0, -3.0, 0.375]),
            "f": pa.array([1.5, NAN, None, INF, 0.5, 2.25, NAN, 7.0, None, 0.375], type=pa.float32()),
            "n": pa.array([1, None, 3, None, 5, 6, 7, 8, None, 10], type=pa.int32()),
            "d": pa.array(
                [Decimal("1.25"), None, Decimal("-2.5"), None, *[Decimal("0.5")] * 6], type=pa.decimal128(9, 2)
            ),
            "s": pa.array(["p", None, "q", "nan", None, "r", "s", "t", "u", None]),
        }
    )


def present(values: Sequence[object]) -> int:
    return sum(1 for v in values if v is not None and not (isinstance(v, float) and math.isnan(v)))


def test_count_present_counts_rows_without_null_or_nan(engine: Engine) -> None:
    table = awkward()
    engine.register("t", table)
    view = bound(engine)
    columns = ["x", "f", "n", "d", "s", "person"]
    aggs: list[Aggregate] = [count_rows(), *(count_present(c) for c in columns)]
    rows = engine.group_aggregates(view, group_column="g", keys=["a", "b", "c", "z"], aggregates=aggs)
    groups = table.column("g").to_pylist()
    for row in rows:
        mask = [g == row.key for g in groups]
        assert row.counts["count_rows"] == sum(mask)
        for c in columns:
            values = [v for v, m in zip(table.column(c).to_pylist(), mask, strict=True) if m]
            assert row.counts[f"present_{c}"] == present(values), (row.key, c)
    (total,) = engine.group_aggregates(view, group_column=None, keys=None, aggregates=[count_present("x", name="nx")])
    assert total.counts == {"nx": 7}  # infinities are present: a clipped sum clamps them


def test_count_present_is_the_number_of_rows_a_clipped_sum_adds(engine: Engine) -> None:
    engine.register("t", awkward())
    view = bound(engine)
    for column in ("x", "f", "n", "d"):
        ones = clipped_sum(column, low=1, high=1, grid_exponent=0, name="ones")  # every present value adds 1
        rows = engine.group_aggregates(
            view, group_column="g", keys=["a", "b", "c"], aggregates=[ones, count_present(column, name="k")]
        )
        assert [r.sums["ones"].units for r in rows] == [r.counts["k"] for r in rows], column


def test_count_present_arguments(engine: Engine) -> None:
    engine.register("t", awkward())
    view = bound(engine)
    assert count_present("x") == CountPresent("x", "present_x")
    with pytest.raises(UnknownColumn):
        engine.group_aggregates(view, group_column=None, keys=None, aggregates=[count_present("nope")])
    with pytest.raises(UsageError, match="distinct"):
        engine.group_aggregates(view, group_column=None, keys=None, aggregates=[count_present("x"), count_present("x")])
    with pytest.raises(UsageError, match="non-empty string"):
        count_present("")


@pytest.mark.parametrize(
    ("low", "high", "e"),
    [(0.0, 4.0, -3), (-2.0, 2.0, -1), (-8.0, 8.0, 2), (0.3, 5.1, -2), (-1e9, 1e9, -20), (-0.75, 0.75, -40)],
)
def test_clipped_sums_with_missing_and_infinite_values_are_exact(
    engine: Engine, low: float, high: float, e: int
) -> None:
    table = awkward()
    engine.register("t", table)
    view = bound(engine)
    groups = table.column("g").to_pylist()
    for column in ("x", "f", "n", "d"):
        spec = clipped_sum(column, low=low, high=high, grid_exponent=e)
        rows = engine.group_aggregates(view, group_column="g", keys=["a", "b", "c"], aggregates=[spec])
        values = [None if v is None else float(v) for v in table.column(column).to_pylist()]
        for row in rows:
            sub = [v for v, g in zip(values, groups, strict=True) if g == row.key]
            assert row.sums[f"sum_{column}"].units == expected_units(sub, low, high, e), (column, row.key)
            k = present(sub)
            assert spec.q_low * k <= row.sums[f"sum_{column}"].units <= spec.q_high * k


def test_clipped_sum_rounds_half_away_from_zero_on_the_grid(engine: Engine) -> None:
    values = [0.375, -0.375, 0.125, -0.125, 2.5, -2.5]  # ties at grid 2**-2 and 2**0
    engine.register("t", pa.table({"person": list(range(6)), "x": values}))
    view = bound(engine)
    for e in (-2, 0):
        spec = clipped_sum("x", low=-4, high=4, grid_exponent=e)
        (row,) = engine.group_aggregates(view, group_column=None, keys=None, aggregates=[spec])
        want = sum(int(math.copysign(math.floor(abs(Fraction(v) / 2**e) + Fraction(1, 2)), v)) for v in values)
        assert row.sums["sum_x"].units == want
    assert np.round(2.5) == 2.0  # numpy rounds half to even: the engine must not


@pytest.mark.parametrize(("low", "high"), [(0.0, 4.0), (-2.0, 2.0), (0.375, 0.375), (-1e9, 1e9)])
def test_count_outside_counts_the_rows_a_clip_moves(engine: Engine, low: float, high: float) -> None:
    table = awkward()
    engine.register("t", table)
    view = bound(engine)
    groups = table.column("g").to_pylist()
    for column in ("x", "f", "n", "d"):
        spec = count_outside(column, low=low, high=high)
        rows = engine.group_aggregates(view, group_column="g", keys=["a", "b", "c", "z"], aggregates=[spec])
        values = [None if v is None else float(v) for v in table.column(column).to_pylist()]
        for row in rows:
            sub = [v for v, g in zip(values, groups, strict=True) if g == row.key]
            want = sum(1 for v in sub if v is not None and not math.isnan(v) and (v < low or v > high))
            assert row.counts[f"outside_{column}"] == want, (column, row.key)
