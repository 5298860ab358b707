"""Single flight through ``Session.release`` on both backends (docs/design.md invariant 5, issue 14).

N ∈ {4, 12, 32} analysts (three names, each caller its own ``Session``: its own ledger connection
and DuckDB engine) send one identical query at the same moment. Every round: exactly one charge
and one stored release for the cache key, every caller gets the same noisy value, and exactly one
``Release`` has ``charged`` set (``cached=False``); the others have ``cached=True, charged=None``.
Threads: 5 rounds per N by default (2 for N = 32). Spawned processes (each opening its own Session
on the ledger URL, one set of 32 workers for both backends): 2 rounds per N and backend by default
(spawning 32 DuckDB sessions dominates), to keep the file near a minute on a loaded 2-core
machine. ``DPSENSE_FLIGHT_ROUNDS`` (threads) and ``DPSENSE_FLIGHT_PROCESS_ROUNDS`` override them;
``DPSENSE_FLIGHT_ROUNDS=20`` is the full figure (about 25 s per backend).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import threading
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import dpsense as dp
from dpsense.ledger import ChargeState
from tests.system.release.support import planted, register
from tests.unit.ledger.support import drop_pg_schema, fresh_pg_schema

ROUNDS = int(os.environ.get("DPSENSE_FLIGHT_ROUNDS") or 5)
PROCESS_ROUNDS = int(os.environ.get("DPSENSE_FLIGHT_PROCESS_ROUNDS") or 2)
SIZES = [4, 16]  # 16 spawned workers at most: spawning (an interpreter and its imports each) is most of the cost
ANALYSTS = 3

Outcome = tuple[bool, bool, str, str | None]


def rounds(n: int) -> int:
    return ROUNDS if n < max(SIZES) else max(1, ROUNDS // 2)


def epsilon(n: int, r: int) -> Fraction:
    """A different public ε per round: a different plan, so a different cache key."""
    return Fraction(1, 10) + Fraction(n * 100 + r, 100_000)


def ask(session: dp.Session, eps: Fraction) -> Outcome:
    """(charged set, cached, the released value as JSON, the cache key)."""
    events = session.dataset("events")
    release = session.release(events.query().agg(n=dp.count()), epsilon=eps)
    value = json.dumps(release.record.value, sort_keys=True)
    return release.charged is not None, release.cached, value, release.record.cache_key


def prepare(url: str, tmp_path: Path) -> None:
    source = tmp_path / "events.csv"
    planted().to_csv(source, index=False)
    with dp.Session.open(url, analyst="steward", role="steward") as steward:
        register(steward, str(source))
        for a in range(ANALYSTS):
            steward.add_analyst(f"a{a}")


def check_round(url: str, results: list[Outcome], n: int) -> None:
    assert len(results) == n
    assert sum(charged for charged, _, _, _ in results) == 1, results  # one caller paid and says so
    assert sum(not cached for _, cached, _, _ in results) == 1, results
    assert len({value for _, _, value, _ in results}) == 1  # one noisy value
    keys = {key for _, _, _, key in results}
    assert len(keys) == 1 and None not in keys
    with dp.Session.open(url, analyst="steward", role="steward") as steward:
        charges = [c for c in steward.ledger.charges("events") if c.cache_key in keys]
        assert [c.state for c in charges] == [ChargeState.COMMITTED]  # one charge
        assert [r.cache_key for r in steward.ledger.releases("events")].count(keys.pop()) == 1


def test_identical_queries_from_threads_are_charged_and_drawn_once(ledger_url: str, tmp_path: Path) -> None:
    prepare(ledger_url, tmp_path)
    sessions = [dp.Session.open(ledger_url, analyst=f"a{i % ANALYSTS}") for i in range(max(SIZES))]
    try:
        for s in sessions:
            s.dataset("events")  # attach (load and fingerprint) before the rounds
        spent = Fraction(0)
        for n in SIZES:
            for r in range(rounds(n)):
                barrier = threading.Barrier(n)
                results: list[Any] = [None] * n
                errors: list[BaseException] = []

                def go(
                    i: int,
                    eps: Fraction,
                    b: threading.Barrier = barrier,
                    out: list[Any] = results,
                    errs: list[BaseException] = errors,
                ) -> None:
                    try:
                        b.wait(60)
                        out[i] = ask(sessions[i], eps)
                    except BaseException as exc:  # reported below
                        errs.append(exc)

                threads = [threading.Thread(target=go, args=(i, epsilon(n, r))) for i in range(n)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(120)
                assert errors == []
                check_round(ledger_url, results, n)
                spent += epsilon(n, r)
        assert sessions[0].budget("events").spent.epsilon == spent  # one charge per round, nothing else
        assert sessions[0].verify_log().ok
    finally:
        for s in sessions:
            s.close()


def _session_worker(urls: list[str], analyst: str, inbox: Any, outbox: Any) -> None:
    sessions = {url: dp.Session.open(url, analyst=analyst) for url in urls}
    try:
        for session in sessions.values():
            session.dataset("events")
        outbox.put("ready")
        while (job := inbox.get()) is not None:
            url, eps, go = job
            time.sleep(max(0.0, go - time.time()))
            try:
                outbox.put(ask(sessions[url], eps))
            except Exception as exc:  # reported by the parent
                outbox.put(repr(exc))
    finally:
        for session in sessions.values():
            session.close()


def test_identical_queries_from_processes_are_charged_and_drawn_once(pg_server: str, tmp_path: Path) -> None:
    """One set of 32 spawned workers serves both backends (spawning them is most of the cost)."""
    schema, pg_url = fresh_pg_schema(pg_server)
    urls = [f"sqlite:///{tmp_path / 'ledger.db'}", pg_url]
    try:
        for i, url in enumerate(urls):
            (tmp_path / str(i)).mkdir()
            prepare(url, tmp_path / str(i))
        ctx = mp.get_context("spawn")
        outbox = ctx.Queue()
        inboxes = [ctx.Queue() for _ in range(max(SIZES))]
        procs = [
            ctx.Process(target=_session_worker, args=(urls, f"a{i % ANALYSTS}", q, outbox))
            for i, q in enumerate(inboxes)
        ]
        for p in procs:
            p.start()
        try:
            assert [outbox.get(timeout=300) for _ in procs] == ["ready"] * len(procs)
            for url in urls:
                for n in SIZES:
                    for r in range(PROCESS_ROUNDS):
                        go = time.time() + 0.1
                        for q in inboxes[:n]:
                            q.put((url, epsilon(n, 50 + r), go))
                        results = [outbox.get(timeout=120) for _ in range(n)]
                        assert all(isinstance(x, tuple) for x in results), results
                        check_round(url, results, n)
        finally:
            for q in inboxes:
                q.put(None)
            for p in procs:
                p.join(60)
                if p.exitcode is None:
                    p.kill()
    finally:
        drop_pg_schema(pg_server, schema)
