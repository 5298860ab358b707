"""Memory of the HTTP release service: the server's RSS with many analysts on one large dataset.

The client process writes a synthetic Parquet file (``--rows`` rows, 4 per person), seeds a SQLite
ledger (a steward and ``--analysts`` analysts, one token each), starts ``python -m dpsense.service
serve`` on 127.0.0.1 with ``--workers`` worker threads and no latency floor, registers the file through
the steward's route, then has every analyst make one release (a grouped count, sum and mean at its
own ε, so each is a charged release, not a stored answer). It prints the server's resident
memory (``VmRSS`` of ``/proc/<pid>/status``) after registration, after the first analyst's release
(which loads the snapshot), after the other analysts' releases (sent at once) and at its peak
(``VmHWM``), and the load average. The TARGET line asks for at most one data copy per worker
process: the other analysts together add less memory than the first one's release (a copy of the
data and one release's working memory) did.

Run it against another checkout (e.g. the commit before a change) with ``PYTHONPATH=<checkout>/src``:
the server is started with the same interpreter and environment.

    python benchmarks/service_memory.py                    # 10^6 rows, 16 analysts, 4 workers
    python benchmarks/service_memory.py --rows 15000 --analysts 16
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd

from dpsense.ledger import Ledger

POLICY = {
    "protected": "a person and all their events",
    "population": 10_000_000,
    "planned_releases": 1000,
    "release_window": "2026-12-01/2027-11-30",
    "delta_rationale": "δ = 1e-9, well below 1/(10 x population)",
    "per_release_epsilon": 1,
    "attacker_knowledge": "all but one person's rows",
    "minimum_useful_accuracy": "counts within ±100",
    "approved_by": "memory benchmark",
    "approved_on": "2026-11-29",
    "next_review": "2027-05-29",
}
REGIONS = ["north", "south", "east", "west"]


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--analysts", type=int, default=16)
    parser.add_argument("--workers", type=int, default=4)
    return parser.parse_args()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _memory_mb(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of ``pid`` in MB."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


def _write_data(path: Path, rows: int) -> None:
    person = np.arange(rows) // 4
    frame = pd.DataFrame(
        {
            "person_id": person,
            "region": np.array(REGIONS)[person % 4],
            "hours": (np.arange(rows) * 7919 % 2400) / 100,
            "age": (18 + person * 31 % 77).astype(np.int64),
        }
    )
    frame.to_parquet(path, index=False)


def _release(url: str, token: str, index: int) -> int:
    body: dict[str, Any] = {
        "dataset": "events",
        "epsilon": round(0.1 + index / 1000, 3),
        "group_by": {"column": "region"},
        "aggregates": {
            "n": {"kind": "count"},
            "hours": {"kind": "sum", "column": "hours", "max_rows_per_unit": 4},
            "mean_age": {"kind": "mean", "column": "age", "max_rows_per_unit": 4},
        },
    }
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": f"memory-{index}"}
    return httpx.post(f"{url}/v1/releases", json=body, headers=headers, timeout=600).status_code


def main() -> int:
    args = _args()
    root = Path(tempfile.mkdtemp(prefix="dpsense-memory-"))
    data_dir = root / "data"
    data_dir.mkdir()
    _write_data(data_dir / "events.parquet", args.rows)
    ledger_url = f"sqlite:///{root / 'ledger.db'}"
    analysts = [f"analyst{i:02d}" for i in range(args.analysts)]
    with Ledger.open(ledger_url) as ledger:
        ledger.add_analyst("steward")
        steward = ledger.create_token("steward", role="steward")
        tokens = []
        for name in analysts:
            ledger.add_analyst(name)
            tokens.append(ledger.create_token(name))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable, "-m", "dpsense.service", "serve", "--ledger", ledger_url, "--data-dir", str(data_dir),
        "--port", str(port), "--workers", str(args.workers), "--min-latency", "0", "--latency-quantum", "0",
    ]  # fmt: skip
    log = (root / "server.log").open("wb")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                print((root / "server.log").read_text()[-3000:], file=sys.stderr)
                return 1
            time.sleep(0.2)
        idle = _memory_mb(server.pid)
        register = {
            "name": "events",
            "source": "events.parquet",
            "privacy_unit": "person_id",
            "bounds": {"hours": [0, 24], "age": [0, 120]},
            "keys": {"region": REGIONS},
            "max_rows_per_unit": 4,
            "max_groups_per_unit": {"region": 1},
            "budget": {"epsilon": 100, "delta": "1e-9"},
            "policy": POLICY,
        }
        answer = httpx.post(
            f"{url}/v1/steward/datasets", json=register, headers={"Authorization": f"Bearer {steward}"}, timeout=600
        )
        if answer.status_code != 201:
            print(answer.text, file=sys.stderr)
            return 1
        registered = _memory_mb(server.pid)
        statuses = [_release(url, tokens[0], 0)]
        first = _memory_mb(server.pid)
        started = time.monotonic()
        with ThreadPoolExecutor(len(tokens)) as pool:
            statuses += pool.map(lambda it: _release(url, it[1], it[0]), list(enumerate(tokens))[1:])
        elapsed = time.monotonic() - started
        after = _memory_mb(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    load = os.getloadavg()
    one = first["VmRSS"] - registered["VmRSS"]
    rest = after["VmRSS"] - first["VmRSS"]
    print(f"rows {args.rows}, analysts {args.analysts}, workers {args.workers}, statuses {sorted(set(statuses))}")
    print(f"RSS idle {idle['VmRSS']:.0f} MB, after registration {registered['VmRSS']:.0f} MB")
    print(f"RSS after the first analyst's release {first['VmRSS']:.0f} MB (+{one:.0f} MB: a copy and one release)")
    print(
        f"RSS after the other {len(tokens) - 1} analysts' releases, sent at once, {after['VmRSS']:.0f} MB "
        f"(+{rest:.0f} MB, {elapsed:.1f} s); peak {after['VmHWM']:.0f} MB"
    )
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"TARGET other_analysts_added_rss_mb {rest:.0f} < {one:.0f}")
    return 0 if set(statuses) == {200} else 1


if __name__ == "__main__":
    sys.exit(main())
