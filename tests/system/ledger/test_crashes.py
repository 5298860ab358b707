"""Release processes killed with SIGKILL at random points never overspend or publish unpaid releases.

Each run is a forked process that reserves, "queries" (draws a value), and commits one release,
killed either at a named point (before reserve, after reserve, mid-query, after commit) or by the
parent after a random delay (which can land inside a ledger transaction). Afterwards, on both
backends: committed + reserved <= cap, the budget's spend equals the sum of its charges, every
release has a committed charge and vice versa, and a retry with the same request id returns the
stored release or completes the pending one exactly once.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import signal
import time
from fractions import Fraction

from dpsense.core import ApproxDP, PureDP
from dpsense.core.errors import BudgetExhausted
from dpsense.ledger import ChargeState, Ledger, ReleaseRecord

RUNS = 50
POINTS = ["before_reserve", "after_reserve", "mid_query", "after_commit", "random", "random"]
CAP = 30  # below the number of runs: some attempts are refused


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _release(url: str, request_id: str, point: str) -> None:
    if point == "before_reserve":
        _die()
    with Ledger.open(url) as ledger:
        try:
            res = ledger.reserve(dataset="crash", analyst="alice", request_id=request_id, loss=PureDP(1))
        except BudgetExhausted:
            return
        if point == "after_reserve":
            _die()
        value = random.Random(request_id).random()  # stands in for the noisy answer (seeded: test data)
        if point == "mid_query":
            _die()
        ledger.commit(res, ReleaseRecord(value, "laplace", "1", {}, "person_id", "add_remove", "0.1.0"))
        if point == "after_commit":
            _die()
        time.sleep(1)  # "random" runs are killed by the parent before or during the work above


def test_sigkill_at_any_point_keeps_the_ledger_consistent(ledger_url: str) -> None:
    with Ledger.open(ledger_url) as ledger:
        ledger.add_analyst("alice")
        ledger.register_dataset("crash", budget=PureDP(CAP))
    rng = random.Random(20240607)
    ctx = mp.get_context("fork")
    plan = [(f"req{i}", rng.choice(POINTS)) for i in range(RUNS)]
    for request_id, point in plan:
        proc = ctx.Process(target=_release, args=(ledger_url, request_id, point))
        proc.start()
        if point == "random":
            time.sleep(rng.uniform(0, 0.08))
            os.kill(proc.pid, signal.SIGKILL)  # type: ignore[arg-type]
        proc.join(30)
        assert proc.exitcode is not None
    with Ledger.open(ledger_url) as ledger:
        _check_consistent(ledger)
        by_request = {c.request_id: c for c in ledger.charges("crash")}
        stored_before = {r.charge_id: r for r in ledger.releases("crash")}
        spent_before = ledger.budget("crash").spent
        for request_id, _ in plan:
            if request_id not in by_request:
                continue
            charge = by_request[request_id]
            retry = ledger.reserve(dataset="crash", analyst="alice", request_id=request_id, loss=PureDP(1))
            if charge.state == ChargeState.COMMITTED:
                assert retry.stored == stored_before[charge.charge_id]
                continue
            assert retry.resumed and retry.stored is None
            done = ledger.commit(retry, ReleaseRecord(0.25, "laplace", "1", {}, "person_id", "add_remove", "0.1.0"))
            again = ledger.reserve(dataset="crash", analyst="alice", request_id=request_id, loss=PureDP(1))
            assert again.stored == done
        assert ledger.budget("crash").spent == spent_before  # no retry charged anything
        _check_consistent(ledger)
        assert all(c.state == ChargeState.COMMITTED for c in ledger.charges("crash"))
        assert ledger.verify().ok


def _check_consistent(ledger: Ledger) -> None:
    charges = ledger.charges("crash")
    releases = ledger.releases("crash")
    spent = sum((Fraction(1) for c in charges if c.state != ChargeState.REFUNDED), Fraction(0))
    assert ledger.budget("crash").spent == ApproxDP(spent, 0)
    assert spent <= CAP
    committed = {c.charge_id for c in charges if c.state == ChargeState.COMMITTED}
    assert {r.charge_id for r in releases} == committed
    assert len(releases) == len(committed)
