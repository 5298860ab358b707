from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from dpsense.core import InvalidBounds, PrivacyUnit, UsageError
from dpsense.sensitivity import Bounds, ContributionBound, window_max_rows


def test_bounds_are_exact_decimals():
    b = Bounds(0.1, "2.5")
    assert b.lower == Fraction(1, 10)
    assert b.upper == Fraction(5, 2)
    assert b.width == Fraction(12, 5)
    assert b.magnitude == Fraction(5, 2)
    assert b.midpoint == Fraction(13, 10)


@pytest.mark.parametrize(
    "value, expected",
    [
        (np.float64(0.1), Fraction(1, 10)),
        (np.float32(0.5), Fraction(1, 2)),
        (np.int64(3), Fraction(3)),
        (Decimal("0.1"), Fraction(1, 10)),
        (Fraction(1, 10), Fraction(1, 10)),
        (7, Fraction(7)),
    ],
)
def test_bounds_accept_numpy_and_exact_scalars(value, expected):
    assert Bounds(value, 10).lower == expected


def test_bounds_magnitude_uses_the_larger_absolute_value():
    assert Bounds(-30, 5).magnitude == 30
    assert Bounds(-3, 5).magnitude == 5


def test_reversed_bounds_are_refused_with_rule_and_fix():
    with pytest.raises(InvalidBounds) as info:
        Bounds(24, 0)
    assert "lower bound must not exceed upper bound" in str(info.value)
    assert "Fix:" in str(info.value)


@pytest.mark.parametrize(
    "lower, upper",
    [
        (float("nan"), 1),
        (0, float("nan")),
        (float("-inf"), 1),
        (0, float("inf")),
        ("nan", 1),
        (0, "inf"),
        (True, 2),
        (None, 2),
        ("abc", 2),
        (0, "1e400"),
        (0, [1]),
    ],
)
def test_non_finite_or_non_numeric_bounds_are_refused(lower, upper):
    with pytest.raises(InvalidBounds):
        Bounds(lower, upper)


def test_equal_bounds_are_allowed():
    assert Bounds(3, 3).width == 0


def test_float_interval_rounds_inwards():
    # float(0.7) is below 7/10 and float(1.1) above 11/10: both must move inwards by one step
    lo, hi = Bounds("0.7", "1.1").float_interval()
    assert Fraction(lo) >= Fraction(7, 10) and lo > 0.7
    assert Fraction(hi) <= Fraction(11, 10) and hi < 1.1
    assert Bounds(0, 24).float_interval() == (0.0, 24.0)


def test_float_interval_refuses_a_point_that_is_not_a_double():
    with pytest.raises(InvalidBounds):
        Bounds("0.1", "0.1").float_interval()


def test_contribution_bound_caps():
    c = ContributionBound(5, max_groups_per_unit=9, max_rows_per_group=2)
    assert c.groups_cap == 5
    assert c.rows_per_group_cap == 2
    d = ContributionBound(5)
    assert (d.groups_cap, d.rows_per_group_cap) == (5, 5)


@pytest.mark.parametrize("c", [0, -1, 1.5, "3", True, None])
def test_contribution_bound_needs_an_integer_at_least_one(c):
    with pytest.raises(UsageError):
        ContributionBound(c)


@pytest.mark.parametrize("field", ["max_groups_per_unit", "max_rows_per_group"])
@pytest.mark.parametrize("value", [0, -2, 2.0, False])
def test_group_caps_are_validated(field, value):
    with pytest.raises(UsageError):
        ContributionBound(3, **{field: value})


def test_fixed_rows_must_be_feasible_under_group_caps():
    with pytest.raises(UsageError):
        ContributionBound(5, max_groups_per_unit=2, max_rows_per_group=2, fixed_rows_per_unit=True)
    assert ContributionBound(4, max_groups_per_unit=2, max_rows_per_group=2, fixed_rows_per_unit=True)


def test_contribution_bound_from_privacy_unit():
    assert ContributionBound.from_privacy_unit(PrivacyUnit("person_id", max_rows=7)).max_rows_per_unit == 7


def test_window_max_rows_covers_the_whole_window():
    assert window_max_rows(1, 30) == 30
    assert window_max_rows(3, 7) == 21


@pytest.mark.parametrize("args", [(0, 30), (1, 0), (1.0, 30), (True, 30), (1, -5)])
def test_window_max_rows_validates(args):
    with pytest.raises(UsageError):
        window_max_rows(*args)
