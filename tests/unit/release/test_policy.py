"""The privacy policy record: complete, consistent with the budget, δ well below 1/population."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dpsense.core import ApproxDP, PureDP
from dpsense.core.errors import InvalidPrivacyParameter, UsageError
from dpsense.release import DELTA_POPULATION_FACTOR, Budget, PrivacyPolicy
from tests.system.release.support import policy


def test_delta_at_the_limit_passes_and_just_above_fails() -> None:
    pop = 50_000
    limit = Fraction(1, DELTA_POPULATION_FACTOR * pop)
    policy(population=pop).check(ApproxDP(2, limit))
    with pytest.raises(InvalidPrivacyParameter, match="well below 1/population"):
        policy(population=pop).check(ApproxDP(2, limit * Fraction(11, 10)))


def test_pure_budgets_need_no_delta_rationale_beyond_the_text() -> None:
    policy().check(PureDP(4))


def test_cap_within_budget_and_dates_in_order() -> None:
    with pytest.raises(InvalidPrivacyParameter, match="per-release"):
        policy(per_release_epsilon=5).check(PureDP(4))
    with pytest.raises(UsageError, match="next_review must not be before"):
        policy(approved_on="2027-01-01", next_review="2026-01-01").check(PureDP(4))
    with pytest.raises(UsageError, match="population"):
        policy(population=0).check(PureDP(4))


def test_the_policy_round_trips_through_json_exactly() -> None:
    original = policy(per_release_epsilon="0.3")
    doc = original.to_json()
    assert doc["per_release_epsilon"] == "3/10"
    back = PrivacyPolicy.from_json(doc)
    assert back.epsilon_cap == Fraction(3, 10) and back.to_json() == doc


def test_budget_is_pure_without_delta_and_refuses_bad_values() -> None:
    assert Budget(2).as_loss() == PureDP(2)
    assert Budget(2, 1e-9).as_loss() == ApproxDP(2, Fraction(1, 10**9))
    with pytest.raises(InvalidPrivacyParameter):
        Budget(2, 1).as_loss()
