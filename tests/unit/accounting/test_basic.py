from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsense.accounting import compose_basic
from dpsense.core import ZCDP, ApproxDP, InvalidPrivacyParameter, PureDP, UnsupportedRequest, UsageError


def test_pure_losses_sum_exactly_in_decimal_terms():
    # 0.1 + 0.2 is 0.3 exactly: user numbers are read through their decimal strings.
    assert compose_basic([PureDP(0.1), PureDP(0.2)]) == PureDP("0.3")
    assert compose_basic([PureDP(0.01)] * 1000) == PureDP(10)


def test_pure_and_approx_give_approx_with_summed_parameters():
    result = compose_basic([PureDP(0.5), ApproxDP(0.25, 1e-6), ApproxDP(1, 2e-6)])
    assert result == ApproxDP("1.75", "3e-6")
    assert isinstance(result, ApproxDP)


def test_zcdp_and_pure_give_zcdp_with_pure_converted_exactly():
    result = compose_basic([ZCDP("0.125"), PureDP(1), ZCDP(0.5)])
    assert result == ZCDP(Fraction(1, 8) + Fraction(1, 2) + Fraction(1, 2))


def test_zcdp_with_approx_is_refused_with_a_fix():
    with pytest.raises(UnsupportedRequest) as info:
        compose_basic([ZCDP(0.1), ApproxDP(1, 1e-6)])
    message = str(info.value)
    assert "zCDP" in message and "Fix:" in message and "zcdp_to_approx_tight" in message


def test_empty_composition_spends_nothing():
    assert compose_basic([]) == PureDP(0)


def test_non_loss_element_is_refused():
    with pytest.raises(UsageError, match="PureDP, ApproxDP or ZCDP"):
        compose_basic([PureDP(1), 0.5])  # type: ignore[list-item]


def test_deltas_summing_to_one_are_refused():
    with pytest.raises(InvalidPrivacyParameter, match="below 1"):
        compose_basic([ApproxDP(1, 0.5), ApproxDP(1, 0.5)])


_eps = st.fractions(min_value=0, max_value=5, max_denominator=1000)
_delta = st.fractions(min_value=0, max_value=Fraction(1, 100), max_denominator=10**6)
_losses = st.lists(
    st.one_of(st.builds(PureDP, _eps), st.builds(ApproxDP, _eps, _delta)),
    min_size=1,
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(_losses)
def test_composition_dominates_each_part_and_ignores_order(losses):
    total = compose_basic(losses)
    assert total == compose_basic(list(reversed(losses)))
    for loss in losses:
        assert loss <= total
    assert total.epsilon == sum(loss.epsilon for loss in losses)
