"""The service's configuration and its worker threads: each owns one ledger connection and its Sessions.

Every request that touches the ledger or data runs on a worker thread (``Workers.run``); the event
loop only parses, pads and answers. The process holds one ``SharedSnapshots``: one in-memory DuckDB
database (one DuckDB thread: the workers are the parallelism) in which each dataset's current
snapshot is loaded once, whatever the number of analysts and workers. A worker thread owns, for its
whole life:

* one ``Ledger`` connection (a SQLite or psycopg connection is never used by two threads at once);
* one DuckDB engine on its own cursor of that database, which adopts the shared snapshots (no copy)
  and holds the temporary tables of the release it runs (removed when the release ends);
* one ``Session`` per (analyst, role) it has served (built by ``service_session``, always with the
  service's ``constant_work``), all on that engine: a worker runs one request at a time. At most
  ``sessions_per_worker`` are kept (least recently used are closed; they hold no data).

Every release therefore goes through ``Session.release`` / ``Session.sql`` with the ledger's
reserve -> run -> commit: the same path as the Python API and the CLI, with no other way to a value.
Each request reads the dataset's current snapshot from the ledger (``SharedSnapshots.dataset``), so a
registration by this service, another process or the CLI is served from the next request on, and a
request naming another snapshot is refused (``SnapshotNotCurrent``). A steward's registration through
this service also bumps a generation number, on which workers start fresh Sessions.

``ServiceConfig.resolve_stale_every_s`` runs ``Ledger.resolve_stale`` on a worker on that schedule
(``create_app``): reservations older than ``resolve_stale_after_s`` are marked ABANDONED and stay charged.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from dpsense.core.checks import integer_in
from dpsense.core.errors import UsageError
from dpsense.engine import Engine
from dpsense.ledger import Ledger, TokenIdentity
from dpsense.release import Session, SharedSnapshots

T = TypeVar("T")
log = logging.getLogger("dpsense.service")

#: The service's default ``constant_work``: terms per smooth-sensitivity step (docs/service.md).
DEFAULT_CONSTANT_WORK = 256
#: The largest ``constant_work`` accepted (each term is evaluated on every smooth release).
MAX_CONSTANT_WORK = 1 << 16
#: Defaults of the stale-reservation schedule: reservations untouched for an hour, checked every minute.
DEFAULT_RESOLVE_STALE_AFTER_S = 3600.0
DEFAULT_RESOLVE_STALE_EVERY_S = 60.0


@dataclass(frozen=True)
class ServiceConfig:
    """How the service runs.

    Attributes:
        ledger_url: ``postgresql://...`` (shared deployments) or ``sqlite:///path.db``.
        data_dir: the only folder a steward may register sources from (paths are resolved inside it).
        workers: worker threads, each with its own ledger connection.
        min_latency_s: every release response (answer or refusal) is sent no sooner than this after
            the request arrived; longer ones are rounded up to a multiple of ``latency_quantum_s``.
        latency_quantum_s: the rounding step of release latencies (0 turns rounding off).
        sessions_per_worker: Sessions (and DuckDB engines) a worker keeps before closing the oldest.
        max_body_bytes: larger request bodies are refused with 413.
        constant_work: every smooth-sensitivity step of every Session the service builds evaluates
            exactly this many terms of its sensitivity family (public work) instead of stopping early
            on the data (a timing side channel). An integer from 1 to ``MAX_CONSTANT_WORK``; there is
            no way to turn it off. Fewer terms than the early stop would have used add noise (never
            privacy loss); more cost time (docs/service.md, "Side channels").
        resolve_stale_after_s: a reservation untouched for this many seconds (its process crashed
            between reserve and commit) is marked ABANDONED by the schedule below; it stays charged.
            Choose it above the slowest release: a live release marked ABANDONED is superseded.
        resolve_stale_every_s: how often the service runs ``Ledger.resolve_stale`` (on a worker
            thread); 0, or an age of 0, turns the schedule off.

    """

    ledger_url: str
    data_dir: Path
    workers: int = 4
    min_latency_s: float = 0.25
    latency_quantum_s: float = 0.25
    sessions_per_worker: int = 64
    max_body_bytes: int = 1 << 20
    constant_work: int = DEFAULT_CONSTANT_WORK
    resolve_stale_after_s: float = DEFAULT_RESOLVE_STALE_AFTER_S
    resolve_stale_every_s: float = DEFAULT_RESOLVE_STALE_EVERY_S

    def to_env(self) -> str:
        """The configuration as one line of JSON (``from_env`` reads it back), for ``serve``'s processes."""
        return json.dumps(dataclasses.asdict(self) | {"data_dir": str(self.data_dir)}, sort_keys=True)

    @classmethod
    def from_env(cls, text: str) -> ServiceConfig:
        """The configuration ``to_env`` wrote (checked again by ``__post_init__``)."""
        fields = json.loads(text)
        return cls(**(fields | {"data_dir": Path(fields["data_dir"])}))

    def __post_init__(self) -> None:
        for name, flag in (("resolve_stale_after_s", "after"), ("resolve_stale_every_s", "every")):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
                raise UsageError(
                    f"the service's {name} is a finite number of seconds, at least 0 (0 turns the schedule off)",
                    value,
                    f"pass --resolve-stale-{flag} SECONDS, e.g. the default {getattr(ServiceConfig, name):g}",
                )
        work = self.constant_work
        if not integer_in(work, 1, MAX_CONSTANT_WORK):
            raise UsageError(
                f"the service's constant_work is the number of sensitivity terms every smooth step evaluates, "
                f"an integer from 1 to {MAX_CONSTANT_WORK}",
                work,
                f"pass --constant-work {DEFAULT_CONSTANT_WORK} (the default) or another integer in that range",
            )


def service_session(
    config: ServiceConfig,
    ledger: Ledger,
    *,
    analyst: str,
    role: str,
    engine: Engine,
    snapshots: SharedSnapshots | None = None,
) -> Session:
    """A Session as the service builds every one: on ``ledger`` and ``engine``, with ``config.constant_work``.

    With ``snapshots`` (the workers' Sessions) it reads the shared current snapshots through ``engine``.
    """
    return Session(
        ledger, analyst=analyst, role=role, engine=engine, constant_work=config.constant_work, snapshots=snapshots
    )


class Worker:
    """The ledger connection, engine and Sessions of one worker thread (used by that thread only)."""

    def __init__(self, config: ServiceConfig, snapshots: SharedSnapshots | None = None) -> None:
        self.config = config
        self.ledger = Ledger.open(config.ledger_url)
        self._owns_snapshots = snapshots is None  # a worker on its own (tests): its own shared snapshots
        self.snapshots = snapshots if snapshots is not None else SharedSnapshots()
        self.engine = self.snapshots.engine()
        self._limit = max(1, config.sessions_per_worker)
        self._sessions: OrderedDict[tuple[str, str], Session] = OrderedDict()
        self.generation = 0

    def session(self, identity: TokenIdentity, generation: int) -> Session:
        """The Session of ``identity`` on this worker (created on first use, on the worker's engine)."""
        if generation != self.generation:
            self.close_sessions()
            self.generation = generation
        key = (identity.analyst, identity.role)
        found = self._sessions.get(key)
        if found is not None:
            self._sessions.move_to_end(key)
            return found
        session = service_session(
            self.config,
            self.ledger,
            analyst=identity.analyst,
            role=identity.role,
            engine=self.engine,
            snapshots=self.snapshots,
        )
        self._sessions[key] = session
        while len(self._sessions) > self._limit:
            self._sessions.popitem(last=False)[1].close()
        return session

    def close_sessions(self) -> None:
        """Close every Session (they hold no data: the worker's engine adopts the shared snapshots)."""
        while self._sessions:
            self._sessions.popitem()[1].close()

    def close(self) -> None:
        """Close the Sessions, the worker's engine (its temporary tables go with it) and the ledger connection."""
        self.close_sessions()
        self.snapshots.close_engine(self.engine)
        if self._owns_snapshots:
            self.snapshots.close()
        self.ledger.close()


class Workers:
    """A fixed pool of worker threads; ``run`` hands a function the calling thread's ``Worker``."""

    def __init__(self, config: ServiceConfig) -> None:
        self._config = config
        self._executor = ThreadPoolExecutor(max_workers=max(1, config.workers), thread_name_prefix="dpsense-worker")
        self._local = threading.local()
        self._all: list[Worker] = []
        self._lock = threading.Lock()
        self._generation = 0
        self.snapshots = SharedSnapshots()

    async def run(self, work: Callable[[Worker], T]) -> T:
        """Run ``work`` on a worker thread and await its result (exceptions propagate)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call, work)

    def _call(self, work: Callable[[Worker], T]) -> T:
        worker: Worker | None = getattr(self._local, "worker", None)
        if worker is None:
            worker = Worker(self._config, self.snapshots)
            self._local.worker = worker
            with self._lock:
                self._all.append(worker)
        return work(worker)

    @property
    def resolves_stale(self) -> bool:
        """Whether the stale-reservation schedule is on (both its age and its period above 0)."""
        return self._config.resolve_stale_after_s > 0 and self._config.resolve_stale_every_s > 0

    async def resolve_stale_forever(self) -> None:
        """Every ``resolve_stale_every_s``, mark reservations older than ``resolve_stale_after_s`` ABANDONED.

        Runs on a worker thread (the ledger write never blocks the event loop); a failure (a busy or
        unreachable ledger) is logged by its type only and the next round tries again.
        """
        after, every = self._config.resolve_stale_after_s, self._config.resolve_stale_every_s
        while True:
            await asyncio.sleep(every)
            try:
                marked = await self.run(lambda worker: worker.ledger.resolve_stale(older_than_s=after))
            except Exception as exc:  # the schedule outlives a failed round
                log.warning("resolving stale reservations failed (%s); next try in %g s", type(exc).__name__, every)
                continue
            if marked:
                log.warning("marked %d reservation(s) older than %g s ABANDONED (they stay charged)", marked, after)

    @property
    def generation(self) -> int:
        """Bumped when a registration may have changed a dataset's current snapshot."""
        return self._generation

    def invalidate(self) -> None:
        """Make every worker start fresh Sessions at its next request (after a registration here)."""
        with self._lock:
            self._generation += 1

    def close(self) -> None:
        """Wait for running requests, then close every worker's Sessions and ledger connection, and the snapshots."""
        self._executor.shutdown(wait=True)
        with self._lock:
            workers, self._all = self._all, []
        for worker in workers:
            worker.close()
        self.snapshots.close()
