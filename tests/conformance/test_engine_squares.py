"""Conformance: exact sums of squared centred grid units (the second moment of a variance release)."""

from __future__ import annotations

import math
from fractions import Fraction

import pyarrow as pa
import pytest

from dpsense.core.errors import UsageError
from dpsense.engine import CenteredSquares, Engine, UnknownColumn, centered_squares, clipped_sum, count_present
from tests.conformance.test_engine_aggregates import awkward, present
from tests.conformance.test_engine_conformance import bound, round_half_away


def expected_square_units(values: list[float | None], spec: CenteredSquares) -> int:
    """Reference: the double arithmetic the engines do, then exact integers (Python floats are IEEE doubles)."""
    low, high, k = spec.clip.low, spec.clip.high, spec.q_max
    total = 0
    for v in values:
        if v is None or math.isnan(v):
            continue
        clipped = min(max(v, low), high)
        scaled = (clipped - spec.center) * 2.0 ** (-spec.grid_exponent)
        q = round_half_away(Fraction(min(max(scaled, -float(k)), float(k))))
        total += q * q
    return total


BOUNDS = [(0.0, 4.0), (-2.0, 2.0), (0.3, 5.1), (-1e9, 1e9), (1e6, 1e6 + 2), (-0.75, 0.75), (3.0, 3.0)]


@pytest.mark.parametrize(("low", "high"), BOUNDS)
def test_centered_squares_with_missing_and_infinite_values_are_exact(engine: Engine, low: float, high: float) -> None:
    table = awkward()
    engine.register("t", table)
    view = bound(engine)
    groups = table.column("g").to_pylist()
    for column in ("x", "f", "n", "d"):
        spec = centered_squares(column, low=low, high=high)
        rows = engine.group_aggregates(view, group_column="g", keys=["a", "b", "c", "z"], aggregates=[spec])
        values = [None if v is None else float(v) for v in table.column(column).to_pylist()]
        for row in rows:
            sub = [v for v, g in zip(values, groups, strict=True) if g == row.key]
            got = row.sums[f"squares_{column}"]
            assert got.units == expected_square_units(sub, spec), (column, row.key)
            assert got.grid_exponent == 2 * spec.grid_exponent
            # every term lies in [0, h^2]: the sensitivity the planner charges for
            half = (Fraction(high) - Fraction(low)) / 2
            assert 0 <= got.value <= present(sub) * half * half


def test_centered_squares_approximate_the_real_sum_of_squared_deviations(engine: Engine) -> None:
    values = [0.1 * i for i in range(-40, 61)] + [None, math.nan]
    engine.register("t", pa.table({"person": list(range(len(values))), "x": pa.array(values, type=pa.float64())}))
    view = bound(engine)
    low, high = -3.0, 5.0
    spec = centered_squares("x", low=low, high=high)
    (row,) = engine.group_aggregates(view, group_column=None, keys=None, aggregates=[spec])
    center = (low + high) / 2
    real = sum((min(max(v, low), high) - center) ** 2 for v in values if v is not None and not math.isnan(v))
    per_value = 2 * 4.0 * 2.0**spec.grid_exponent  # |(x+r)^2 - x^2| <= 2 h |r| + r^2 with |r| <= 2^e / 2
    assert abs(float(row.sums["squares_x"].value) - real) <= 101 * per_value


def test_centered_squares_are_exact_beyond_64_bits(engine: Engine) -> None:
    # every value at a bound: q = ±k ~ 2**31, q*q ~ 2**62, and 64 of them sum past 2**63
    n = 64
    table = pa.table({"person": list(range(n)), "x": [1.0 if i % 2 else -1.0 for i in range(n)]})
    engine.register("t", table)
    view = bound(engine)
    spec = centered_squares("x", low=-1.0, high=1.0)
    (row,) = engine.group_aggregates(view, group_column=None, keys=None, aggregates=[spec])
    assert row.sums["squares_x"].units == n * spec.q_max**2
    assert row.sums["squares_x"].units > 2**63
    assert row.sums["squares_x"].value == n * (spec.q_max * Fraction(2) ** spec.grid_exponent) ** 2


def test_centered_squares_round_half_away_from_zero(engine: Engine) -> None:
    spec = centered_squares("x", low=-1.0, high=1.0)
    step = 2.0**spec.grid_exponent
    values = [2.5 * step, -2.5 * step, 0.5 * step, -0.5 * step]  # ties: 3, -3, 1, -1 grid units
    engine.register("t", pa.table({"person": list(range(4)), "x": values}))
    (row,) = engine.group_aggregates(bound(engine), group_column=None, keys=None, aggregates=[spec])
    assert row.sums["squares_x"].units == 9 + 9 + 1 + 1


def test_centered_squares_beside_sums_and_counts_in_one_call(engine: Engine) -> None:
    table = awkward()
    engine.register("t", table)
    view = bound(engine)
    aggs = [
        clipped_sum("x", low=-4, high=4, grid_exponent=-10, name="s"),
        centered_squares("x", low=-4, high=4, name="q"),
        count_present("x", name="n"),
    ]
    rows = engine.group_aggregates(view, group_column="g", keys=["c", "a"], aggregates=aggs)
    assert [r.key for r in rows] == ["c", "a"]
    for row in rows:
        assert set(row.sums) == {"s", "q"} and set(row.counts) == {"n"}


def test_centered_squares_arguments(engine: Engine) -> None:
    engine.register("t", awkward())
    view = bound(engine)
    with pytest.raises(UnknownColumn):
        engine.group_aggregates(view, group_column=None, keys=None, aggregates=[centered_squares("no", low=0, high=1)])
    with pytest.raises(UsageError, match="numeric"):
        engine.group_aggregates(view, group_column=None, keys=None, aggregates=[centered_squares("s", low=0, high=1)])
