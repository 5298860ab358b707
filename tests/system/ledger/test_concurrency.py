"""16 processes race to debit one budget; the ledger must never overspend (both backends).

Each round: 16 processes x 200 attempts of ε = 0.01 (reserve + commit) against a cap of ε = 10.
Exactly 1000 succeed, every other attempt is refused with BudgetExhausted; 8 rounds on each
backend (about 1 s per round on SQLite and 2.5 s on PostgreSQL, 2 cores). ``DPSENSE_LEDGER_ROUNDS``
and ``DPSENSE_LEDGER_ATTEMPTS`` (per process; the cap scales with it) override them for quick runs.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from fractions import Fraction

import pytest

from dpsense.core import ApproxDP, PureDP
from dpsense.core.errors import BudgetExhausted
from dpsense.ledger import ChargeState, Ledger, ReleaseRecord

PROCESSES = 16
ATTEMPTS = int(os.environ.get("DPSENSE_LEDGER_ATTEMPTS") or 100)
#: Debits of ε = 0.01 the cap admits: 5/16 of the attempts succeed.
SUCCESSES = PROCESSES * ATTEMPTS * 5 // 16
#: Rounds of the race (each a fresh dataset); DPSENSE_LEDGER_ROUNDS=20 for a longer stress run.
ROUNDS = int(os.environ.get("DPSENSE_LEDGER_ROUNDS") or 3)


RECORD = ReleaseRecord(0.5, "laplace", "1", {}, "person_id", "add_remove", "0.1.0")


def _worker(url: str, dataset: str, worker: int) -> tuple[int, int, list[str]]:
    ok = refused = 0
    other: list[str] = []
    with Ledger.open(url) as ledger:
        for i in range(ATTEMPTS):
            try:
                res = ledger.reserve(
                    dataset=dataset, analyst=f"a{worker}", request_id=f"{dataset}-{i}", loss=PureDP(0.01)
                )
                ledger.commit(res, RECORD)
                ok += 1
            except BudgetExhausted:
                refused += 1
            except Exception as exc:
                other.append(repr(exc))
    return ok, refused, other


def test_concurrent_debits_never_exceed_the_cap(ledger_url: str) -> None:
    rounds = ROUNDS
    with Ledger.open(ledger_url) as ledger:
        for w in range(PROCESSES):
            ledger.add_analyst(f"a{w}")
        for r in range(rounds):
            ledger.register_dataset(f"round{r}", budget=PureDP(Fraction(SUCCESSES, 100)))
    ctx = mp.get_context("fork")
    with ctx.Pool(PROCESSES) as pool:
        for r in range(rounds):
            results = pool.starmap(_worker, [(ledger_url, f"round{r}", w) for w in range(PROCESSES)])
            assert [e for _, _, errs in results for e in errs] == []
            assert sum(ok for ok, _, _ in results) == SUCCESSES
            assert sum(refused for _, refused, _ in results) == PROCESSES * ATTEMPTS - SUCCESSES
    with Ledger.open(ledger_url) as ledger:
        for r in range(rounds):
            assert ledger.budget(f"round{r}").spent == ApproxDP(Fraction(SUCCESSES, 100), 0)
            charges = ledger.charges(f"round{r}")
            assert len(charges) == SUCCESSES and all(c.state == ChargeState.COMMITTED for c in charges)
            assert len(ledger.releases(f"round{r}")) == SUCCESSES
        assert ledger.verify().ok


@pytest.mark.parametrize("n", [PROCESSES])
def test_concurrent_retries_of_one_request_charge_once(ledger_url: str, n: int) -> None:
    with Ledger.open(ledger_url) as ledger:
        ledger.add_analyst("a0")
        ledger.register_dataset("same", budget=PureDP(10))
    ctx = mp.get_context("fork")
    with ctx.Pool(n) as pool:
        values = pool.starmap(_retry_worker, [(ledger_url, w) for w in range(n)])
    assert len(set(values)) == 1
    with Ledger.open(ledger_url) as ledger:
        assert ledger.budget("same").spent == ApproxDP(1, 0)
        assert len(ledger.releases("same")) == 1


def _retry_worker(url: str, worker: int) -> str:
    with Ledger.open(url) as ledger:
        res = ledger.reserve(dataset="same", analyst="a0", request_id="one", loss=PureDP(1))
        if res.stored is not None:
            return repr(res.stored.value)
        record = ReleaseRecord(float(worker), "laplace", "1", {}, "person_id", "add_remove", "0.1.0")
        return repr(ledger.commit(res, record).value)
