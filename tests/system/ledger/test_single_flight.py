"""Single flight per cache key (docs/design.md invariant 5) at the ledger, on both backends.

N ∈ {4, 12, 32} callers (threads, each with its own ``Ledger``; and spawned processes, each
opening the ledger URL itself) reserve one identical cache key at the same moment, 10 rounds per
N by default (5 for N = 32, to keep the file near a minute on 2 cores; one set of 32 spawned
processes serves both backends): exactly one reserves and draws, the rest wait and get its stored release;
exactly one caller reports ``charged``; exactly one charge counts. Also: a holder that fails before data access
lets the next one proceed; a SIGKILLed holder blocks the key only for its lease and never leads
to two draws; a holder that outlives its lease is superseded and can no longer commit.
Processes run ``PROCESS_ROUNDS`` = 3 rounds per N and backend by default (1 for N = 32);
``DPSENSE_FLIGHT_ROUNDS`` (threads) and ``DPSENSE_FLIGHT_PROCESS_ROUNDS`` override them (20 and
20 is the full figure: about 60 s for the process test alone on a loaded 2-core machine).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import random
import signal
import threading
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from dpsense.core import ApproxDP, PureDP
from dpsense.core.errors import LedgerStateError
from dpsense.ledger import ChargeState, Ledger, ReleaseRecord
from tests.unit.ledger.support import drop_pg_schema, fresh_pg_schema

ROUNDS = int(os.environ.get("DPSENSE_FLIGHT_ROUNDS") or 10)
PROCESS_ROUNDS = int(os.environ.get("DPSENSE_FLIGHT_PROCESS_ROUNDS") or 3)
SIZES = [4, 12, 32]


def rounds(n: int, base: int = ROUNDS) -> int:
    """``base`` rounds per N, half for the largest (each of its rounds is 32 durable audited answers)."""
    return base if n < max(SIZES) else max(1, base // 2)


ANALYSTS = 3
LOSS = PureDP(Fraction(1, 100))
#: How long the holder "runs" between reserve and commit, so that every other caller arrives meanwhile.
HOLD_S = 0.02


def record(value: float) -> ReleaseRecord:
    return ReleaseRecord(value, "laplace", "1", {}, "person_id", "add_remove", "0.1.0")


def attempt(ledger: Ledger, dataset: str, key: str, analyst: str, request_id: str) -> tuple[bool, bool, float]:
    """One identical request: (drew fresh noise, reported charged, the value answered)."""
    res = ledger.reserve(dataset=dataset, analyst=analyst, request_id=request_id, loss=LOSS, cache_key=key)
    if res.stored is not None:
        return False, False, float(res.stored.value)
    value = random.SystemRandom().random()  # stands in for the noise draw
    time.sleep(HOLD_S)
    done = ledger.commit_outcome(res, record(value))
    return True, done.charged, float(done.stored.value)


def setup(url: str, datasets: list[str]) -> None:
    with Ledger.open(url) as ledger:
        for a in range(ANALYSTS):
            ledger.add_analyst(f"a{a}")
        for name in datasets:
            ledger.register_dataset(name, budget=PureDP(10))


def check_round(url: str, dataset: str, key: str, results: list[tuple[bool, bool, float]], n: int) -> None:
    assert len(results) == n
    assert sum(drew for drew, _, _ in results) == 1, results  # one draw
    assert sum(charged for _, charged, _ in results) == 1, results  # one caller told it paid
    assert len({value for _, _, value in results}) == 1, results  # one value
    with Ledger.open(url) as ledger:
        charges = [c for c in ledger.charges(dataset) if c.cache_key == key]
        assert [c.state for c in charges] == [ChargeState.COMMITTED]  # one charge, and it counts once
        keys = {c.cache_key for c in ledger.charges(dataset)}
        assert ledger.budget(dataset).spent == ApproxDP(Fraction(len(keys), 100), 0)
        assert [r.cache_key for r in ledger.releases(dataset)].count(key) == 1


def run_threads(ledgers: list[Ledger], dataset: str, key: str, same_request: bool) -> list[tuple[bool, bool, float]]:
    n = len(ledgers)
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n
    errors: list[BaseException] = []

    def go(i: int) -> None:
        try:
            barrier.wait(30)
            request_id = f"{key}-same" if same_request else f"{key}-{i}"
            analyst = "a0" if same_request else f"a{i % ANALYSTS}"
            results[i] = attempt(ledgers[i], dataset, key, analyst, request_id)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    return results


@pytest.mark.parametrize("n", SIZES)
def test_identical_requests_from_threads_draw_once(ledger_url: str, n: int) -> None:
    setup(ledger_url, ["flight"])
    ledgers = [Ledger.open(ledger_url) for _ in range(n)]
    try:
        for r in range(rounds(n)):
            key = f"key-{n}-{r}"
            check_round(ledger_url, "flight", key, run_threads(ledgers, "flight", key, same_request=False), n)
    finally:
        for ledger in ledgers:
            ledger.close()


def test_concurrent_retries_of_one_request_report_charged_once(ledger_url: str) -> None:
    """The same (analyst, request id) sent 12 times at once: one draw, one ``charged``, the rest replays."""
    setup(ledger_url, ["retry"])
    ledgers = [Ledger.open(ledger_url) for _ in range(12)]
    try:
        for r in range(5):
            key = f"retry-{r}"
            check_round(ledger_url, "retry", key, run_threads(ledgers, "retry", key, same_request=True), 12)
    finally:
        for ledger in ledgers:
            ledger.close()


# ------------------------------------------------------------------ processes


def _process_worker(urls: list[str], inbox: Any, outbox: Any) -> None:
    ledgers = {url: Ledger.open(url) for url in urls}
    try:
        outbox.put("ready")
        while (job := inbox.get()) is not None:
            url, dataset, key, analyst, request_id, go = job
            time.sleep(max(0.0, go - time.time()))
            try:
                outbox.put(attempt(ledgers[url], dataset, key, analyst, request_id))
            except Exception as exc:  # reported by the parent
                outbox.put(repr(exc))
    finally:
        for ledger in ledgers.values():
            ledger.close()


def test_identical_requests_from_processes_draw_once(pg_server: str, tmp_path: Path) -> None:
    """32 spawned processes, each with its own ledger connections; rounds of N ∈ {4, 12, 32} at once."""
    schema, pg_url = fresh_pg_schema(pg_server)
    urls = [f"sqlite:///{tmp_path / 'ledger.db'}", pg_url]
    try:
        for url in urls:
            setup(url, ["procs"])
        ctx = mp.get_context("spawn")
        outbox = ctx.Queue()
        inboxes = [ctx.Queue() for _ in range(max(SIZES))]
        procs = [ctx.Process(target=_process_worker, args=(urls, q, outbox)) for q in inboxes]
        for p in procs:
            p.start()
        try:
            assert [outbox.get(timeout=120) for _ in procs] == ["ready"] * len(procs)
            for url in urls:
                for n in SIZES:
                    for r in range(rounds(n, PROCESS_ROUNDS)):
                        key = f"proc-{n}-{r}"
                        go = time.time() + 0.05
                        for i in range(n):
                            inboxes[i].put((url, "procs", key, f"a{i % ANALYSTS}", f"{key}-{i}", go))
                        results = [outbox.get(timeout=120) for _ in range(n)]
                        assert all(isinstance(x, tuple) for x in results), results
                        check_round(url, "procs", key, results, n)
        finally:
            for q in inboxes:
                q.put(None)
            for p in procs:
                p.join(30)
                if p.exitcode is None:
                    p.kill()
    finally:
        drop_pg_schema(pg_server, schema)


# ------------------------------------------------------------------ failures and crashes


def test_a_holder_that_fails_before_data_access_lets_the_next_proceed(ledger_url: str) -> None:
    setup(ledger_url, ["fails"])
    holder = Ledger.open(ledger_url)
    ledgers = [Ledger.open(ledger_url) for _ in range(12)]
    try:
        for r in range(5):
            key = f"fail-{r}"
            first = holder.reserve(dataset="fails", analyst="a0", request_id=f"{key}-first", loss=LOSS, cache_key=key)
            out: list[list[tuple[bool, bool, float]]] = []
            waiters = threading.Thread(target=_collect, args=(out, ledgers, "fails", key))
            waiters.start()
            time.sleep(0.2)  # every waiter is waiting on the first holder now
            holder.fail(first, data_accessed=False)  # refunded: the next one reserves itself
            waiters.join(60)
            results = out[0]
            assert sum(drew for drew, _, _ in results) == 1
            assert sum(charged for _, charged, _ in results) == 1
            assert len({v for _, _, v in results}) == 1
            charges = [c for c in holder.charges("fails") if c.cache_key == key]
            assert [c.state for c in charges] == [ChargeState.REFUNDED, ChargeState.COMMITTED]
        assert holder.budget("fails").spent == ApproxDP(Fraction(5, 100), 0)
        assert holder.verify().ok
    finally:
        holder.close()
        for ledger in ledgers:
            ledger.close()


def _collect(out: list[list[tuple[bool, bool, float]]], ledgers: list[Ledger], dataset: str, key: str) -> None:
    out.append(run_threads(ledgers, dataset, key, same_request=False))


def _reserve_and_hang(url: str, key: str, ready: Any) -> None:
    with Ledger.open(url) as ledger:
        ledger.reserve(dataset="crash", analyst="a0", request_id=f"{key}-dead", loss=LOSS, cache_key=key)
        ready.set()
        time.sleep(600)  # killed here: no draw, no commit, no fail


def test_a_killed_holder_blocks_the_key_only_for_its_lease_and_never_yields_two_draws(ledger_url: str) -> None:
    lease = 1.0
    setup(ledger_url, ["crash"])
    ctx = mp.get_context("spawn")
    ledgers = [Ledger.open(ledger_url, lease_s=lease) for _ in range(12)]
    try:
        for r in range(3):
            key = f"crash-{r}"
            ready = ctx.Event()
            proc = ctx.Process(target=_reserve_and_hang, args=(ledger_url, key, ready))
            proc.start()
            assert ready.wait(120)
            os.kill(proc.pid, signal.SIGKILL)  # type: ignore[arg-type]
            proc.join(30)
            started = time.monotonic()
            results = run_threads(ledgers, "crash", key, same_request=False)
            waited = time.monotonic() - started
            assert waited < lease + 5  # bounded by the lease (plus scheduling on a loaded machine)
            assert sum(drew for drew, _, _ in results) == 1  # the killed holder never drew: one draw in all
            assert sum(charged for _, charged, _ in results) == 1
            assert len({v for _, _, v in results}) == 1
            with Ledger.open(ledger_url) as ledger:
                charges = [c for c in ledger.charges("crash") if c.cache_key == key]
                # the killed holder's charge is superseded: FAILED, it stays spent, it can never commit
                assert [c.state for c in charges] == [ChargeState.FAILED, ChargeState.COMMITTED]
                assert [x.cache_key for x in ledger.releases("crash")].count(key) == 1
        with Ledger.open(ledger_url) as ledger:
            assert ledger.budget("crash").spent == ApproxDP(Fraction(6, 100), 0)  # 3 dead holders + 3 answers
            assert ledger.verify().ok
    finally:
        for ledger in ledgers:
            ledger.close()


def test_a_holder_past_its_lease_is_superseded_and_cannot_commit(ledger_url: str) -> None:
    setup(ledger_url, ["slow"])
    with Ledger.open(ledger_url, lease_s=0.5) as slow, Ledger.open(ledger_url, lease_s=0.5) as other:
        res = slow.reserve(dataset="slow", analyst="a0", request_id="slow-1", loss=LOSS, cache_key="k")
        drew, charged, value = attempt(other, "slow", "k", "a1", "other-1")  # waits 0.5 s, then supersedes
        assert drew and charged
        with pytest.raises(LedgerStateError, match="superseded after its lease"):
            slow.commit(res, record(0.123))  # the slow holder's value never leaves
        again = slow.reserve(dataset="slow", analyst="a2", request_id="late-1", loss=LOSS, cache_key="k")
        assert again.stored is not None and again.stored.value == value
        assert [c.state for c in slow.charges("slow")] == [ChargeState.FAILED, ChargeState.COMMITTED]
        assert len(slow.releases("slow")) == 1
        assert slow.verify().ok


def test_a_waiter_returns_the_holders_release_at_no_cost(ledger_url: str) -> None:
    setup(ledger_url, ["audit"])
    with Ledger.open(ledger_url) as a, Ledger.open(ledger_url) as b:
        res = a.reserve(dataset="audit", analyst="a0", request_id="r0", loss=LOSS, cache_key="k")
        box: queue.Queue[Any] = queue.Queue()
        t = threading.Thread(
            target=lambda: box.put(b.reserve(dataset="audit", analyst="a1", request_id="r1", loss=LOSS, cache_key="k"))
        )
        t.start()
        time.sleep(0.2)
        assert box.empty()  # still waiting
        stored = a.commit(res, record(0.5))
        t.join(10)
        hit = box.get_nowait()
        assert hit.stored == stored and hit.charge_id == res.charge_id
        assert a.budget("audit").spent == ApproxDP(Fraction(1, 100), 0)
        assert len(a.charges("audit")) == 1
        assert a.verify().ok
