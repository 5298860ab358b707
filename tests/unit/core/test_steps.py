"""A declared recording step: parsing, its decimal text, its points' doubles and the nearest-point map."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpsense.core.errors import UsageError
from dpsense.core.steps import DecimalStep, check_step


@pytest.mark.parametrize(
    ("declared", "multiplier", "exponent", "text"),
    [
        ("0.01", 1, -2, "0.01"),
        (0.01, 1, -2, "0.01"),
        ("0.25", 25, -2, "0.25"),
        ("2.5", 25, -1, "2.5"),
        (25, 25, 0, "25"),
        ("1000", 1, 3, "1000"),
        ("120", 12, 1, "120"),
        ("1e-5", 1, -5, "0.00001"),
        (Fraction(1, 8), 125, -3, "0.125"),
    ],
)
def test_a_step_is_m_times_a_power_of_ten(declared: object, multiplier: int, exponent: int, text: str) -> None:
    step = check_step(declared, what="step")  # type: ignore[arg-type]
    assert step == DecimalStep(multiplier, exponent)
    assert step.text() == text and Fraction(text) == step.value
    assert check_step(step.text(), what="step") == step  # the stored text reads back


@pytest.mark.parametrize("declared", ["1/3", "0", "-1", "nan", "inf", "abc", True, "1e-30", "2147483648"])
def test_a_step_that_is_not_a_positive_decimal_is_refused(declared: object) -> None:
    with pytest.raises(UsageError, match="step"):
        check_step(declared, what="step of 'x'")  # type: ignore[arg-type]


def test_an_integer_columns_step_is_whole() -> None:
    assert check_step("5", what="step", integer=True) == DecimalStep(5, 0)
    with pytest.raises(UsageError, match="whole number"):
        check_step("0.5", what="step", integer=True)


def test_points_are_decided_on_the_doubles_the_mechanism_releases() -> None:
    tenth = check_step("0.1", what="step")
    assert tenth.points(0.3, 0.3) == (3, 3)  # the double 0.3 lies below 3/10: still the point 0.3
    assert tenth.points(0.1 + 0.2, 0.7) == (4, 7)  # 0.30000000000000004 is above the point 0.3
    assert tenth.points(0.31, 0.39) is None
    assert check_step("25", what="step").points(-60, 60) == (-2, 2)
    assert check_step("1", what="step").points(0, 2.0**60) is None  # beyond ±2^50 units


def test_nearest_is_each_points_own_index_and_non_decreasing() -> None:
    rng = np.random.default_rng(3)
    for text in ("0.01", "0.25", "25", "1000", "0.001", "7"):
        step = check_step(text, what="step")
        limit = (1 << 50) // step.multiplier
        k = np.sort(rng.integers(-limit, limit, size=2000)).astype(np.float64)
        points = step.values(k)
        assert np.array_equal(step.nearest(points, -limit, limit), k.astype(np.int64))
        assert all(step.double(int(i)) == p for i, p in zip(k[:50], points[:50], strict=True))
        noisy = np.sort(rng.uniform(-1e6, 1e6, 5000))
        mapped = step.nearest(noisy, -limit, limit)
        assert np.all(np.diff(mapped) >= 0)


@pytest.mark.parametrize(
    "step", [DecimalStep(1, -2), DecimalStep(25, -2), DecimalStep(1, 3), DecimalStep(5, 0), DecimalStep(1, 0)]
)
def test_holds_is_the_nearest_points_double_equal_to_the_value(step: DecimalStep) -> None:
    """``holds`` = (values(nearest(x)) == x): points, values between them, values past the ends."""
    rng = np.random.default_rng(7)
    first, last = -40, 4000
    k = rng.integers(first - 5, last + 5, 20_000).astype(np.float64)
    on = step.values(k)
    off = on + float(step.value) * rng.uniform(-0.6, 0.6, k.size)
    near = np.nextafter(on, np.inf)  # one ulp away from a point: not a point
    for x in (on, off, near, np.array([], dtype=np.float64)):
        expected = step.values(step.nearest(x, first, last).astype(np.float64)) == x
        np.testing.assert_array_equal(step.holds(x, first, last), expected)
    inside = (k >= first) & (k <= last)
    assert step.holds(on, first, last)[inside].all()
    assert not step.holds(on, first, last)[~inside].any()  # a point past the ends is no point of the span
    assert not step.holds(near, first, last).any()
