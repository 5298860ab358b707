"""``SharedSnapshots``: one copy of each registered snapshot per process, shared by many Sessions.

A server answers many analysts from the same data. Each Session used to attach its own copy of
every snapshot it read (a DuckDB engine per Session: 16 analysts, 16 copies). ``SharedSnapshots``
holds one in-memory DuckDB database per process instead:

* each snapshot is loaded once, by an engine of its own on a cursor of that database opened with
  ``shared=True`` (its copies are regular tables of the compressed in-memory database every cursor
  uses, ``DuckDBEngine.COPIES_DATABASE``, checkpointed when written), through the same
  ``attach`` as any Session: the keyed fingerprint is checked, the declared policies applied and the
  rows indexed on the privacy unit under a fresh secret order (``_datasets.prepare``);
* every thread that serves Sessions gets its own engine on its own cursor (``engine()``); the
  Sessions given that engine and this object (``Session(engine=..., snapshots=...)``) ``adopt`` the
  shared table under its usual name: no copy. A release then runs exactly as on a private copy:
  its salt is drawn per release, its bounded views are temporary tables of that cursor, removed when
  the release ends (docs/design.md invariant 10);
* these Sessions are served the dataset's *current* snapshot only (the one the steward registered
  last, read from the ledger on every attach, so a registration by another process counts at once).
  A request that names another snapshot is refused with ``SnapshotNotCurrent``: there is no policy
  by which a steward lets analysts read an older snapshot. An engine that held an older snapshot
  forgets it at its next attach; a snapshot no engine holds any more, and that is not current, is
  dropped.

An engine (and the Sessions on it) must be used by one thread at a time, as a DuckDB cursor must.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dpsense.core.errors import SnapshotNotCurrent, UsageError
from dpsense.engine import Engine
from dpsense.ledger import Ledger
from dpsense.release._datasets import Dataset, attach

if TYPE_CHECKING:
    import duckdb

    from dpsense.engine import DuckDBEngine, SharedTable


@dataclass
class _Snapshot:
    """One loaded snapshot: its loader engine (owner of the copy), the table to adopt, who holds it."""

    key: tuple[str, str]
    lock: threading.Lock = field(default_factory=threading.Lock)
    loader: DuckDBEngine | None = None
    cursor: duckdb.DuckDBPyConnection | None = None
    dataset: Dataset | None = None
    table: SharedTable | None = None
    holders: set[int] = field(default_factory=set)
    retired: bool = False

    def close(self) -> None:
        """Drop the copy (the loader owns it) and close the loader's cursor."""
        if self.loader is not None:
            self.loader.close()
        if self.cursor is not None:
            self.cursor.close()
        self.loader = self.cursor = self.table = self.dataset = None


@dataclass
class _Adopter:
    """A serving engine, its cursor and the snapshot it holds of each dataset."""

    engine: DuckDBEngine
    cursor: duckdb.DuckDBPyConnection
    held: dict[str, tuple[str, str]] = field(default_factory=dict)


class SharedSnapshots:
    """One in-memory DuckDB database per process holding each current snapshot once (module docstring).

    Example (one engine per serving thread)::

        snapshots = SharedSnapshots()
        engine = snapshots.engine()
        session = Session(ledger, analyst="alice", engine=engine, snapshots=snapshots)
        session.release(session.dataset("events").query().agg(n=count()), epsilon=0.5)
        session.close(); snapshots.close_engine(engine); snapshots.close()
    """

    def __init__(self) -> None:
        import duckdb

        from dpsense.engine import DuckDBEngine

        self._database = duckdb.connect(":memory:", config={"threads": 1})  # the serving threads are the parallelism
        # the snapshots' copies live compressed in an in-memory database every cursor uses (``_cursor``)
        self._copies = DuckDBEngine.COPIES_DATABASE
        self._database.execute(f"ATTACH ':memory:' AS {self._copies} (COMPRESS)")
        self._lock = threading.Lock()
        self._snapshots: dict[tuple[str, str], _Snapshot] = {}
        self._adopters: dict[int, _Adopter] = {}
        self._closed = False

    def engine(self) -> DuckDBEngine:
        """A new engine on its own cursor of the shared database, for the Sessions of one thread."""
        from dpsense.engine import DuckDBEngine

        with self._lock:
            self._check_open()
            cursor = self._cursor()
        engine = DuckDBEngine(connection=cursor)
        with self._lock:
            self._adopters[id(engine)] = _Adopter(engine, cursor)
        return engine

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        """A new cursor of the shared database, using its compressed copies' database (``_lock`` held)."""
        cursor = self._database.cursor()
        cursor.execute(f"USE {self._copies}")
        return cursor

    def close_engine(self, engine: Engine) -> None:
        """Close an engine from ``engine()`` and its cursor; the snapshots it held may then be dropped."""
        with self._lock:
            adopter = self._adopters.pop(id(engine), None)
            if adopter is None:
                return
            for key in adopter.held.values():
                self._release(key, id(engine))
        adopter.engine.close()
        adopter.cursor.close()

    def dataset(self, ledger: Ledger, engine: Engine, name: str, *, snapshot: str | None = None) -> Dataset:
        """The current snapshot of ``name``, adopted by ``engine`` (loaded into the process at most once).

        Raises:
            SnapshotNotCurrent: ``snapshot`` names another snapshot than the current one.
            UnknownDataset, UsageError: as ``Session.dataset`` (no such dataset, a changed source).

        """
        current = current_snapshot(ledger, name)
        if snapshot is not None and snapshot != current:
            raise SnapshotNotCurrent(name, snapshot, current)
        key, holder = (name, current), id(engine)
        with self._lock:
            self._check_open()
            adopter = self._adopters.get(holder)
            if adopter is None:
                raise UsageError(
                    "a Session on shared snapshots needs an engine made by the same SharedSnapshots",
                    type(engine).__name__,
                    "pass engine=snapshots.engine()",
                )
            self._retire_others(key)
            self._forget_retired(adopter)
            held = adopter.held.get(name)
            entry = self._snapshots.get(key)
            if held == key and entry is not None and entry.dataset is not None:
                return entry.dataset
            if entry is None:
                entry = self._snapshots[key] = _Snapshot(key)
            entry.holders.add(holder)
        try:
            with entry.lock:
                if entry.dataset is None:
                    self._load(ledger, entry)
                dataset, table = entry.dataset, entry.table
            if dataset is None or table is None:
                raise UsageError("the shared snapshots are closed", "closed", "open a new SharedSnapshots")
            adopter.engine.adopt(dataset.table, table)
        except BaseException:
            with self._lock:
                self._release(key, holder)
            raise
        if held is not None:  # an older snapshot of this dataset: this engine reads the current one from now on
            adopter.engine.forget(f"{held[0]}@{held[1]}")
        with self._lock:
            if held is not None:
                self._release(held, holder)
            adopter.held[name] = key
        return dataset

    def close(self) -> None:
        """Close every engine and drop every snapshot (no Session on them may run any more)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            adopters, self._adopters = list(self._adopters.values()), {}
            entries, self._snapshots = list(self._snapshots.values()), {}
        for adopter in adopters:
            adopter.engine.close()
            adopter.cursor.close()
        for entry in entries:
            entry.close()
        self._database.close()

    def loaded(self) -> list[tuple[str, str]]:
        """The (dataset, snapshot) pairs held in the process now (one copy each)."""
        with self._lock:
            return sorted(k for k, e in self._snapshots.items() if e.dataset is not None)

    # -- helpers (``_lock`` held unless said otherwise) -----------------------------------------------

    def _load(self, ledger: Ledger, entry: _Snapshot) -> None:
        """Load ``entry``'s snapshot once, into a copy every cursor sees (``entry.lock`` held, not ``_lock``)."""
        from dpsense.engine import DuckDBEngine

        with self._lock:
            self._check_open()
            cursor = self._cursor()
        loader = DuckDBEngine(connection=cursor, shared=True)
        try:
            name, snapshot = entry.key
            dataset = attach(ledger, loader, name, source=None, snapshot=snapshot)
            table = loader.export(dataset.table)
        except BaseException:
            loader.close()
            cursor.close()
            raise
        entry.loader, entry.cursor, entry.dataset, entry.table = loader, cursor, dataset, table

    def _retire_others(self, key: tuple[str, str]) -> None:
        """Mark the dataset's other snapshots retired and drop those no engine holds (``key`` is current)."""
        name = key[0]
        for other, entry in list(self._snapshots.items()):
            if other[0] != name:
                continue
            entry.retired = other != key
            if entry.retired and not entry.holders:
                self._drop(other)

    def _forget_retired(self, adopter: _Adopter) -> None:
        """Make ``adopter`` forget the retired snapshots it holds (its thread is between releases now)."""
        for name, key in list(adopter.held.items()):
            entry = self._snapshots.get(key)
            if entry is None or entry.retired:
                adopter.engine.forget(f"{key[0]}@{key[1]}")
                del adopter.held[name]
                self._release(key, id(adopter.engine))

    def _release(self, key: tuple[str, str], holder: int) -> None:
        entry = self._snapshots.get(key)
        if entry is None:
            return
        entry.holders.discard(holder)
        if entry.retired and not entry.holders:
            self._drop(key)
        elif entry.dataset is None and not entry.holders and not entry.lock.locked():
            self._drop(key)  # a load that failed and that nobody waits for

    def _drop(self, key: tuple[str, str]) -> None:
        entry = self._snapshots.pop(key)
        entry.close()

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError("the shared snapshots are closed", "closed", "open a new SharedSnapshots")


def current_snapshot(ledger: Ledger, name: str) -> str:
    """The dataset's current snapshot: the one registered last (one small ledger read, no profile)."""
    names = ledger.snapshots(name)
    if not names:
        return ledger.profile(name).snapshot  # raises the ledger's "no profile" refusal
    return names[-1]
