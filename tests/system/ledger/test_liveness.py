"""Liveness (issue 14, build 4): a stopped writer holds others up for a bounded time, or not at all.

A child process is SIGSTOPped either *inside* a ledger write transaction (right after its audit
append, so it holds the dataset's budget row and the audit head on PostgreSQL, the database's write
lock on SQLite) or *between* calls (a reservation committed, the "query" running). The bounds under
test are the ones stated in ``dpsense.ledger._backends`` and docs/ledger.md ("Liveness"):

* PostgreSQL: the server ends a session idle in a transaction after 5 s
  (``DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_S``), rolling it back; writers on every dataset, the
  stopped one's included, then go on. The stopped process gets a clean ``LedgerBusy`` when it is
  resumed, and its next call reconnects.
* SQLite: nobody can break the stopped process's lock; writers get ``LedgerBusy`` after the busy
  timeout with nothing charged, while reads and ``Ledger.open`` go on; killing the holder frees it.
* Both: a process stopped between calls blocks no one; its reservation is resolved by the rule
  (``resolve_stale`` marks it ABANDONED, still charged; the next identical request supersedes it).

Elapsed times are asserted against 4x the stated bound: these are liveness bounds, not speed claims.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from fractions import Fraction
from multiprocessing.connection import Connection
from typing import Any

import pytest

from dpsense.core import ApproxDP, PureDP
from dpsense.core.errors import DPSenseError, LedgerBusy, UnsupportedRequest, UsageError
from dpsense.ledger import ChargeState, Ledger, ReleaseRecord
from dpsense.ledger._backends import (
    DEFAULT_BUSY_TIMEOUT_S,
    DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_S,
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_STATEMENT_TIMEOUT_S,
    open_backend,
)
from tests.unit.ledger.support import rows

DATASETS = ("a", "b", "c", "d")
CTX = mp.get_context("fork")


def _record(value: float) -> ReleaseRecord:
    return ReleaseRecord(value, "laplace", "1", {}, "person_id", "add_remove", "0.1.0")


def _setup(url: str) -> None:
    with Ledger.open(url) as ledger:
        ledger.add_analyst("alice")
        for name in DATASETS:
            ledger.register_dataset(name, budget=PureDP(50))


def _release(url: str, dataset: str, request_id: str, cache_key: str | None = None) -> float:
    """Reserve and commit one release; returns how long it took (seconds)."""
    start = time.monotonic()
    with Ledger.open(url) as ledger:
        res = ledger.reserve(
            dataset=dataset, analyst="alice", request_id=request_id, loss=PureDP(1), cache_key=cache_key
        )
        ledger.commit(res, _record(0.5))
    return time.monotonic() - start


def _eps(ledger: Ledger, dataset: str) -> Fraction:
    spent = ledger.budget(dataset).spent
    assert isinstance(spent, ApproxDP) and spent.delta == 0
    return spent.epsilon


def _concurrently(*calls: Callable[[], float]) -> list[float]:
    with ThreadPoolExecutor(len(calls)) as pool:
        return [f.result() for f in [pool.submit(call) for call in calls]]


# ---------------------------------------------------------------- a child that stops itself


class _StopAfterAuditAppend:
    """A backend wrapper: the next write stops this process right after its audit append (locks held)."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self.dialect = backend.dialect
        self.armed = True

    @contextmanager
    def write(self) -> Iterator[Any]:
        with self._backend.write() as tx:
            yield _StoppingTx(tx, self)

    def read(self) -> Any:
        return self._backend.read()

    def close(self) -> None:
        self._backend.close()


class _StoppingTx:
    def __init__(self, tx: Any, owner: _StopAfterAuditAppend) -> None:
        self._tx, self._owner, self.dialect = tx, owner, tx.dialect

    def execute(self, sql: str, params: Any = ()) -> Any:
        out = self._tx.execute(sql, params)
        self._stop_after(sql)
        return out

    def send(self, sql: str, params: Any = ()) -> None:
        self._tx.send(sql, params)
        self._stop_after(sql)

    def _stop_after(self, sql: str) -> None:
        if "UPDATE audit_head" in sql and self._owner.armed:  # the last statement of the append
            self._owner.armed = False
            os.kill(os.getpid(), signal.SIGSTOP)


def _stop_inside(url: str, out: Connection) -> None:
    """Reserve on ``a`` and stop inside that transaction; when resumed, report and write once more."""
    backend = open_backend(url)
    out.send(backend._conn.info.backend_pid if backend.dialect == "postgresql" else None)
    ledger = Ledger(_StopAfterAuditAppend(backend))
    try:
        ledger.reserve(dataset="a", analyst="alice", request_id="child-1", loss=PureDP(1))
        out.send(("reserved", "", True))
    except Exception as exc:  # reported to the parent, which checks it is a clean DPSenseError
        out.send((type(exc).__name__, str(exc), isinstance(exc, DPSenseError)))
    try:
        res = ledger.reserve(dataset="a", analyst="alice", request_id="child-2", loss=PureDP(1))
        ledger.commit(res, _record(2.0))
        out.send("second write ok")
    except Exception as exc:
        out.send(f"second write failed: {type(exc).__name__}: {exc}")


def _stop_between(url: str, out: Connection) -> None:
    """Reserve on ``a`` with a cache key, then stop outside any transaction (the "query" runs)."""
    with Ledger.open(url) as ledger:
        res = ledger.reserve(dataset="a", analyst="alice", request_id="held", loss=PureDP(1), cache_key="k")
        out.send(res.charge_id)
        os.kill(os.getpid(), signal.SIGSTOP)
        ledger.commit(res, _record(1.0))  # not reached: the parent kills this process


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _wait_stopped(proc: Any) -> None:
    deadline = time.monotonic() + 60
    while _state(proc.pid) != "T":
        assert proc.is_alive(), "the child ended instead of stopping"
        assert time.monotonic() < deadline, "the child did not stop"
        time.sleep(0.01)


@contextmanager
def _child(target: Callable[[str, Connection], None], url: str) -> Iterator[tuple[Any, Connection]]:
    """A forked child running ``target``; stopped or not, it is resumed and killed at the end."""
    mine, theirs = CTX.Pipe()
    proc = CTX.Process(target=target, args=(url, theirs))
    proc.start()
    try:
        yield proc, mine
    finally:
        if proc.is_alive():
            os.kill(proc.pid, signal.SIGCONT)
            os.kill(proc.pid, signal.SIGKILL)
        proc.join(30)


def _recv(pipe: Connection) -> Any:
    assert pipe.poll(60), "the child sent nothing"
    return pipe.recv()


def _kill(proc: Any) -> None:
    os.kill(proc.pid, signal.SIGKILL)  # a stopped process dies at once
    proc.join(30)
    assert proc.exitcode == -signal.SIGKILL


#: Runs a test on one backend of the ``ledger_url`` fixture.
ON_POSTGRES = pytest.mark.parametrize("ledger_url", ["postgresql"], indirect=True)
ON_SQLITE = pytest.mark.parametrize("ledger_url", ["sqlite"], indirect=True)


# ---------------------------------------------------------------- PostgreSQL: stopped inside a transaction


@ON_POSTGRES
def test_postgres_writer_stopped_inside_a_transaction_is_cut_off_by_the_server(ledger_url: str) -> None:
    _setup(ledger_url)
    bound = DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_S
    with _child(_stop_inside, ledger_url) as (proc, pipe):
        backend_pid = _recv(pipe)
        _wait_stopped(proc)
        # The stopped child holds a's budget row and the audit head, idle in its transaction.
        state = rows(ledger_url, f"SELECT state FROM pg_stat_activity WHERE pid = {int(backend_pid)}")
        assert state == [("idle in transaction",)]
        # Releases on another dataset (waits for the head) and on the same one (waits for its row).
        took = _concurrently(lambda: _release(ledger_url, "b", "p-b"), lambda: _release(ledger_url, "a", "p-a"))
        assert max(took) < 4 * bound, took
        assert rows(ledger_url, f"SELECT 1 FROM pg_stat_activity WHERE pid = {int(backend_pid)}") == []
        with Ledger.open(ledger_url) as ledger:  # the server rolled the stopped reserve back: nothing of it stays
            assert "child-1" not in {c.request_id for c in ledger.charges("a")}
            assert _eps(ledger, "a") == 1
        # Resumed, the child gets a clean LedgerBusy (never a driver error) and its next write reconnects.
        os.kill(proc.pid, signal.SIGCONT)
        name, message, clean = _recv(pipe)
        assert (name, clean) == ("LedgerBusy", True), message
        assert "session ended" in message and "nothing was written" in message
        assert _recv(pipe) == "second write ok"
        proc.join(30)
    with Ledger.open(ledger_url) as ledger:
        assert {c.request_id: c.state for c in ledger.charges("a")} == {
            "p-a": ChargeState.COMMITTED,
            "child-2": ChargeState.COMMITTED,
        }
        assert _eps(ledger, "a") == 2
        assert _eps(ledger, "b") == 1
        assert ledger.verify().ok


@ON_POSTGRES
def test_postgres_sessions_carry_the_stated_timeouts(ledger_url: str) -> None:
    backend = open_backend(ledger_url)
    try:
        with backend.read() as tx:
            shown = [
                tx.execute(f"SELECT current_setting('{name}')")[0][0]
                for name in ("idle_in_transaction_session_timeout", "lock_timeout", "statement_timeout")
            ]
    finally:
        backend.close()
    assert shown == [f"{DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_S:g}s", f"{DEFAULT_LOCK_TIMEOUT_S:g}s", "30s"]
    assert DEFAULT_STATEMENT_TIMEOUT_S == 30
    assert DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_S < DEFAULT_LOCK_TIMEOUT_S  # a waiter outlasts a stopped holder
    tuned = open_backend(ledger_url + "&lock_timeout_s=2&idle_in_transaction_timeout_s=1.5&statement_timeout_s=7")
    try:
        with tuned.read() as tx:
            got = tx.execute(
                "SELECT current_setting('lock_timeout'), current_setting('idle_in_transaction_session_timeout'),"
                " current_setting('statement_timeout'), current_setting('search_path')"
            )[0]
    finally:
        tuned.close()
    assert got[:3] == ("2s", "1500ms", "7s")
    assert got[3].startswith("dpsense_test_")  # the driver's own parameters are kept


@ON_POSTGRES
def test_postgres_session_ended_by_the_server_reconnects(ledger_url: str) -> None:
    _setup(ledger_url)
    with Ledger.open(ledger_url) as ledger:
        pid = ledger._context.backend._conn.info.backend_pid  # type: ignore[attr-defined]
        rows(ledger_url, f"SELECT pg_terminate_backend({int(pid)})")
        with pytest.raises(LedgerBusy, match="session ended"):
            ledger.budget("a")
        assert _eps(ledger, "a") == 0  # the next call reconnected
        res = ledger.reserve(dataset="a", analyst="alice", request_id="r", loss=PureDP(1))
        ledger.commit(res, _record(1.0))
        assert _eps(ledger, "a") == 1


# ---------------------------------------------------------------- SQLite: stopped inside a transaction


@ON_SQLITE
def test_sqlite_writer_stopped_inside_a_transaction(ledger_url: str) -> None:
    busy = 1.0
    url = f"{ledger_url}?busy_timeout_s={busy:g}"
    _setup(url)
    with _child(_stop_inside, url) as (proc, pipe):
        _recv(pipe)
        _wait_stopped(proc)
        with Ledger.open(url) as ledger:  # the schema is current: opening takes no write lock
            before = {name: (ledger.budget(name).spent, ledger.charges(name)) for name in DATASETS}
            for name in ("b", "a"):
                start = time.monotonic()
                with pytest.raises(LedgerBusy) as caught:
                    ledger.reserve(dataset=name, analyst="alice", request_id=f"p-{name}", loss=PureDP(1))
                assert time.monotonic() - start < 4 * busy
                message = str(caught.value)
                assert f"pid {proc.pid}" in message and "resume or kill it" in message and "PostgreSQL" in message
            # Nothing was charged; reads go on while the writer is stopped.
            assert {name: (ledger.budget(name).spent, ledger.charges(name)) for name in DATASETS} == before
            assert ledger.verify().ok
        _kill(proc)  # the only ways out: resume it or kill it (its transaction is then rolled back)
    took = _concurrently(*(lambda name=name: _release(url, name, f"p-{name}") for name in DATASETS))
    assert max(took) < 4 * busy
    with Ledger.open(url) as ledger:
        assert [c.request_id for c in ledger.charges("a")] == ["p-a"]
        assert _eps(ledger, "a") == 1
        assert ledger.verify().ok


@ON_SQLITE
def test_sqlite_busy_timeout_is_stated_and_configurable(ledger_url: str) -> None:
    path = ledger_url.removeprefix("sqlite:///")
    assert DEFAULT_BUSY_TIMEOUT_S == 10
    backend = open_backend(f"sqlite:///{path}")
    try:
        assert backend._conn.execute("PRAGMA busy_timeout").fetchone() == (10_000,)  # type: ignore[union-attr]
    finally:
        backend.close()
    backend = open_backend(f"sqlite:///{path}?busy_timeout_s=0.25")
    try:
        assert backend._conn.execute("PRAGMA busy_timeout").fetchone() == (250,)  # type: ignore[union-attr]
    finally:
        backend.close()
    with pytest.raises(UnsupportedRequest, match="busy_timeout_s"):
        open_backend(f"sqlite:///{path}?mode=ro")
    for bad in ("0", "-1", "nan", "inf", "soon"):
        with pytest.raises(UsageError, match="positive, finite number of seconds"):
            open_backend(f"sqlite:///{path}?busy_timeout_s={bad}")


# ---------------------------------------------------------------- both: stopped between calls


def test_writer_stopped_between_calls_blocks_no_one_and_its_reservation_is_resolved(ledger_url: str) -> None:
    _setup(ledger_url)
    bound = DEFAULT_BUSY_TIMEOUT_S if ledger_url.startswith("sqlite") else DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_S
    with _child(_stop_between, ledger_url) as (proc, pipe):
        held = _recv(pipe)
        _wait_stopped(proc)
        # Writers on every dataset at once, the stopped one's included (another cache key), and again.
        for round_ in range(2):
            calls = [
                lambda name=name, r=round_: _release(ledger_url, name, f"p{r}-{name}", f"k{r}-{name}")
                for name in DATASETS
            ]
            took = _concurrently(*calls)
            assert max(took) < 4 * bound, took
        with Ledger.open(ledger_url) as ledger:
            spent = ledger.budget("a").spent
            assert _eps(ledger, "a") == 3  # the held reservation and two releases
            # The rule: resolve_stale marks it ABANDONED; it stays charged.
            later = Ledger.open(ledger_url, clock=lambda: time.time() + 3600)
            try:
                assert later.resolve_stale(older_than_s=600) == 1
            finally:
                later.close()
            states = {c.charge_id: c.state for c in ledger.charges("a")}
            assert states[held] == ChargeState.ABANDONED
            assert ledger.budget("a").spent == spent
        _kill(proc)
    with Ledger.open(ledger_url) as ledger:
        # The next identical request supersedes the abandoned holder at once (FAILED, still spent).
        res = ledger.reserve(dataset="a", analyst="alice", request_id="again", loss=PureDP(1), cache_key="k")
        assert res.stored is None
        ledger.commit(res, _record(3.0))
        states = {c.charge_id: c.state for c in ledger.charges("a")}
        assert states[held] == ChargeState.FAILED
        assert _eps(ledger, "a") == 4
        assert [r.charge_id for r in ledger.releases("a") if r.cache_key == "k"] == [res.charge_id]
        assert ledger.verify().ok
