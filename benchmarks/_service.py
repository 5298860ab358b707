"""What the service benchmarks share: a throw-away PostgreSQL schema, a service process, CPU readings.

``benchmarks/service_load.py`` (releases) and ``benchmarks/collection_ingest.py`` (local-DP reports)
start the service the same way and read the same counters; the PostgreSQL server is
``DPSENSE_BENCH_PG_URL`` (default postgresql://postgres@127.0.0.1:5432/test).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import httpx

PG_URL = os.environ.get("DPSENSE_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def fresh_schema(prefix: str = "dpsense_load") -> tuple[str, str]:
    """A new schema on the PostgreSQL server and a ledger URL that uses it."""
    import psycopg

    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return schema, f"{PG_URL}?options={quote(f'-csearch_path={schema}')}"


def drop_schema(schema: str) -> None:
    """Drop a schema ``fresh_schema`` made."""
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_service(
    ledger_url: str, data_dir: Path, log: Path, *, workers: int, processes: int, extra: tuple[str, ...] = ()
) -> tuple[subprocess.Popen[bytes], str]:
    """``python -m dpsense.service serve`` on 127.0.0.1, waited for until ``/healthz`` answers (60 s at most)."""
    port = free_port()
    command = [
        sys.executable, "-m", "dpsense.service", "serve", "--ledger", ledger_url, "--data-dir", str(data_dir),
        "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers),
        *(["--processes", str(processes)] if processes != 1 else []), *extra,
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the service exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    process.kill()
    raise RuntimeError("the service did not start in 60 s")


def cpu_seconds(pids: set[int] | None = None, name: str | None = None) -> float:
    """CPU seconds (user + system) of ``pids`` and their descendants, or of the processes called ``name``."""
    ticks = os.sysconf("SC_CLK_TCK")
    rows: dict[int, tuple[int, str, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        comm, rest = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()
        rows[int(entry.name)] = (int(rest[1]), comm, (int(rest[11]) + int(rest[12])) / ticks)
    if name is not None:
        return sum(cpu for _, comm, cpu in rows.values() if comm == name)
    chosen = set(pids or ())
    while True:
        more = {pid for pid, (ppid, _, _) in rows.items() if ppid in chosen and pid not in chosen}
        if not more:
            break
        chosen |= more
    return sum(rows[pid][2] for pid in chosen if pid in rows)


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine since boot (``/proc/stat``)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)
