"""Two storage backends with one behaviour: SQLite (embedded default) and PostgreSQL (psycopg 3).

Both expose the same tiny seam: ``write()`` opens a transaction that serialises with every other
writer on the rows it locks, ``read()`` a plain one, ``select()`` runs one read statement on its own
(the hot reads of the service: a token, the current snapshot; one round trip instead of three).
SQL is written once with ``?`` placeholders and a ``{lock}`` marker after row-locking SELECTs. No
transaction spans user code: each is a few statements of ours, milliseconds long, and the audit
append (which locks the one ``audit_head`` row, the total order of the hash chain) comes at its end.

Liveness: how long a stopped or hung holder can block others (docs/ledger.md, "Liveness").

* SQLite: a file in WAL mode with ``synchronous=FULL`` (a committed charge survives power loss);
  ``write()`` is ``BEGIN IMMEDIATE``, which takes the database's single write lock up front, so a
  check-and-debit inside it is atomic. A writer waits at most ``busy_timeout_s`` (default
  ``DEFAULT_BUSY_TIMEOUT_S`` = 10 s, URL ``sqlite:///ledger.db?busy_timeout_s=S``) for that lock,
  then gets ``LedgerBusy`` with nothing charged. The lock is a POSIX lock of the holding process
  (byte 120 of the ``-shm`` file): no other process can break it, so a process stopped *inside*
  a write transaction blocks every write on every dataset until it is resumed or killed (the
  message names its pid when the OS tells). Reads, and ``Ledger.open`` of a ledger whose schema
  is current (the version is read first; the write lock is taken only for a due migration), go
  on. A process stopped *between* calls holds no lock and blocks no one.
* PostgreSQL: ``write()`` is a READ COMMITTED transaction whose SELECTs end in ``FOR UPDATE``.
  Each session sets ``idle_in_transaction_session_timeout`` (default 5 s): a client stopped or hung
  inside a transaction is disconnected by the server, which rolls its transaction back and frees
  its row locks, at most that long after its last statement. ``statement_timeout`` (30 s) cuts off
  a statement that runs too long, ``lock_timeout`` (10 s) bounds each lock wait: a writer behind
  one stopped holder gets its lock within 5 s plus the holder's last statement, else
  ``LedgerBusy`` with nothing charged. URL query parameters ``lock_timeout_s``,
  ``idle_in_transaction_timeout_s`` and ``statement_timeout_s`` change them. A session the server
  ended raises ``LedgerBusy`` once (never a driver error) and the next call reconnects.
"""

from __future__ import annotations

import math
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

from dpsense.core.errors import InternalError, LedgerBusy, UnsupportedRequest, UsageError
from dpsense.ledger._schema import LATEST_VERSION, MIGRATIONS, render

Row = tuple[Any, ...]

#: SQLite: the longest a write waits for the database's write lock before ``LedgerBusy`` (seconds).
DEFAULT_BUSY_TIMEOUT_S = 10.0
#: PostgreSQL: the server ends a session idle inside a transaction after this (a stopped client).
DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_S = 5.0
#: PostgreSQL: the longest one lock wait lasts before ``LedgerBusy`` (above the idle timeout, so a
#: waiter behind a stopped holder gets the lock rather than an error).
DEFAULT_LOCK_TIMEOUT_S = 10.0
#: PostgreSQL: the longest one statement runs (migrations excepted).
DEFAULT_STATEMENT_TIMEOUT_S = 30.0


class Tx(Protocol):
    """One open transaction (``dialect`` lets a step use one statement where PostgreSQL allows it)."""

    dialect: str

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        """Run one statement; return its rows (empty for statements without a result)."""
        ...

    def send(self, sql: str, params: Sequence[object] = ()) -> None:
        """Run one statement whose result is not needed (a seam for batching; both backends run it now)."""
        ...


class Backend(Protocol):
    """A ledger store."""

    dialect: str

    def write(self) -> Any:  # a context manager yielding Tx (typed loosely: Protocols and contextmanager)
        """A transaction that may lock rows and write."""
        ...

    def read(self) -> Any:
        """A transaction for reads only."""
        ...

    def select(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        """One read statement on its own, outside any explicit transaction (``read`` without BEGIN/COMMIT).

        A statement sees the data committed before it began, exactly as one statement of a READ
        COMMITTED ``read()`` transaction (PostgreSQL) or of SQLite's ``read()``: for one statement the
        two are the same read, this one without the two extra round trips. Use ``read()`` for several
        statements that must see one snapshot (SQLite) or that set a transaction's isolation.
        """
        ...

    def close(self) -> None:
        """Release the connection."""
        ...


class _SqliteTx:
    dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        return self._conn.execute(sql.replace("{lock}", ""), tuple(params)).fetchall()

    def send(self, sql: str, params: Sequence[object] = ()) -> None:
        self._conn.execute(sql.replace("{lock}", ""), tuple(params))


class SqliteBackend:
    """The embedded default: one SQLite file (WAL, BEGIN IMMEDIATE, a bounded busy wait)."""

    dialect = "sqlite"

    def __init__(self, path: str, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self._path = path
        self._busy_timeout_s = _seconds("busy_timeout_s", busy_timeout_s)
        self._conn = sqlite3.connect(path, timeout=self._busy_timeout_s, isolation_level=None, check_same_thread=False)
        self._conn.execute(f"PRAGMA busy_timeout = {_millis(self._busy_timeout_s)}")
        self._conn.execute("PRAGMA journal_mode = WAL")  # a no-op without any lock when it is WAL already
        self._conn.execute("PRAGMA synchronous = FULL")
        self._conn.execute("PRAGMA foreign_keys = ON")
        _migrate(self)

    @contextmanager
    def write(self) -> Iterator[Tx]:
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            holder = _write_lock_holder(self._path)
            by = "another process" if not holder else f"another process (pid {holder})"
            by = "another connection of this process" if holder == os.getpid() else by
            raise LedgerBusy(
                f"{by} held the SQLite ledger's write lock beyond the busy timeout ({self._busy_timeout_s:g} s,"
                f" {exc}); nothing was charged. If that process is stopped, resume or kill it: nobody else can"
                " break its lock. Use PostgreSQL for shared deployments (a stopped client is cut off there)"
            ) from None
        try:
            yield _SqliteTx(self._conn)
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[Tx]:
        self._conn.execute("BEGIN")
        try:
            yield _SqliteTx(self._conn)
        finally:
            self._conn.execute("COMMIT")

    def select(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        return _SqliteTx(self._conn).execute(sql, params)  # autocommit: the statement is its own transaction

    def close(self) -> None:
        self._conn.close()


def _write_lock_holder(path: str) -> int | None:
    """The pid holding SQLite's WAL write lock (byte 120 of ``-shm``) as ``/proc/locks`` lists it, if any.

    ``/proc/locks`` is read rather than asking with ``fcntl`` on a new descriptor: closing any
    descriptor of a file drops every POSIX lock this process holds on it, SQLite's included.
    """
    try:
        shm = os.stat(path + "-shm")
        with open("/proc/locks", encoding="ascii") as locks:
            lines = locks.read().splitlines()
    except OSError:
        return None
    inode = f"{os.major(shm.st_dev):02x}:{os.minor(shm.st_dev):02x}:{shm.st_ino}"
    for line in lines:
        fields = line.split()  # "1: POSIX ADVISORY WRITE <pid> <maj:min:inode> <start> <end>"; waiters have "->"
        if (
            len(fields) == 8
            and (fields[1], fields[3], fields[5]) == ("POSIX", "WRITE", inode)
            and int(fields[6]) <= 120
            and (fields[7] == "EOF" or int(fields[7]) >= 120)
        ):
            return int(fields[4])
    return None


class _PgTx:
    # ``send`` runs at once: psycopg pipeline mode measured 505 (1 client) / 342 (16 clients) debits/s
    # against 683 / 330 without it (benchmarks/ledger.py, 2 cores), so it is not used. Round trips
    # are cut instead by folding steps into single statements (data-modifying CTEs, RETURNING).
    dialect = "postgresql"

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        cur = self._conn.execute(_pg_sql(sql), tuple(params))
        return list(cur.fetchall()) if cur.description is not None else []

    def send(self, sql: str, params: Sequence[object] = ()) -> None:
        self._conn.execute(_pg_sql(sql), tuple(params))


def _pg_sql(sql: str) -> str:
    return sql.replace("{lock}", " FOR UPDATE").replace("?", "%s")


class PostgresBackend:
    """A shared deployment: PostgreSQL through psycopg 3 (row locks FOR UPDATE, bounded lock waits)."""

    dialect = "postgresql"

    def __init__(
        self,
        url: str,
        *,
        lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
        idle_in_transaction_timeout_s: float = DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_S,
        statement_timeout_s: float = DEFAULT_STATEMENT_TIMEOUT_S,
    ) -> None:
        try:
            import psycopg
        except ImportError:  # pragma: no cover - depends on the installed extras
            raise UnsupportedRequest(
                "a postgresql:// ledger needs psycopg 3", url.split("@")[-1], "pip install 'dpsense[postgres]'"
            ) from None
        self._psycopg = psycopg
        self._url = url
        self._settings = {
            "lock_timeout": _seconds("lock_timeout_s", lock_timeout_s),
            "idle_in_transaction_session_timeout": _seconds(
                "idle_in_transaction_timeout_s", idle_in_transaction_timeout_s
            ),
            "statement_timeout": _seconds("statement_timeout_s", statement_timeout_s),
        }
        self._conn = self._connect()
        _migrate(self)

    def _connect(self) -> Any:
        conn = self._psycopg.connect(self._url, autocommit=True)
        names = list(self._settings)
        conn.execute(
            "SELECT " + ", ".join("set_config(%s, %s, false)" for _ in names),
            [x for name in names for x in (name, str(_millis(self._settings[name])))],
        )
        return conn

    def _live(self) -> Any:
        """The connection; a new one when the server ended the last (``close()`` is final)."""
        if self._conn.broken:
            self._conn.close()
            try:
                self._conn = self._connect()
            except self._psycopg.OperationalError as exc:
                raise LedgerBusy(
                    f"the PostgreSQL ledger cannot be reached ({_first_line(exc)}); nothing was charged; retry later"
                ) from None
        return self._conn

    def write(self) -> AbstractContextManager[Tx]:
        return self._transaction(writes=True)

    def read(self) -> AbstractContextManager[Tx]:
        return self._transaction(writes=False)

    def select(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        conn = self._live()  # autocommit: the statement is its own transaction (READ COMMITTED's snapshot)
        with self._failures(conn, writes=False, committing=lambda: False):
            return _PgTx(conn).execute(sql, params)

    @contextmanager
    def _transaction(self, *, writes: bool) -> Iterator[Tx]:
        conn = self._live()
        committing = False
        with self._failures(conn, writes=writes, committing=lambda: committing), conn.transaction():
            yield _PgTx(conn)
            committing = True

    @contextmanager
    def _failures(self, conn: Any, *, writes: bool, committing: Callable[[], bool]) -> Iterator[None]:
        """The driver's errors of a lock wait, a timeout or a lost session, as ``LedgerBusy``."""
        errors = self._psycopg.errors
        try:
            yield
        except errors.LockNotAvailable:
            raise LedgerBusy(
                f"a PostgreSQL ledger lock was not obtained within lock_timeout ({self._settings['lock_timeout']:g} s);"
                " nothing was charged; retry later"
            ) from None
        except errors.QueryCanceled:
            raise LedgerBusy(
                "a PostgreSQL ledger statement ran beyond statement_timeout"
                f" ({self._settings['statement_timeout']:g} s); nothing was charged; retry later"
            ) from None
        except self._psycopg.Error as exc:
            if not conn.broken:
                raise
            raise LedgerBusy(_lost(exc, unsure=writes and committing() and exc.sqlstate is None)) from None

    def close(self) -> None:
        self._conn.close()


def _lost(exc: Exception, *, unsure: bool) -> str:
    """The message of a session the server ended (or a lost connection): what happened to the write."""
    what = (
        "the connection was lost while committing: the write may have been stored (a retry with the same"
        " request id returns or completes it, never charging twice)"
        if unsure
        else "the server rolled back the open transaction: nothing was written"
    )
    return f"the PostgreSQL ledger session ended ({_first_line(exc)}); {what}; the next call reconnects"


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _seconds(name: str, value: object) -> float:
    """A timeout in seconds: a finite number above 0 (text from a URL is read as a number)."""
    number: object = value
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = None
    if isinstance(number, bool) or not isinstance(number, int | float) or not 0 < number < math.inf:
        raise UsageError(f"{name} is a positive, finite number of seconds", value, f"pass e.g. {name}=10")
    return float(number)


def _millis(seconds: float) -> int:
    """Whole milliseconds, at least 1 (0 would switch a PostgreSQL timeout off)."""
    return max(1, round(seconds * 1000))


def _migrate(backend: SqliteBackend | PostgresBackend) -> None:
    """Apply missing migrations; concurrent openers serialise on the write lock / an advisory lock.

    The version is read first in a read transaction: opening a current ledger takes no write lock,
    so it works while a stopped process holds SQLite's.
    """
    with backend.read() as tx:
        if tx.execute(_HAS_VERSIONS[backend.dialect]):
            current = tx.execute("SELECT MAX(version) FROM schema_version")[0][0] or 0
            if current == LATEST_VERSION:
                return
    with backend.write() as tx:
        if backend.dialect == "postgresql":
            tx.execute("SELECT pg_advisory_xact_lock(hashtext(current_schema()))")
            tx.execute("SET LOCAL statement_timeout = 0")  # a migration may rewrite a large table
        tx.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL, applied_at TEXT NOT NULL)")
        rows = tx.execute("SELECT MAX(version) FROM schema_version")
        current = rows[0][0] or 0
        if current > LATEST_VERSION:
            raise InternalError(f"ledger schema version {current} is newer than this dpsense ({LATEST_VERSION})")
        for migration in MIGRATIONS:
            if migration.version <= current:
                continue
            for statement in (*migration.statements, *migration.by_dialect.get(backend.dialect, ())):
                tx.execute(render(statement, backend.dialect))
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            tx.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)", (migration.version, stamp))


#: One row when the ``schema_version`` table exists (on PostgreSQL: in the search path, as created).
_HAS_VERSIONS = {
    "sqlite": "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'",
    "postgresql": "SELECT 1 WHERE to_regclass('schema_version') IS NOT NULL",
}
#: The timeouts a ledger URL may set as query parameters (seconds).
_SQLITE_OPTIONS = ("busy_timeout_s",)
_PG_OPTIONS = ("lock_timeout_s", "idle_in_transaction_timeout_s", "statement_timeout_s")


def open_backend(url: str) -> SqliteBackend | PostgresBackend:
    """A backend from a URL: ``sqlite:///path/to/file.db`` (or a bare path) or ``postgresql://...``.

    Timeouts (seconds) may be given as query parameters: ``sqlite:///ledger.db?busy_timeout_s=5``,
    ``postgresql://host/db?lock_timeout_s=10&idle_in_transaction_timeout_s=5&statement_timeout_s=30``
    (other PostgreSQL parameters go to the driver).
    """
    if url.startswith(("postgresql://", "postgres://")):
        rest, options = _url_options(url, _PG_OPTIONS, others_allowed=True)
        return PostgresBackend(rest, **options)
    if url.startswith("sqlite://"):
        _, options = _url_options(url, _SQLITE_OPTIONS, others_allowed=False)
        return SqliteBackend(sqlite_path(url), **options)  # sqlite_path reads the path only
    return SqliteBackend(sqlite_path(url))


def _url_options(url: str, names: tuple[str, ...], *, others_allowed: bool) -> tuple[str, dict[str, float]]:
    """Split the timeouts in ``names`` off a URL's query; other parameters are kept as written."""
    base, _, query = url.partition("?")
    kept: list[str] = []
    options: dict[str, float] = {}
    for piece in query.split("&") if query else []:
        key, _, value = piece.partition("=")
        if unquote(key) in names:
            options[unquote(key)] = _seconds(unquote(key), unquote(value))
        elif others_allowed:
            kept.append(piece)
        else:
            raise UnsupportedRequest(
                "a SQLite ledger URL takes no query parameter but busy_timeout_s",
                unquote(key),
                "write e.g. sqlite:///ledger.db?busy_timeout_s=10",
            )
    if not options:
        return url, options
    return base + ("?" + "&".join(kept) if kept else ""), options


def sqlite_path(url: str) -> str:
    """The file of a ``sqlite:///path/to/file.db`` URL (or a bare path); refuses other schemes and memory."""
    if "://" in url and not url.startswith("sqlite://"):
        raise UnsupportedRequest("unknown ledger URL scheme", url.split("://")[0], "use sqlite:/// or postgresql://")
    if not url.startswith("sqlite://"):
        return url
    path = unquote(urlparse(url).path)
    if url.startswith("sqlite:////"):
        path = "/" + path.lstrip("/")
    elif url.startswith("sqlite:///"):
        path = path[1:] if path.startswith("/") else path
    if not path or path == ":memory:":
        raise UnsupportedRequest(
            "the ledger must be a file so that charges are durable", url, "pass sqlite:///path/to/ledger.db"
        )
    return path
