"""Parallel composition over declared public partitions (docs/math/composition.md), on both backends."""

from __future__ import annotations

import json
import random
from fractions import Fraction

import pytest

from dpsense.accounting.pld import LaplaceEvent
from dpsense.core import ZCDP, ApproxDP, PureDP
from dpsense.core.errors import BudgetExhausted, RequestIdConflict, UnsupportedRequest, UsageError
from dpsense.ledger import Ledger, PartitionSpec, ReleaseRecord, Scope
from dpsense.ledger._partitions import group_cost
from tests.unit.ledger.support import rows, snapshot

RECORD = ReleaseRecord(1.5, "laplace", "1", {}, "person_id", "add_remove", "0.1.0")
PARTS = ("north", "south", "east", "west")


def region(part: str, adjacency: str = "add_remove", c0: int = 1, rule: str = "region") -> PartitionSpec:
    return PartitionSpec(rule, PARTS, part, adjacency, c0)


@pytest.fixture
def ledger(ledger_url: str):
    led = Ledger.open(ledger_url)
    led.add_analyst("alice")
    led.add_analyst("bob")
    led.register_dataset("people", budget=PureDP(1))
    yield led
    led.close()


_ids = iter(range(10**6))


def charge(ledger: Ledger, eps: str, part: PartitionSpec | None = None, **kw: object) -> None:
    kw.setdefault("analyst", "alice")
    res = ledger.reserve(dataset="people", request_id=f"r{next(_ids)}", loss=PureDP(eps), partition=part, **kw)  # type: ignore[arg-type]
    ledger.commit(res, RECORD)


def spent(ledger: Ledger, scope: Scope | None = None) -> Fraction:
    status = ledger.budget("people", scope).spent
    assert isinstance(status, ApproxDP)
    return status.epsilon


def test_parallel_charges_on_disjoint_parts_fit_where_sequential_ones_do_not(ledger: Ledger) -> None:
    for part in PARTS:
        charge(ledger, "0.8", region(part))
    assert spent(ledger) == Fraction(8, 10)  # the max, not 3.2
    assert ledger.verify().ok
    with pytest.raises(BudgetExhausted):
        charge(ledger, "0.8")  # the same release without a partition composes sequentially


def test_the_same_part_twice_sums(ledger: Ledger) -> None:
    charge(ledger, "0.5", region("north"))
    charge(ledger, "0.4", region("north"))
    assert spent(ledger) == Fraction(9, 10)
    with pytest.raises(BudgetExhausted):
        charge(ledger, "0.2", region("north"))
    charge(ledger, "0.9", region("south"))  # another part: the max stays 0.9
    assert spent(ledger) == Fraction(9, 10)


def test_unpartitioned_charges_add_to_the_group_cost(ledger: Ledger) -> None:
    charge(ledger, "0.2")
    charge(ledger, "0.5", region("north"))
    charge(ledger, "0.5", region("south"))
    assert spent(ledger) == Fraction(7, 10)
    with pytest.raises(BudgetExhausted):
        charge(ledger, "0.31", region("east", rule="age_band"))  # a second group adds its own cost


def test_replace_adjacency_costs_the_two_largest_parts(ledger: Ledger) -> None:
    charge(ledger, "0.5", region("north", "replace"))
    charge(ledger, "0.3", region("south", "replace"))
    charge(ledger, "0.2", region("east", "replace"))
    assert spent(ledger) == Fraction(8, 10)
    charge(ledger, "0.3", region("east", "replace"))  # east 0.5: 0.5 + 0.5
    assert spent(ledger) == 1
    charge(ledger, "0.01", region("south", "replace"))  # south 0.31 is not among the two largest
    with pytest.raises(BudgetExhausted):
        charge(ledger, "0.25", region("south", "replace"))  # south 0.56 would be: 1.06


def test_two_parts_per_unit_cost_the_two_largest_and_replace_the_four_largest(ledger: Ledger) -> None:
    for part, eps in zip(PARTS, ("0.4", "0.3", "0.2", "0.1"), strict=True):
        charge(ledger, eps, region(part, c0=2, rule="c0"))
    assert spent(ledger) == Fraction(7, 10)
    for part, eps in zip(PARTS, ("0.1", "0.05", "0.02", "0.01"), strict=True):
        charge(ledger, eps, region(part, "replace", c0=2, rule="c0_replace"))
    assert spent(ledger) == Fraction(7, 10) + Fraction(18, 100)  # span 4: every part


def test_zcdp_budgets_take_the_largest_rho(ledger_url: str) -> None:
    with Ledger.open(ledger_url) as led:
        led.add_analyst("alice")
        led.register_dataset("people", budget=ZCDP(1))
        for part in PARTS:
            res = led.reserve(
                dataset="people", analyst="alice", request_id=part, loss=ZCDP("0.75"), partition=region(part)
            )
            led.commit(res, RECORD)
        assert led.budget("people").spent == ZCDP("0.75")
        with pytest.raises(BudgetExhausted):
            led.reserve(dataset="people", analyst="alice", request_id="x", loss=ZCDP("0.5"), partition=region("west"))


def test_the_cap_is_never_exceeded_and_spend_matches_the_formula(ledger_url: str) -> None:
    rng = random.Random(7)
    cap = (Fraction(3), Fraction(1, 1000))
    decls = [None, ("region", "add_remove", 1), ("region2", "replace", 1), ("region3", "add_remove", 2)]
    groups: dict[str, dict[str, tuple[Fraction, Fraction]]] = {}
    plain = (Fraction(0), Fraction(0))
    span = {"region": 1, "region2": 2, "region3": 2}
    with Ledger.open(ledger_url) as led:
        led.add_analyst("a")
        led.register_dataset("people", budget=ApproxDP(*cap))
        for i in range(60):
            eps, delta = Fraction(rng.randint(1, 40), 100), Fraction(rng.randint(0, 3), 10**5)
            decl = rng.choice(decls)
            part = rng.choice(PARTS)
            spec = None if decl is None else PartitionSpec(decl[0], PARTS, part, decl[1], decl[2])
            new_plain, new_groups = plain, dict(groups)
            if decl is None:
                new_plain = (plain[0] + eps, plain[1] + delta)
            else:
                spends = dict(groups.get(decl[0], {}))
                old = spends.get(part, (Fraction(0), Fraction(0)))
                spends[part] = (old[0] + eps, old[1] + delta)
                new_groups[decl[0]] = spends
            total = new_plain
            for rule, spends in new_groups.items():
                cost = group_cost(spends, span[rule])
                total = (total[0] + cost[0], total[1] + cost[1])
            fits = total[0] <= cap[0] and total[1] <= cap[1]
            try:
                led.reserve(dataset="people", analyst="a", request_id=str(i), loss=ApproxDP(eps, delta), partition=spec)
            except BudgetExhausted:
                assert not fits
                continue
            assert fits
            plain, groups = new_plain, new_groups
            assert led.budget("people").spent == ApproxDP(*total)
        assert groups and plain[0] > 0


def test_a_refund_recomputes_the_group_cost(ledger: Ledger) -> None:
    res = ledger.reserve(
        dataset="people", analyst="alice", request_id="big", loss=PureDP("0.6"), partition=region("north")
    )
    charge(ledger, "0.4", region("south"))
    assert spent(ledger) == Fraction(6, 10)
    ledger.fail(res, data_accessed=False)
    assert spent(ledger) == Fraction(4, 10)  # not 0.6 - 0.6: south now sets the cost
    again = ledger.reserve(
        dataset="people", analyst="alice", request_id="big", loss=PureDP("0.6"), partition=region("north")
    )
    assert again.charge_id == res.charge_id and spent(ledger) == Fraction(6, 10)
    assert ledger.verify().ok


def test_a_late_sub_budget_counts_the_parallel_cost(ledger: Ledger) -> None:
    charge(ledger, "0.5", region("north"))
    charge(ledger, "0.3", region("south"))
    charge(ledger, "0.1")
    ledger.set_budget("people", Scope.analyst("alice"), PureDP(1))
    assert spent(ledger, Scope.analyst("alice")) == Fraction(6, 10) == spent(ledger)
    charge(ledger, "0.4", region("east"), analyst="bob")  # bob is not in alice's scope
    assert spent(ledger, Scope.analyst("alice")) == Fraction(6, 10)


def test_the_declaration_is_audited_and_a_retry_replays(ledger: Ledger, ledger_url: str) -> None:
    res = ledger.reserve(
        dataset="people", analyst="alice", request_id="q", loss=PureDP("0.5"), partition=region("north")
    )
    first = ledger.commit(res, RECORD)
    again = ledger.reserve(
        dataset="people", analyst="alice", request_id="q", loss=PureDP("0.5"), partition=region("north")
    )
    assert again.stored == first
    payloads = [
        json.loads(str(p)) for (e, p) in rows(ledger_url, "SELECT event, payload FROM audit_log") if e == "reserve"
    ]
    assert payloads[-1]["partition"] == {
        "rule": "region",
        "parts": sorted(PARTS),
        "part": "north",
        "max_parts_per_unit": 1,
        "adjacency": "add_remove",
    }
    with pytest.raises(RequestIdConflict):
        ledger.reserve(dataset="people", analyst="alice", request_id="q", loss=PureDP("0.5"), partition=region("south"))
    assert ledger.verify().ok


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rule": "", "parts": PARTS, "part": "north", "adjacency": "add_remove"},
        {"rule": "r", "parts": (), "part": "north", "adjacency": "add_remove"},
        {"rule": "r", "parts": "north", "part": "north", "adjacency": "add_remove"},
        {"rule": "r", "parts": ("north", "north"), "part": "north", "adjacency": "add_remove"},
        {"rule": "r", "parts": PARTS, "part": "up", "adjacency": "add_remove"},
        {"rule": "r", "parts": PARTS, "part": "north", "adjacency": "swap"},
        {"rule": "r", "parts": PARTS, "part": "north", "adjacency": "replace", "max_parts_per_unit": 0},
        {"rule": "r", "parts": PARTS, "part": "north", "adjacency": "replace", "max_parts_per_unit": 5},
        {"rule": "r", "parts": PARTS, "part": "north", "adjacency": "replace", "max_parts_per_unit": True},
    ],
)
def test_bad_declarations_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        PartitionSpec(**kwargs)  # type: ignore[arg-type]


def test_bad_declarations_leave_the_ledger_bytes_unchanged(ledger: Ledger, ledger_url: str) -> None:
    charge(ledger, "0.5", region("north"))
    before = snapshot(ledger_url)
    conflicting = [
        PartitionSpec("region", (*PARTS, "centre"), "north", "add_remove"),
        region("north", "replace"),
        region("north", c0=2),
    ]
    for spec in conflicting:
        with pytest.raises(UsageError, match="declared differently"):
            charge(ledger, "0.1", spec)
    with pytest.raises(UsageError, match="PartitionSpec"):
        charge(ledger, "0.1", "north")  # type: ignore[arg-type]
    with pytest.raises(BudgetExhausted):
        charge(ledger, "0.6", region("north"))
    assert snapshot(ledger_url) == before


def test_pld_budgets_refuse_partitions_and_leave_the_bytes_unchanged(ledger: Ledger, ledger_url: str) -> None:
    ledger.register_dataset("pld", budget=ApproxDP(1, Fraction(1, 10**6)), accounting="pld")
    before = snapshot(ledger_url)
    with pytest.raises(UnsupportedRequest, match="parallel composition"):
        ledger.reserve(
            dataset="pld",
            analyst="alice",
            request_id="p",
            loss=PureDP("0.1"),
            event=LaplaceEvent(10.0, 1.0),
            partition=region("north"),
        )
    assert snapshot(ledger_url) == before
