"""The grid of a centred-squares aggregate: units below 2**31, terms within the half-width squared."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpsense.core.errors import InvalidBounds
from dpsense.engine import centered_squares


@given(
    st.floats(min_value=-1e300, max_value=1e300, allow_nan=False),
    st.floats(min_value=1e-250, max_value=1e300, allow_nan=False),
)
def test_grid_units_stay_below_two_to_the_31_and_use_most_of_them(low: float, width: float) -> None:
    high = low + width
    if high == low:
        return
    spec = centered_squares("x", low=low, high=high)
    assert 2**29 < spec.q_max < 2**31  # q**2 < 2**62 fits a signed 64-bit integer
    half = (Fraction(high) - Fraction(low)) / 2
    assert spec.q_max * Fraction(2) ** spec.grid_exponent <= half  # each term within h**2
    assert low <= spec.center <= high


def test_equal_bounds_give_a_zero_grid() -> None:
    spec = centered_squares("x", low=3.0, high=3.0)
    assert spec.q_max == 0 and spec.center == 3.0


def test_bounds_too_close_for_a_grid_are_refused_with_the_fix() -> None:
    with pytest.raises(InvalidBounds, match="2\\*\\*-960"):
        centered_squares("x", low=0.0, high=1e-300)
    with pytest.raises(InvalidBounds, match="low <= high"):
        centered_squares("x", low=1.0, high=0.0)
