"""Backends for the ledger tests: a SQLite file, and PostgreSQL in a fresh schema per test.

PostgreSQL is the server at 127.0.0.1:5432 when ``pg_isready`` answers; otherwise a throw-away
cluster is started with initdb/pg_ctl on a free loopback port in a temporary directory (never a
skip), and stopped at the end of the session.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

SERVER_URL = "postgresql://postgres@127.0.0.1:5432/test"
BACKENDS = ["sqlite", "postgresql"]


def _ready(host: str, port: int) -> bool:
    try:
        out = subprocess.run(["pg_isready", "-h", host, "-p", str(port)], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        with socket.socket() as s:
            s.settimeout(1)
            return s.connect_ex((host, port)) == 0
    return out.returncode == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [shutil.which(name) or ""]
    if not found[-1]:
        raise RuntimeError(f"{name} not found: install PostgreSQL server binaries")
    return found[-1]


def _as_pg_user(root: Path) -> list[str]:
    """initdb refuses to run as root: run the cluster as the ``postgres`` system user then."""
    if os.geteuid() != 0:
        return []
    import pwd

    user = pwd.getpwnam("postgres")
    os.chown(root, user.pw_uid, user.pw_gid)
    return ["runuser", "-u", "postgres", "--"]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The URL of a PostgreSQL database to create test schemas in."""
    if _ready("127.0.0.1", 5432):
        yield SERVER_URL
        return
    root = Path(tempfile.mkdtemp(prefix="dpsense-pg-"))
    data, port = root / "data", _free_port()
    run_as = _as_pg_user(root)
    subprocess.run(
        [*run_as, _bin("initdb"), "-D", str(data), "-U", "postgres", "-A", "trust"], check=True, capture_output=True
    )
    opts = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=on"
    subprocess.run(
        [*run_as, _bin("pg_ctl"), "-D", str(data), "-o", opts, "-l", str(root / "log"), "-w", "start"], check=True
    )
    try:
        subprocess.run([_bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "test"], check=True)
        yield f"postgresql://postgres@127.0.0.1:{port}/test"
    finally:
        subprocess.run([*run_as, _bin("pg_ctl"), "-D", str(data), "-m", "immediate", "stop"], check=False)
        shutil.rmtree(root, ignore_errors=True)


def fresh_pg_schema(server: str) -> tuple[str, str]:
    """Create ``dpsense_test_<random>``; returns (schema, URL whose search_path is that schema)."""
    import psycopg

    schema = f"dpsense_test_{secrets.token_hex(6)}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return schema, f"{server}?options={quote(f'-csearch_path={schema}')}"


def drop_pg_schema(server: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture(params=BACKENDS)
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty ledger URL on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.db'}"
        return
    server = request.getfixturevalue("pg_server")
    schema, url = fresh_pg_schema(server)
    try:
        yield url
    finally:
        drop_pg_schema(server, schema)


def snapshot(url: str) -> object:
    """The ledger's stored state: file bytes for SQLite, every table's rows for PostgreSQL."""
    if url.startswith("sqlite:"):
        path = url.removeprefix("sqlite:///")
        return {p: Path(p).read_bytes() for p in (path, path + "-wal") if os.path.exists(p)}
    import psycopg

    with psycopg.connect(url) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        return {t: sorted(map(repr, conn.execute(f"SELECT * FROM {t}").fetchall())) for t in sorted(tables)}


def rows(url: str, sql: str) -> list[tuple[object, ...]]:
    """Rows of one query, read outside the ledger (for checks and tampering)."""
    if url.startswith("sqlite:"):
        import sqlite3

        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(url) as conn:
        return list(conn.execute(sql).fetchall())
