from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpsense.core import Adjacency, InvalidData, InvalidPrivacyParameter, UsageError
from dpsense.sensitivity import Bounds, ContributionBound, mean_from_noisy, mean_private_n_plan

HOURS = Bounds(0, 24)


def test_plan_add_remove_sensitivities_and_exact_split():
    plan = mean_private_n_plan(
        HOURS, epsilon=0.3, adjacency="add_remove", contribution=ContributionBound(30), split=Fraction(1, 3)
    )
    assert plan.centered_sum_sensitivity == 30 * 24 / 2
    assert plan.count_sensitivity == 30
    assert plan.epsilon_sum == Fraction(1, 10)
    assert plan.epsilon_count == Fraction(1, 5)
    assert plan.epsilon == Fraction(3, 10)  # exactly the decimal 0.3
    assert plan.midpoint == 12
    assert plan.adjacency is Adjacency.ADD_REMOVE


@given(
    eps=st.decimals(min_value="0.001", max_value="10", places=3),
    split=st.fractions(min_value=Fraction(1, 1000), max_value=Fraction(999, 1000)),
)
def test_split_always_sums_to_epsilon_exactly(eps, split):
    plan = mean_private_n_plan(
        HOURS, epsilon=str(eps), adjacency="add_remove", contribution=ContributionBound(1), split=split
    )
    assert plan.epsilon_sum + plan.epsilon_count == Fraction(str(eps))
    assert plan.epsilon_sum > 0 and plan.epsilon_count > 0


def test_plan_under_replace_uses_replace_sensitivities():
    plan = mean_private_n_plan(HOURS, epsilon=1, adjacency="replace", contribution=ContributionBound(2))
    assert plan.centered_sum_sensitivity == 48
    assert plan.count_sensitivity == 2


@pytest.mark.parametrize("split", [0, 1, 1.5, -0.2, "nan", None])
def test_split_must_lie_strictly_inside_zero_one(split):
    with pytest.raises(InvalidPrivacyParameter):
        mean_private_n_plan(HOURS, epsilon=1, adjacency="add_remove", contribution=ContributionBound(1), split=split)


@pytest.mark.parametrize("eps", [0, -1, float("nan"), float("inf"), "x"])
def test_epsilon_is_validated(eps):
    with pytest.raises(InvalidPrivacyParameter):
        mean_private_n_plan(HOURS, epsilon=eps, adjacency="add_remove", contribution=ContributionBound(1))


def test_mean_from_noisy_without_noise_is_the_mean():
    values = [Fraction(v) for v in (3, 8, 10, 23)]
    centered = sum(v - HOURS.midpoint for v in values)
    assert mean_from_noisy(centered, len(values), HOURS) == sum(values) / len(values)


def test_mean_from_noisy_clamps_and_floors_the_denominator():
    assert mean_from_noisy(1000.0, 2.0, HOURS) == 24
    assert mean_from_noisy(-1000.0, 2.0, HOURS) == 0
    # a negative noisy count is replaced by the public floor
    assert mean_from_noisy(6, -5, HOURS) == 18
    assert mean_from_noisy(6, -5, HOURS, min_denominator=3) == 14
    assert mean_from_noisy("0.5", "0.1", HOURS, min_denominator="0.5") == 13


def test_plan_finish_matches_mean_from_noisy():
    plan = mean_private_n_plan(HOURS, epsilon=1, adjacency="add_remove", contribution=ContributionBound(1))
    assert plan.finish(-12.5, 10.0) == mean_from_noisy(-12.5, 10.0, HOURS) == Fraction(1075, 100)


@pytest.mark.parametrize("floor", [0, -1, "0"])
def test_min_denominator_must_be_positive(floor):
    with pytest.raises(UsageError):
        mean_from_noisy(1, 1, HOURS, min_denominator=floor)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), None, "abc"])
def test_noisy_inputs_must_be_finite_numbers(bad):
    with pytest.raises(InvalidData):
        mean_from_noisy(bad, 3, HOURS)
    with pytest.raises(InvalidData):
        mean_from_noisy(3, bad, HOURS)


@given(
    s=st.floats(-1e9, 1e9),
    n=st.floats(-1e6, 1e6),
)
def test_mean_from_noisy_always_lands_in_the_bounds(s, n):
    assert 0 <= mean_from_noisy(s, n, HOURS) <= 24
