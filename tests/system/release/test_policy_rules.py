"""The privacy policy's rules apply wherever a budget is created or changed, and to every release.

The policy of ``support.policy()``: population 10^6 (δ rule: δ <= 1e-7), per-release ε cap 2.
``check_budget_policy`` and ``check_release_policy`` are tested directly on a real ledger; the tests
through ``Session.set_budget`` / ``Session.release`` run once the Session calls them.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

import dpsense as dp
from dpsense.core.errors import BudgetExhausted, InvalidPrivacyParameter
from dpsense.core.privacy_loss import ApproxDP, PureDP
from dpsense.ledger import Scope
from dpsense.release._policy import check_budget_policy, check_release_policy, recorded_policies
from tests.system.release.support import planted, policy, register

_SESSION_SOURCE = inspect.getsource(dp.Session)
needs_budget_call = pytest.mark.skipif(
    "check_budget_policy" not in _SESSION_SOURCE, reason="Session.set_budget does not call check_budget_policy yet"
)
needs_release_call = pytest.mark.skipif(
    "check_release_policy" not in _SESSION_SOURCE, reason="Session._planned does not call check_release_policy yet"
)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture
def steward(url: str) -> Iterator[dp.Session]:
    with dp.Session.open(url, analyst="steward", role="steward") as session:
        yield session


@pytest.fixture
def other(url: str) -> Iterator[dp.Session]:
    """A second steward session (one session holds one snapshot per dataset name)."""
    with dp.Session.open(url, analyst="steward", role="steward") as session:
        yield session


@pytest.fixture
def events(steward: dp.Session) -> dp.Dataset:
    return register(steward, planted())


def _state(session: dp.Session) -> tuple[Any, ...]:
    """What a refused change must leave as it was: the total budget and the audit chain's length."""
    return (session.budget("events").cap, session.verify_log().entries, len(session.ledger.charges("events")))


def _gaussian(dataset: dp.Dataset) -> dp.Query:
    return dataset.query().agg(n=dp.count(mechanism="gaussian"))


# -- set_budget ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scope", [Scope.total(), Scope.analyst("steward"), Scope.family("weekly"), Scope.period(0, 2**40)]
)
def test_a_budget_delta_above_the_rule_is_refused_for_every_scope(
    steward: dp.Session, events: dp.Dataset, scope: Scope
) -> None:
    before = _state(steward)
    with pytest.raises(InvalidPrivacyParameter, match=r"1/\(10 x population\)") as err:
        check_budget_policy(steward.ledger, "events", scope, dp.Budget(epsilon=10, delta=1e-3))
    assert "delta <= 1e-07" in str(err.value) and str(scope) in str(err.value)
    assert _state(steward) == before


def test_budgets_within_the_rules_pass(steward: dp.Session, events: dp.Dataset) -> None:
    check_budget_policy(steward.ledger, "events", Scope.total(), dp.Budget(epsilon=20, delta=1e-7))
    check_budget_policy(steward.ledger, "events", Scope.total(), dp.Budget(epsilon=2))
    # a sub-budget below the per-release cap only limits its scope: allowed
    check_budget_policy(steward.ledger, "events", Scope.analyst("alice"), dp.Budget(epsilon=0.5, delta=1e-9))


def test_a_total_below_the_per_release_cap_is_refused(steward: dp.Session, events: dp.Dataset) -> None:
    with pytest.raises(InvalidPrivacyParameter, match="per_release_epsilon <= total ε") as err:
        check_budget_policy(steward.ledger, "events", Scope.total(), dp.Budget(epsilon=1))
    assert "set the total epsilon to at least 2" in str(err.value)


def test_every_snapshots_policy_applies(steward: dp.Session, other: dp.Session, events: dp.Dataset) -> None:
    frame = planted()
    frame.loc[0, "hours"] = 3.25  # other data: a new snapshot, not a link
    register(other, frame, snapshot="v2", policy=policy(population=10_000_000))
    assert [p.population for p in recorded_policies(steward.ledger, "events")] == [1_000_000, 10_000_000]
    with pytest.raises(InvalidPrivacyParameter, match=r"delta <= 1e-08"):
        check_budget_policy(steward.ledger, "events", Scope.total(), dp.Budget(epsilon=10, delta=5e-8))


@needs_budget_call
def test_session_set_budget_refuses_a_delta_above_the_rule(steward: dp.Session, events: dp.Dataset) -> None:
    before = _state(steward)
    with pytest.raises(InvalidPrivacyParameter, match=r"1/\(10 x population\)"):
        steward.set_budget("events", Scope.total(), dp.Budget(epsilon=10, delta=1e-3))
    with pytest.raises(InvalidPrivacyParameter, match=r"1/\(10 x population\)"):
        steward.set_budget("events", Scope.analyst("steward"), dp.Budget(epsilon=1, delta=1e-3))
    with pytest.raises(InvalidPrivacyParameter, match="per_release_epsilon"):
        steward.set_budget("events", Scope.total(), dp.Budget(epsilon=1))
    assert _state(steward) == before
    steward.set_budget("events", Scope.total(), dp.Budget(epsilon=10, delta=1e-7))  # within the rules
    assert steward.budget("events").cap == dp.Budget(epsilon=10, delta=1e-7).as_loss()


# -- releases --------------------------------------------------------------------------------------


def test_a_release_delta_above_the_rule_is_refused(events: dp.Dataset) -> None:
    rules = events.profile.policy
    with pytest.raises(InvalidPrivacyParameter, match="above the policy's δ rule") as err:
        check_release_policy(rules, ApproxDP(Fraction(1), Fraction(1, 10**4)))
    assert "delta <= 1e-07" in str(err.value)
    check_release_policy(rules, ApproxDP(Fraction(1), Fraction(1, 10**7)))  # at the rule: allowed
    check_release_policy(rules, PureDP(Fraction(2)))
    with pytest.raises(InvalidPrivacyParameter, match="per-release cap"):
        check_release_policy(rules, ApproxDP(Fraction(3), Fraction(1, 10**9)))
    check_release_policy(None, ApproxDP(Fraction(1), Fraction(1, 10**4)))  # no recorded policy: nothing to check


@needs_release_call
def test_session_refuses_a_release_delta_above_the_rule_before_the_ledger(
    steward: dp.Session, events: dp.Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_reserve(**_: object) -> None:
        raise AssertionError("the ledger was reached")

    before = _state(steward)
    monkeypatch.setattr(steward.ledger, "reserve", no_reserve)
    with pytest.raises(InvalidPrivacyParameter, match="above the policy's δ rule"):
        steward.release(_gaussian(events), epsilon=1, delta=1e-4)
    with pytest.raises(InvalidPrivacyParameter, match="per-release cap"):
        steward.release(_gaussian(events), epsilon=3, delta=1e-9)
    monkeypatch.undo()
    assert _state(steward) == before


def test_a_release_delta_above_the_budget_is_refused_without_a_charge(steward: dp.Session, events: dp.Dataset) -> None:
    """Within the δ rule but above the budget's δ (1e-8): the ledger refuses it; nothing is charged."""
    before = _state(steward)
    with pytest.raises(BudgetExhausted):
        steward.release(_gaussian(events), epsilon=1, delta=5e-8)
    assert _state(steward) == before


# -- a new snapshot keeps the dataset's budget -----------------------------------------------------


def test_a_new_snapshot_whose_policy_the_kept_budget_breaks_is_refused(
    steward: dp.Session, other: dp.Session, events: dp.Dataset
) -> None:
    frame = planted()
    frame.loc[0, "hours"] = 3.25
    before = _state(steward)
    # population 10^9: δ rule 1e-10, but the dataset's budget (kept by the snapshot) has δ = 1e-8
    with pytest.raises(InvalidPrivacyParameter, match="a new snapshot keeps the dataset's budget") as err:
        register(other, frame, snapshot="v2", policy=policy(population=10**9), budget=dp.Budget(10, 1e-11))
    assert "set_budget" in str(err.value)
    assert _state(steward) == before and steward.ledger.snapshots("events") == ["v1"]
    # per-release cap 20 above the kept total ε 10
    with pytest.raises(InvalidPrivacyParameter, match="per_release_epsilon"):
        register(other, frame, snapshot="v2", policy=policy(per_release_epsilon=20), budget=dp.Budget(30, 1e-8))
    assert steward.ledger.snapshots("events") == ["v1"]
    register(other, frame, snapshot="v2", policy=policy(population=10**7))  # δ rule 1e-8: the kept budget obeys
    assert steward.ledger.snapshots("events") == ["v1", "v2"]
