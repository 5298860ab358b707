from fractions import Fraction

import numpy as np
import pytest

from dpsense.core.checks import integer_in, integral_in


@pytest.mark.parametrize("value", [True, False, 1.0, "1", Fraction(1), None, np.int64(3)])
def test_only_python_ints_that_are_not_bools_are_integers(value: object) -> None:
    assert not integer_in(value)


@pytest.mark.parametrize("value", [True, np.bool_(True), 2.0, "2"])
def test_integral_refuses_bools_and_non_integers(value: object) -> None:
    assert not integral_in(value)


@pytest.mark.parametrize("value", [2, np.int64(2), np.int8(2), np.uint32(2)])
def test_integral_accepts_numpy_integers(value: object) -> None:
    assert integral_in(value, 1, 2)


@pytest.mark.parametrize(
    ("value", "low", "high", "expected"),
    [
        (0, 1, None, False),
        (1, 1, None, True),
        (5, None, 5, True),
        (6, None, 5, False),
        (-3, -3, 3, True),
        (4, -3, 3, False),
    ],
)
def test_the_range_is_closed(value: int, low: int | None, high: int | None, expected: bool) -> None:
    assert integer_in(value, low, high) is expected
    assert integral_in(np.int64(value), low, high) is expected


def test_huge_python_ints_are_judged_exactly() -> None:
    assert integer_in(1 << 200, 1)
    assert not integer_in(1 << 200, 1, 1 << 52)
