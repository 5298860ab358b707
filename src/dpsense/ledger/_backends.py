"""Two storage backends with one behaviour: SQLite (embedded default) and PostgreSQL (psycopg 3).

Both expose the same tiny seam: ``write()`` opens a transaction that serialises with every other
writer on the rows it locks, ``read()`` a plain one. SQL is written once with ``?`` placeholders
and a ``{lock}`` marker after row-locking SELECTs.

* SQLite: a file in WAL mode with ``synchronous=FULL`` (a committed charge survives power loss);
  ``write()`` is ``BEGIN IMMEDIATE``, which takes the database's single write lock up front, so a
  check-and-debit inside it is atomic. ``busy_timeout`` bounds the wait for that lock. A writer that
  hangs inside a transaction can only be one of our own calls (no transaction spans user code).
* PostgreSQL: ``write()`` is a READ COMMITTED transaction whose SELECTs end in ``FOR UPDATE``;
  ``lock_timeout``, ``idle_in_transaction_session_timeout`` and ``statement_timeout`` are set per
  session, so a hung client cannot hold a budget row forever. Lock waits that time out raise
  ``LedgerBusy`` with nothing charged.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

from dpsense.core.errors import InternalError, LedgerBusy, UnsupportedRequest
from dpsense.ledger._schema import LATEST_VERSION, MIGRATIONS, render

Row = tuple[Any, ...]


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
    """The embedded default: one SQLite file (WAL, BEGIN IMMEDIATE, busy timeout)."""

    dialect = "sqlite"

    def __init__(self, path: str, *, busy_timeout_s: float = 60.0) -> None:
        self._conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
        self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = FULL")
        self._conn.execute("PRAGMA foreign_keys = ON")
        _migrate(self)

    @contextmanager
    def write(self) -> Iterator[Tx]:
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise LedgerBusy(f"the SQLite ledger stayed locked beyond its busy timeout ({exc})") from None
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

    def close(self) -> None:
        self._conn.close()


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
    """A shared deployment: PostgreSQL through psycopg 3 (row locks FOR UPDATE, lock timeouts)."""

    dialect = "postgresql"

    def __init__(
        self,
        url: str,
        *,
        lock_timeout_s: float = 30.0,
        idle_in_transaction_timeout_s: float = 60.0,
        statement_timeout_s: float = 60.0,
    ) -> None:
        try:
            import psycopg
        except ImportError:  # pragma: no cover - depends on the installed extras
            raise UnsupportedRequest(
                "a postgresql:// ledger needs psycopg 3", url.split("@")[-1], "pip install 'dpsense[postgres]'"
            ) from None
        self._errors = psycopg.errors
        self._conn = psycopg.connect(url, autocommit=True)
        for name, seconds in (
            ("lock_timeout", lock_timeout_s),
            ("idle_in_transaction_session_timeout", idle_in_transaction_timeout_s),
            ("statement_timeout", statement_timeout_s),
        ):
            self._conn.execute(f"SET {name} = {int(seconds * 1000)}")
        _migrate(self)

    @contextmanager
    def write(self) -> Iterator[Tx]:
        try:
            with self._conn.transaction():
                yield _PgTx(self._conn)
        except (self._errors.LockNotAvailable, self._errors.QueryCanceled) as exc:
            raise LedgerBusy(f"a PostgreSQL ledger lock was not obtained in time ({exc.sqlstate})") from None

    @contextmanager
    def read(self) -> Iterator[Tx]:
        with self._conn.transaction():
            yield _PgTx(self._conn)

    def close(self) -> None:
        self._conn.close()


def _migrate(backend: SqliteBackend | PostgresBackend) -> None:
    """Apply missing migrations; concurrent openers serialise on the write lock / an advisory lock."""
    with backend.write() as tx:
        if backend.dialect == "postgresql":
            tx.execute("SELECT pg_advisory_xact_lock(hashtext(current_schema()))")
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


def open_backend(url: str) -> SqliteBackend | PostgresBackend:
    """A backend from a URL: ``sqlite:///path/to/file.db`` (or a bare path) or ``postgresql://...``."""
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresBackend(url)
    return SqliteBackend(sqlite_path(url))


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
