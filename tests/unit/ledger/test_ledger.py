from __future__ import annotations

from fractions import Fraction

import pytest

from dpsense.core import ZCDP, ApproxDP, PureDP
from dpsense.core.errors import (
    BudgetExhausted,
    InvalidPrivacyParameter,
    LedgerStateError,
    RequestIdConflict,
    UnknownAnalyst,
    UnknownDataset,
    UnsupportedRequest,
)
from dpsense.ledger import ChargeState, Ledger, ReleaseRecord, Scope
from tests.unit.ledger.support import rows, snapshot

RECORD = ReleaseRecord(
    value={"count": 41.7},
    mechanism="laplace",
    mechanism_version="1",
    parameters={"epsilon": "0.01"},
    privacy_unit="person_id",
    adjacency="add_remove",
    code_version="0.1.0",
)


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

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


def spend(ledger: Ledger, rid: str, eps: float | str = 0.01, analyst: str = "alice", **kw: object):
    res = ledger.reserve(dataset="events", analyst=analyst, request_id=rid, loss=PureDP(eps), **kw)
    return res, ledger.commit(res, RECORD)


def test_thousand_debits_of_a_hundredth_fill_a_cap_of_ten_exactly(ledger: Ledger) -> None:
    for i in range(1000):
        ledger.reserve(dataset="events", analyst="alice", request_id=f"r{i}", loss=PureDP(0.01))
    assert ledger.budget("events").spent == ApproxDP(10, 0)
    with pytest.raises(BudgetExhausted) as info:
        ledger.reserve(dataset="events", analyst="alice", request_id="r1000", loss=PureDP(0.01))
    assert info.value.scope == "dataset total"
    assert info.value.requested == ApproxDP(Fraction(1, 100), 0)
    assert info.value.remaining == ApproxDP(0, 0)
    assert "raise this budget" in str(info.value)


def test_three_tenths_fit_a_cap_of_three_tenths(ledger: Ledger) -> None:
    ledger.register_dataset("small", budget=PureDP(0.3))
    for i in range(3):
        ledger.reserve(dataset="small", analyst="alice", request_id=f"s{i}", loss=PureDP(0.1))
    assert ledger.budget("small").remaining == ApproxDP(0, 0)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"loss": PureDP(0)}, InvalidPrivacyParameter),
        ({"loss": 0.5}, InvalidPrivacyParameter),
        ({"dataset": "nope"}, UnknownDataset),
        ({"analyst": "mallory"}, UnknownAnalyst),
        ({"loss": PureDP(11)}, BudgetExhausted),
        ({"loss": ApproxDP(1, 1e-9), "dataset": "rho"}, UnsupportedRequest),
        ({"loss": ZCDP(0.1)}, UnsupportedRequest),
        ({"request_id": ""}, Exception),
    ],
)
def test_bad_input_is_refused_and_leaves_the_ledger_bytes_unchanged(
    ledger: Ledger, ledger_url: str, kwargs: dict[str, object], error: type[Exception]
) -> None:
    ledger.register_dataset("rho", budget=ZCDP(1))
    spend(ledger, "first")
    before = snapshot(ledger_url)
    args: dict[str, object] = {"dataset": "events", "analyst": "alice", "request_id": "x", "loss": PureDP(1)}
    with pytest.raises(error):
        ledger.reserve(**(args | kwargs))  # type: ignore[arg-type]
    assert snapshot(ledger_url) == before


def test_negative_and_nan_amounts_never_reach_the_ledger() -> None:
    with pytest.raises(InvalidPrivacyParameter):
        PureDP(-0.1)
    with pytest.raises(InvalidPrivacyParameter):
        ApproxDP(float("nan"), 0)


def test_every_scope_is_debited_and_a_refusal_names_the_scope(ledger: Ledger, clock: Clock) -> None:
    now = int(clock.now)
    ledger.set_budget("events", Scope.analyst("alice"), PureDP(1))
    ledger.set_budget("events", Scope.family("counts"), PureDP(0.5))
    ledger.set_budget("events", Scope.period(now - 10, now + 10), PureDP(2))
    spend(ledger, "a", 0.25, family="counts")
    for scope in (Scope.total(), Scope.analyst("alice"), Scope.family("counts"), Scope.period(now - 10, now + 10)):
        assert ledger.budget("events", scope).spent == ApproxDP(0.25, 0)
    with pytest.raises(BudgetExhausted, match="family 'counts'"):
        spend(ledger, "b", 0.3, family="counts")
    spend(ledger, "c", 0.7)  # no family: the family budget does not apply
    with pytest.raises(BudgetExhausted, match="analyst 'alice'"):
        spend(ledger, "d", 0.1)
    spend(ledger, "e", 0.9, analyst="bob")
    with pytest.raises(BudgetExhausted, match="period"):
        spend(ledger, "f", 0.2, analyst="bob")
    clock.now += 20  # outside the window: only the total applies to bob
    spend(ledger, "g", 0.2, analyst="bob")
    assert ledger.budget("events").spent == ApproxDP(Fraction(41, 20), 0)


def test_a_retry_returns_the_stored_release_without_a_second_charge(ledger: Ledger) -> None:
    _, first = spend(ledger, "q1", 1)
    again = ledger.reserve(dataset="events", analyst="alice", request_id="q1", loss=PureDP(1))
    assert again.is_replay and again.stored == first
    assert ledger.commit(again, RECORD) == first
    assert ledger.budget("events").spent == ApproxDP(1, 0)
    _, bobs = spend(ledger, "q1", 1, analyst="bob")  # request ids are scoped to the analyst
    assert bobs.release_id != first.release_id
    assert ledger.budget("events").spent == ApproxDP(2, 0)


def test_a_reused_request_id_with_other_parameters_is_refused(ledger: Ledger) -> None:
    spend(ledger, "q1", 1)
    with pytest.raises(RequestIdConflict):
        ledger.reserve(dataset="events", analyst="alice", request_id="q1", loss=PureDP(2))


def test_the_same_cache_key_returns_the_stored_release_at_no_cost(ledger: Ledger) -> None:
    _, first = spend(ledger, "q1", 1, cache_key="fp|count(*)|v1")
    hit = ledger.reserve(dataset="events", analyst="bob", request_id="q9", loss=PureDP(1), cache_key="fp|count(*)|v1")
    assert hit.is_replay and hit.stored == first
    assert ledger.budget("events").spent == ApproxDP(1, 0)
    _, other = spend(ledger, "q2", 1, cache_key="fp|count(*)|v2")
    assert other.release_id != first.release_id and other.cache_key == "fp|count(*)|v2"


def test_failure_before_data_access_refunds_after_data_access_stays_spent(ledger: Ledger) -> None:
    res = ledger.reserve(dataset="events", analyst="alice", request_id="f1", loss=PureDP(1))
    ledger.fail(res, data_accessed=False)
    assert ledger.budget("events").spent == ApproxDP(0, 0)
    res2 = ledger.reserve(dataset="events", analyst="alice", request_id="f2", loss=PureDP(1))
    ledger.fail(res2, data_accessed=True)
    assert ledger.budget("events").spent == ApproxDP(1, 0)
    with pytest.raises(LedgerStateError):
        ledger.commit(res2, RECORD)
    with pytest.raises(LedgerStateError):
        ledger.reserve(dataset="events", analyst="alice", request_id="f2", loss=PureDP(1))
    again = ledger.reserve(dataset="events", analyst="alice", request_id="f1", loss=PureDP(1))  # refunded: re-charge
    assert not again.is_replay and ledger.budget("events").spent == ApproxDP(2, 0)


def test_a_stale_reservation_stays_charged_and_a_retry_completes_it_once(
    ledger_url: str, ledger: Ledger, clock: Clock
) -> None:
    ledger.reserve(dataset="events", analyst="alice", request_id="s1", loss=PureDP(1))  # then "crash"
    clock.now += 3600
    assert ledger.resolve_stale(older_than_s=600) == 1
    assert [c.state for c in ledger.charges("events")] == [ChargeState.ABANDONED]
    assert ledger.budget("events").spent == ApproxDP(1, 0)
    other = Ledger.open(ledger_url, clock=clock)
    retry = other.reserve(dataset="events", analyst="alice", request_id="s1", loss=PureDP(1))
    assert retry.resumed and not retry.is_replay
    with pytest.raises(LedgerStateError):
        other.fail(retry, data_accessed=False)  # never silently refunded
    stored = other.commit(retry, RECORD)
    assert ledger.commit(retry, RECORD) == stored  # a second completion gets the stored value
    assert ledger.budget("events").spent == ApproxDP(1, 0)
    assert len(ledger.releases("events")) == 1
    other.close()


def test_zcdp_budgets_sum_rho_and_convert_pure_losses_exactly(ledger: Ledger) -> None:
    ledger.register_dataset("z", budget=ZCDP(1))
    ledger.reserve(dataset="z", analyst="alice", request_id="z1", loss=ZCDP(0.5))
    ledger.reserve(dataset="z", analyst="alice", request_id="z2", loss=PureDP(0.5))  # rho = 1/8
    assert ledger.budget("z").spent == ZCDP(Fraction(5, 8))
    with pytest.raises(BudgetExhausted) as info:
        ledger.reserve(dataset="z", analyst="alice", request_id="z3", loss=ZCDP(0.5))
    assert info.value.remaining == ZCDP(Fraction(3, 8))


def test_delta_is_summed_exactly_in_basic_mode(ledger: Ledger) -> None:
    ledger.register_dataset("d", budget=ApproxDP(1, 1e-6))
    for i in range(10):
        ledger.reserve(dataset="d", analyst="alice", request_id=f"d{i}", loss=ApproxDP(0.01, 1e-7))
    with pytest.raises(BudgetExhausted):
        ledger.reserve(dataset="d", analyst="alice", request_id="d10", loss=ApproxDP(0.01, 1e-7))
    assert ledger.budget("d").spent == ApproxDP(Fraction(1, 10), Fraction(1, 10**6))


def test_reregistering_the_same_fingerprint_links_to_the_same_budget(ledger: Ledger) -> None:
    assert ledger.register_dataset("a", budget=PureDP(1), fingerprint="fp1") == "a"
    assert ledger.register_dataset("a-again", budget=PureDP(5), fingerprint="fp1") == "a"
    assert ledger.budget("a").cap == ApproxDP(1, 0)


def test_the_fingerprint_key_is_stable_and_never_written_to_the_audit_log(ledger_url: str, ledger: Ledger) -> None:
    key = ledger.fingerprint_key()
    assert len(key) == 32 and ledger.fingerprint_key() == key
    log = repr(rows(ledger_url, "SELECT * FROM audit_log"))
    assert "secret_created" in log and key.hex() not in log and repr(key) not in log
    assert ledger.verify().ok


def test_reopening_does_not_migrate_twice(ledger_url: str, ledger: Ledger) -> None:
    spend(ledger, "q", 1)
    with Ledger.open(ledger_url) as again:
        assert again.budget("events").spent == ApproxDP(1, 0)
        assert again.verify().ok
