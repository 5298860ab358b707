"""``Ledger.budget_scopes`` and ``Ledger.cache_hits``: the public reads the steward's dashboard uses."""

from __future__ import annotations

import pytest

from dpsense.core import ApproxDP, PureDP
from dpsense.core.errors import UnknownDataset
from dpsense.ledger import Ledger, ReleaseRecord, Scope

RECORD = ReleaseRecord(0.5, "laplace", "1", {}, "person_id", "add_remove", "0.1.0")


def test_scopes_list_the_total_first_then_each_sub_budget_and_hits_count_stored_answers(ledger_url: str) -> None:
    with Ledger.open(ledger_url) as ledger:
        ledger.add_analyst("alice")
        ledger.register_dataset("events", budget=PureDP(10))
        ledger.set_budget("events", Scope.analyst("alice"), PureDP(2))
        ledger.set_budget("events", Scope.period(100, 200), PureDP(3))
        ledger.set_budget("events", Scope.family("weekly"), PureDP(1))
        assert ledger.budget_scopes("events") == [
            Scope.total(),
            Scope.analyst("alice"),
            Scope.period(100, 200),
            Scope.family("weekly"),
        ]
        first = ledger.reserve(dataset="events", analyst="alice", request_id="a", loss=PureDP(1), cache_key="k")
        stored = ledger.commit(first, RECORD)
        assert ledger.cache_hits() == {}
        for request in ("b", "c"):
            again = ledger.reserve(dataset="events", analyst="alice", request_id=request, loss=PureDP(1), cache_key="k")
            assert again.stored is not None
        assert ledger.cache_hits() == {stored.release_id: 2}
        with pytest.raises(UnknownDataset):
            ledger.budget_scopes("nope")


def test_a_reservation_carries_its_budgets_as_its_own_transaction_left_them(ledger_url: str) -> None:
    """``Reservation.budgets``: what a second read would say, without one (charge, retry, cache hit)."""
    with Ledger.open(ledger_url) as ledger:
        ledger.add_analyst("alice")
        ledger.add_analyst("bob")
        ledger.register_dataset("events", budget=PureDP(10))
        ledger.set_budget("events", Scope.analyst("alice"), PureDP(2))
        ledger.set_budget("events", Scope.analyst("bob"), PureDP(3))  # bob's scope is not alice's
        charged = ledger.reserve(dataset="events", analyst="alice", request_id="a", loss=PureDP(1), cache_key="k")
        expected = (ledger.budget("events"), ledger.budget("events", Scope.analyst("alice")))
        assert charged.budgets == expected
        assert expected[0].spent == ApproxDP(1, 0) and expected[1].remaining == ApproxDP(1, 0)
        ledger.commit(charged, RECORD)
        for request in ("a", "b"):  # a retry (replayed) and a cache hit: no debit, the same figures
            answer = ledger.reserve(
                dataset="events", analyst="alice", request_id=request, loss=PureDP(1), cache_key="k"
            )
            assert answer.stored is not None and answer.budgets == expected
        other = ledger.reserve(dataset="events", analyst="bob", request_id="c", loss=PureDP(2))
        assert other.budgets == (ledger.budget("events"), ledger.budget("events", Scope.analyst("bob")))
        assert other.budgets[0].spent == ApproxDP(3, 0)
