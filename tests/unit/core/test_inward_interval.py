"""inward_interval: the doubles closest to an exact interval from the inside (issue 13, clip bounds)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpsense.core.errors import InvalidBounds
from dpsense.core.numbers import inward_interval
from dpsense.sensitivity import Bounds

FRACTIONS = st.fractions(min_value=-(10**6), max_value=10**6, max_denominator=10**9)


@given(FRACTIONS, FRACTIONS)
def test_the_interval_is_the_tightest_one_inside(a: Fraction, b: Fraction) -> None:
    low, high = min(a, b), max(a, b)
    try:
        lo, hi = inward_interval(low, high)
    except InvalidBounds:
        # only when no double lies in [low, high]: the double nearest above low is beyond high
        above = float(low) if Fraction(float(low)) >= low else math.nextafter(float(low), math.inf)
        assert Fraction(above) > high
        return
    assert low <= Fraction(lo) <= Fraction(hi) <= high
    assert Fraction(math.nextafter(lo, -math.inf)) < low  # the smallest double >= low
    assert Fraction(math.nextafter(hi, math.inf)) > high  # the largest double <= high


def test_decimal_bounds_move_inwards_and_doubles_stay() -> None:
    # float(1/10) is above 1/10 and float(7/10) below 7/10: both would leave the interval
    assert float(Fraction(1, 10)) > Fraction(1, 10) and float(Fraction(7, 10)) < Fraction(7, 10)
    lo, hi = inward_interval(Fraction(7, 10), Fraction(1, 10) + 1)
    assert lo == math.nextafter(0.7, math.inf)
    assert hi == math.nextafter(1.1, 0.0)  # float(11/10) is above 11/10
    lo, hi = inward_interval(Fraction(-1, 10), Fraction(1, 10))
    assert (lo, hi) == (-math.nextafter(0.1, 0.0), math.nextafter(0.1, 0.0))
    assert inward_interval(Fraction(0), Fraction(24)) == (0.0, 24.0)


def test_bounds_beyond_the_double_range() -> None:
    huge = Fraction(10**400)
    assert inward_interval(-huge, Fraction(0)) == (-math.nextafter(math.inf, 0.0), 0.0)
    with pytest.raises(InvalidBounds, match="no finite double"):
        inward_interval(huge, huge + 1)


@pytest.mark.parametrize(("low", "high"), [(Fraction(1, 10), Fraction(1, 10)), (Fraction(2), Fraction(1))])
def test_no_double_inside_or_reversed_bounds_are_refused(low: Fraction, high: Fraction) -> None:
    with pytest.raises(InvalidBounds, match="Fix:"):
        inward_interval(low, high)


def test_bounds_float_interval_is_the_same_helper() -> None:
    assert Bounds("0.7", "1.1").float_interval() == inward_interval(Fraction(7, 10), Fraction(11, 10))
