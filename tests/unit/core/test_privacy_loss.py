from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpsense.core import (
    ZCDP,
    Adjacency,
    ApproxDP,
    InvalidPrivacyParameter,
    PrivacyUnit,
    PureDP,
    UsageError,
    to_fraction,
)


def test_decimal_semantics_not_binary_floats() -> None:
    assert to_fraction(0.1) == Fraction(1, 10)
    assert sum((PureDP(0.1) for _ in range(3)), PureDP(0)) == PureDP(0.3)
    total = PureDP(0)
    for _ in range(1000):
        total = total + PureDP(0.01)
    assert total.epsilon == 10
    # the float route this avoids really is wrong
    assert 3 * Fraction(0.1) > Fraction(3, 10)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "abc", True, None])
def test_bad_epsilon_refused_with_rule_and_fix(bad: object) -> None:
    with pytest.raises(InvalidPrivacyParameter) as info:
        ApproxDP(bad if bad != 0 else -0.5, 0)  # type: ignore[arg-type]
    assert "Fix:" in str(info.value)


@pytest.mark.parametrize("bad", [-1e-9, 1, 1.5, float("nan")])
def test_bad_delta_refused(bad: float) -> None:
    with pytest.raises(InvalidPrivacyParameter, match="delta"):
        ApproxDP(1, bad)


def test_partial_order_is_component_wise() -> None:
    a, b = ApproxDP(1, 1e-6), ApproxDP(2, 1e-7)
    assert not a <= b and not b <= a
    assert ApproxDP(1, 1e-7) <= a and ApproxDP(1, 1e-7) <= b
    assert PureDP(1) <= a
    assert not PureDP(1.5) <= a


def test_conversions_round_up() -> None:
    assert PureDP(1).as_zcdp() == ZCDP(Fraction(1, 2))
    approx = ZCDP(0.5).to_approx(1e-6)
    exact = 0.5 + 2 * math.sqrt(0.5 * math.log(1e6))
    assert float(approx.epsilon) >= exact
    assert float(approx.epsilon) - exact < 1e-15
    with pytest.raises(InvalidPrivacyParameter):
        ZCDP(1).to_approx(0)


def test_rendering_in_messages() -> None:
    assert str(ApproxDP("0.5", "1e-6")) == "(ε=0.5, δ=1e-06)"
    assert str(PureDP(2)) == "(ε=2)"
    assert str(ZCDP("0.125")) == "(ρ=0.125)"


def test_mixing_zcdp_and_approx_comparison_refused() -> None:
    with pytest.raises(InvalidPrivacyParameter, match="zCDP"):
        _ = ZCDP(1) <= ApproxDP(1, 1e-6)


@given(st.lists(st.decimals(min_value="0", max_value="5", places=4), min_size=1, max_size=20))
def test_addition_is_exact_and_monotone(values: list) -> None:
    total = PureDP(0)
    for v in values:
        before = total
        total = total + PureDP(str(v))
        assert before <= total
    assert total.epsilon == sum(Fraction(str(v)) for v in values)


def test_adjacency_and_unit_declarations() -> None:
    assert Adjacency.parse("add_remove") is Adjacency.ADD_REMOVE
    assert Adjacency.parse("REPLACE") is Adjacency.REPLACE
    with pytest.raises(UsageError, match="add_remove"):
        Adjacency.parse("swap")
    assert PrivacyUnit("person_id", max_rows=30).max_rows == 30
    assert PrivacyUnit().is_row_level
    with pytest.raises(UsageError, match="max_rows"):
        PrivacyUnit("person_id", max_rows=0)
