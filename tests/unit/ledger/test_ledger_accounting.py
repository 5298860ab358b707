"""Ledger gaps: audited answers without a charge, sub-budgets created late, PLD accounting (both backends)."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from dpsense.accounting.pld import GaussianEvent, LaplaceEvent, pld_epsilon
from dpsense.core import ZCDP, ApproxDP, PureDP
from dpsense.core.errors import BudgetExhausted, InvalidPrivacyParameter, RequestIdConflict, UnsupportedRequest
from dpsense.ledger import Ledger, ReleaseRecord, Scope
from tests.unit.ledger.support import rows, snapshot

RECORD = ReleaseRecord({"count": 41.7}, "laplace", "1", {}, "person_id", "add_remove", "0.1.0")
NOW = 1_700_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ledger(ledger_url: str, clock: Clock):
    led = Ledger.open(ledger_url, clock=clock)
    led.add_analyst("alice")
    led.add_analyst("bob")
    led.register_dataset("events", budget=PureDP(10))
    yield led
    led.close()


def spend(ledger: Ledger, rid: str, eps: str = "0.1", analyst: str = "alice", dataset: str = "events", **kw: object):
    res = ledger.reserve(dataset=dataset, analyst=analyst, request_id=rid, loss=PureDP(eps), **kw)  # type: ignore[arg-type]
    return res, ledger.commit(res, RECORD)


def audit(url: str) -> list[tuple[str, dict[str, object]]]:
    return [(str(e), json.loads(str(p))) for e, p in rows(url, "SELECT event, payload FROM audit_log ORDER BY seq")]


# ---------------------------------------------------------------- 1. answers without a charge are audited


def test_a_cache_hit_is_audited_without_a_charge_and_without_the_value(ledger: Ledger, ledger_url: str) -> None:
    _, first = spend(ledger, "q1", "1", cache_key="fp|count|v1")
    hit = ledger.reserve(dataset="events", analyst="bob", request_id="q9", loss=PureDP(1), cache_key="fp|count|v1")
    assert hit.is_replay and hit.stored == first
    assert ledger.budget("events").spent == ApproxDP(1, 0)
    assert len(ledger.charges("events")) == 1
    event, payload = audit(ledger_url)[-1]
    assert event == "cache_hit"
    assert payload == {
        "dataset": "events",
        "analyst": "bob",
        "request_id": "q9",
        "charge": first.charge_id,
        "release": first.release_id,
        "cache_key": "fp|count|v1",
    }
    assert "41.7" not in json.dumps(audit(ledger_url))  # no released value in the chain, only its digest
    assert ledger.verify().ok


def test_a_replay_and_a_resumption_are_audited_without_a_charge(ledger: Ledger, ledger_url: str) -> None:
    _, first = spend(ledger, "q1", "1")
    again = ledger.reserve(dataset="events", analyst="alice", request_id="q1", loss=PureDP(1))
    assert again.stored == first
    assert audit(ledger_url)[-1] == (
        "replay",
        {"dataset": "events", "analyst": "alice", "request_id": "q1", "charge": first.charge_id, "release": 1},
    )
    open_res = ledger.reserve(dataset="events", analyst="alice", request_id="q2", loss=PureDP(1))
    resumed = ledger.reserve(dataset="events", analyst="alice", request_id="q2", loss=PureDP(1))
    assert resumed.resumed
    event, payload = audit(ledger_url)[-1]
    assert event == "resume" and payload["charge"] == open_res.charge_id and payload["state"] == "reserved"
    assert ledger.budget("events").spent == ApproxDP(2, 0)
    assert [e for e, _ in audit(ledger_url)].count("reserve") == 2
    assert ledger.verify().ok


def test_refused_replays_still_leave_the_ledger_bytes_unchanged(ledger: Ledger, ledger_url: str) -> None:
    spend(ledger, "q1", "1", cache_key="k1")
    before = snapshot(ledger_url)
    with pytest.raises(RequestIdConflict):
        ledger.reserve(dataset="events", analyst="alice", request_id="q1", loss=PureDP(2))
    with pytest.raises(RequestIdConflict):
        ledger.reserve(dataset="events", analyst="alice", request_id="q1", loss=PureDP(1), cache_key="k2")
    with pytest.raises(InvalidPrivacyParameter):
        ledger.reserve(dataset="events", analyst="bob", request_id="q", loss=PureDP(1), cache_key="k1", event="lap")  # type: ignore[arg-type]
    assert snapshot(ledger_url) == before


# ---------------------------------------------------------------- 2. sub-budgets created after spending


def test_an_analyst_budget_created_late_counts_earlier_spends(ledger: Ledger) -> None:
    spend(ledger, "a1", "0.2")  # committed
    ledger.reserve(dataset="events", analyst="alice", request_id="a2", loss=PureDP("0.2"))  # reserved
    failed = ledger.reserve(dataset="events", analyst="alice", request_id="a3", loss=PureDP("0.1"))
    ledger.fail(failed, data_accessed=True)  # stays spent
    refunded = ledger.reserve(dataset="events", analyst="alice", request_id="a4", loss=PureDP("1"))
    ledger.fail(refunded, data_accessed=False)  # does not count
    spend(ledger, "b1", "0.3", analyst="bob")
    ledger.set_budget("events", Scope.analyst("alice"), PureDP("0.4"))  # below the 0.5 alice spent
    status = ledger.budget("events", Scope.analyst("alice"))
    assert status.spent == ApproxDP(Fraction(1, 2), 0) and status.remaining == ApproxDP(0, 0)
    with pytest.raises(BudgetExhausted, match="analyst 'alice'"):
        spend(ledger, "a5", "0.01")
    spend(ledger, "b2", "0.5", analyst="bob")  # bob is unaffected
    assert ledger.budget("events").spent == ApproxDP(Fraction(13, 10), 0)  # the total still applies to both
    assert ledger.verify().ok


def test_late_family_and_period_budgets_count_only_their_own_charges(ledger: Ledger, clock: Clock) -> None:
    spend(ledger, "c1", "0.25", family="counts")
    spend(ledger, "c2", "0.5", family="sums")
    clock.now += 100
    spend(ledger, "c3", "0.125", analyst="bob")
    now = int(clock.now)
    ledger.set_budget("events", Scope.family("counts"), PureDP("0.3"))
    ledger.set_budget("events", Scope.period(now - 50, now + 50), PureDP("0.2"))
    ledger.set_budget("events", Scope.period(now - 1000, now - 200), PureDP("0.2"))
    assert ledger.budget("events", Scope.family("counts")).spent == ApproxDP(Fraction(1, 4), 0)
    assert ledger.budget("events", Scope.period(now - 50, now + 50)).spent == ApproxDP(Fraction(1, 8), 0)
    assert ledger.budget("events", Scope.period(now - 1000, now - 200)).spent == ApproxDP(0, 0)
    with pytest.raises(BudgetExhausted, match="family 'counts'"):
        spend(ledger, "c4", "0.1", analyst="bob", family="counts")
    with pytest.raises(BudgetExhausted, match="period"):
        spend(ledger, "c5", "0.1", analyst="bob")
    spend(ledger, "c6", "0.075", analyst="bob")  # 1/8 + 3/40 = 1/5: exactly fills the period
    assert ledger.budget("events", Scope.period(now - 50, now + 50)).remaining == ApproxDP(0, 0)


def test_a_refund_after_a_late_sub_budget_gives_it_back_too(ledger: Ledger) -> None:
    held = ledger.reserve(dataset="events", analyst="alice", request_id="h", loss=PureDP("0.2"))
    ledger.set_budget("events", Scope.analyst("alice"), PureDP("0.25"))
    assert ledger.budget("events", Scope.analyst("alice")).spent == ApproxDP(Fraction(1, 5), 0)
    ledger.fail(held, data_accessed=False)
    assert ledger.budget("events", Scope.analyst("alice")).spent == ApproxDP(0, 0)
    assert ledger.budget("events").spent == ApproxDP(0, 0)
    spend(ledger, "h2", "0.25")


def test_a_late_zcdp_sub_budget_converts_pure_spends_exactly(ledger: Ledger) -> None:
    ledger.register_dataset("z", budget=ZCDP(1))
    ledger.reserve(dataset="z", analyst="alice", request_id="z1", loss=PureDP("0.5"))  # rho = 1/8
    ledger.reserve(dataset="z", analyst="alice", request_id="z2", loss=ZCDP("0.25"))
    ledger.set_budget("z", Scope.analyst("alice"), ZCDP("0.5"))
    assert ledger.budget("z", Scope.analyst("alice")).spent == ZCDP(Fraction(3, 8))
    with pytest.raises(BudgetExhausted, match="analyst 'alice'"):
        ledger.reserve(dataset="z", analyst="alice", request_id="z3", loss=ZCDP("0.25"))


# ---------------------------------------------------------------- 3. PLD accounting

CAP = ApproxDP("0.5", "1e-5")
STEP = LaplaceEvent(scale=50.0, sensitivity=1.0)  # a pure 0.02-DP release


def fill(ledger: Ledger, dataset: str, limit: int, **kw: object) -> int:
    """Reserve ε = 0.02 Laplace releases until refused; returns how many fit."""
    for i in range(limit):
        try:
            spend(ledger, f"{dataset}-{i}", "0.02", dataset=dataset, event=STEP, **kw)
        except BudgetExhausted:
            return i
    raise AssertionError("never refused")


def test_pld_fits_many_more_laplace_releases_than_basic_composition_and_never_exceeds_the_cap(
    ledger: Ledger,
) -> None:
    ledger.register_dataset("basic", budget=CAP)
    ledger.register_dataset("pld", budget=CAP, accounting="pld")
    basic, pld = fill(ledger, "basic", 40), fill(ledger, "pld", 200)
    assert basic == 25  # 25 x 0.02 = 0.5
    assert pld >= 2 * basic  # the PLD composition is far tighter than the sum
    spent = ledger.budget("pld").spent
    assert isinstance(spent, ApproxDP) and spent.delta == CAP.delta
    assert spent.epsilon == pld_epsilon([STEP] * pld, delta=CAP.delta).epsilon <= CAP.epsilon
    assert pld_epsilon([STEP] * (pld + 1), delta=CAP.delta).epsilon > CAP.epsilon  # the refused one would overspend
    status = ledger.budget("pld")
    assert status.mode == "pld" and status.remaining == ApproxDP(CAP.epsilon - spent.epsilon, CAP.delta)
    assert ledger.verify().ok


def test_pld_budgets_refuse_charges_without_an_event_and_leave_the_bytes_unchanged(
    ledger: Ledger, ledger_url: str
) -> None:
    ledger.register_dataset("pld", budget=CAP, accounting="pld")
    spend(ledger, "p0", "0.02", dataset="pld", event=STEP)
    before = snapshot(ledger_url)
    with pytest.raises(UnsupportedRequest, match="accounted with PLD"):
        spend(ledger, "p1", "0.02", dataset="pld")
    with pytest.raises(RequestIdConflict):
        spend(ledger, "p0", "0.02", dataset="pld", event=LaplaceEvent(25.0, 1.0))
    assert snapshot(ledger_url) == before
    with pytest.raises(InvalidPrivacyParameter):
        ledger.register_dataset("pure", budget=PureDP(1), accounting="pld")
    spend(ledger, "e0", "0.1")  # a charge without an event: a PLD sub-budget over it cannot count it
    with pytest.raises(UnsupportedRequest, match="accounted with PLD"):
        ledger.set_budget("events", Scope.analyst("alice"), CAP, accounting="pld")


def test_pld_refunds_recompute_and_gaussian_events_compose(ledger: Ledger) -> None:
    ledger.register_dataset("pld", budget=ApproxDP(1, "1e-6"), accounting="pld")
    gauss = GaussianEvent(sigma=20.0, sensitivity=1.0)
    spend(ledger, "g0", "0.3", dataset="pld", event=gauss)
    one = ledger.budget("pld").spent
    held = ledger.reserve(dataset="pld", analyst="alice", request_id="g1", loss=PureDP("0.02"), event=STEP)
    assert ledger.budget("pld").spent == pld_epsilon([gauss, STEP], delta=Fraction(1, 10**6))
    ledger.fail(held, data_accessed=False)
    assert ledger.budget("pld").spent == one
    ledger.set_budget("pld", Scope.analyst("bob"), ApproxDP("0.1", "1e-6"), accounting="pld")
    with pytest.raises(BudgetExhausted, match="analyst 'bob'"):
        spend(ledger, "b0", "0.3", analyst="bob", dataset="pld", event=gauss)
    spend(ledger, "b1", "0.02", analyst="bob", dataset="pld", event=STEP)
    assert ledger.budget("pld", Scope.analyst("bob")).spent == pld_epsilon([STEP], delta=Fraction(1, 10**6))
    with pytest.raises(Exception, match="below what is spent"):
        ledger.set_budget("pld", Scope.total(), ApproxDP("0.1", "1e-6"), accounting="pld")
