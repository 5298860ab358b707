"""Load test of the HTTP release service: concurrent analysts on loopback, then an overspend audit.

This script is the client process. It starts the service (``python -m dpsense.service serve``,
``--processes`` processes of ``--workers`` worker threads) as a second process on 127.0.0.1 over a
PostgreSQL ledger (``--ledger``, default a throw-away schema in ``DPSENSE_BENCH_PG_URL`` =
postgresql://postgres@127.0.0.1:5432/test), registers a synthetic dataset through the steward's
route, gives every analyst a token and a sub-budget, then runs ``--clients`` analysts for
``--duration`` seconds, each keeping ``--in-flight`` requests in flight (one keep-alive connection
each, one request at a time on it). Each sends releases with fresh idempotency keys (distinct
queries, so most are charged), retries some with the same key (which must return the same
release), and asks a few shared queries (answered from the store). The dataset's total budget is
set below the sum of the analysts' own ones, so it is the one that binds when it runs out.

Why several requests in flight per analyst: every release response waits for the latency floor
(``--min-latency``, default 0.25 s, a timing-channel defence of the service), so one connection
answers at most 1 / 0.25 s = 4 releases a second and 16 one-at-a-time analysts at most 64 a
second, whatever the server does (Little's law). 16 analysts x 4 in flight can reach 256 a second
at the floor; what limits them below that is the service's CPU.

Afterwards the ledger is audited: for the total and every analyst scope, spent <= cap, and the
spent amount equals the exact sum of the spending charges in that scope. Overspend is the sum of
any excess. Prints releases per second (charged answers), answers per second (all 200s), p50/p99
latency of release requests, refusals and server errors (releases per second counts charged answers
over the time until the last charge, so refusals after the budget ran out do not dilute it), the CPU
per release request of the service's processes, of PostgreSQL's and of this client, and the load
average, and ends with TARGET lines (``TARGET <name> <measured> <op> <goal>``; the goals are issue
18's: 200 charged releases/s, p99 at most 250 ms above the floor). Exits 1 only on a correctness
failure (overspend, a server error, a retry answered with another release); a missed speed target
still exits 0.

Bounded in count and time: the clients stop at the deadline, the server is stopped at the end, and
every request goes to 127.0.0.1.

    python benchmarks/service_load.py                       # 16 analysts x 4 in flight, 60 s, 2 x 3 workers
    python benchmarks/service_load.py --clients 8 --duration 10 --total-epsilon 6
    python benchmarks/service_load.py --in-flight 1 --processes 1   # one request at a time, one process
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd

from _service import cpu_seconds, drop_schema, fresh_schema, machine_busy, start_service
from dpsense.core.privacy_loss import ApproxDP, PrivacyLoss, PureDP
from dpsense.ledger import ChargeState, Ledger, Scope

SPENT = {ChargeState.RESERVED, ChargeState.COMMITTED, ChargeState.FAILED, ChargeState.ABANDONED}
#: Each release's ε in thousandths (distinct values make distinct, charged queries).
EPSILON_MILLI = (10, 50)
#: The goals of issue 18: charged releases per second, and the p99 latency above the latency floor.
GOAL_RPS = 200.0
GOAL_P99_ABOVE_FLOOR_MS = 250.0
POLICY = {
    "protected": "a person and all their events",
    "population": 1_000_000,
    "planned_releases": 100_000,
    "release_window": "2026-12-01/2027-11-30",
    "delta_rationale": "δ = 1e-8, well below 1/(10 x population)",
    "per_release_epsilon": 1,
    "attacker_knowledge": "all but one person's rows",
    "minimum_useful_accuracy": "counts within ±100",
    "approved_by": "load test",
    "approved_on": "2026-11-29",
    "next_review": "2027-05-29",
}


@dataclass
class Stats:
    """What one client saw."""

    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    charged: int = 0
    cached: int = 0
    retry_mismatches: int = 0
    last_charge: float = 0.0


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=16, help="concurrent analysts")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    parser.add_argument("--ledger", default=None, help="ledger URL (default: a fresh PostgreSQL schema)")
    parser.add_argument(
        "--in-flight",
        type=int,
        default=4,
        help="requests each analyst keeps in flight (one connection each; 1 = one request at a time)",
    )
    parser.add_argument("--processes", type=int, default=2, help="the service's processes")
    parser.add_argument("--workers", type=int, default=3, help="the service's worker threads per process")
    parser.add_argument("--min-latency", type=float, default=0.25, help="the service's release latency floor")
    parser.add_argument("--latency-quantum", type=float, default=0.25, help="the service's latency rounding")
    parser.add_argument("--analyst-epsilon", type=float, default=40.0, help="each analyst's sub-budget")
    parser.add_argument("--total-epsilon", type=float, default=400.0, help="the dataset's total budget")
    parser.add_argument("--persons", type=int, default=5000, help="privacy units in the synthetic data")
    parser.add_argument("--goal-rps", type=float, default=GOAL_RPS)
    parser.add_argument(
        "--goal-p99-ms", type=float, default=None, help=f"default: the floor + {GOAL_P99_ABOVE_FLOOR_MS:g} ms"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON here")
    return parser.parse_args()


def _write_data(path: Path, persons: int) -> None:
    person = np.repeat(np.arange(persons), 3)
    row = np.arange(person.size)
    frame = pd.DataFrame(
        {
            "person_id": [f"p{p}" for p in person],
            "region": np.array(["north", "south", "east", "west"])[person % 4],
            "hours": 0.5 + ((row * 7919) % 1000) / 83.3,
            "age": 18 + (person * 31) % 77,
        }
    )
    frame.to_csv(path, index=False)


def _setup(url: str, steward: str, analysts: list[str], args: argparse.Namespace) -> None:
    headers = {"Authorization": f"Bearer {steward}"}
    body = {
        "name": "events",
        "source": "events.csv",
        "privacy_unit": "person_id",
        "bounds": {"hours": [0, 24], "age": [0, 120]},
        "keys": {"region": ["north", "south", "east", "west"]},
        "max_rows_per_unit": 5,
        "max_groups_per_unit": {"region": 1},
        "budget": {"epsilon": args.total_epsilon},
        "policy": POLICY,
    }
    response = httpx.post(url + "/v1/steward/datasets", json=body, headers=headers, timeout=120)
    response.raise_for_status()
    for analyst in analysts:
        scope = {"dataset": "events", "scope": "analyst", "value": analyst, "epsilon": args.analyst_epsilon}
        httpx.put(url + "/v1/steward/budgets", json=scope, headers=headers, timeout=60).raise_for_status()


def _query(rng: random.Random, analyst: str) -> dict[str, Any]:
    kind = rng.randrange(3)
    aggregates: dict[str, Any] = (
        {"people": {"kind": "count_units"}, "events": {"kind": "count", "max_rows_per_unit": 3}},
        {"mean_hours": {"kind": "mean", "column": "hours", "max_rows_per_unit": 3}},
        {"total_hours": {"kind": "sum", "column": "hours", "max_rows_per_unit": 3}, "n": {"kind": "count"}},
    )[kind]
    doc: dict[str, Any] = {
        "dataset": "events",
        "epsilon": rng.randrange(EPSILON_MILLI[0], EPSILON_MILLI[1] + 1) / 1000,
        "group_by": {"column": "region"},
        "filters": [
            {"column": "age", "op": ">=", "value": (low := rng.randrange(18, 94))},
            {"column": "age", "op": "<", "value": rng.randrange(low + 1, 96)},
        ],
        "aggregates": aggregates,
    }
    if rng.random() < 0.05:  # a question every analyst asks: answered from the store after the first
        doc = {"dataset": "events", "epsilon": 0.05, "aggregates": {"n": {"kind": "count_units"}}}
    return doc


class _Connection:
    """One keep-alive HTTP/1.1 connection on loopback, written by hand: the load generator shares the
    machine's cores with the service and PostgreSQL, so it must cost little per request (an HTTP
    client library costs about a millisecond of CPU a request; this about a tenth of that)."""

    def __init__(self, host: str, port: int, token: str) -> None:
        self._host, self._port = host, port
        self._auth = f"Authorization: Bearer {token}\r\nHost: {host}:{port}\r\n"
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post(self, path: str, body: dict[str, Any], key: str | None = None) -> tuple[int, Any]:
        payload = json.dumps(body).encode("utf-8")
        head = f"POST {path} HTTP/1.1\r\n{self._auth}Content-Type: application/json\r\n"
        head += f"Content-Length: {len(payload)}\r\n" + (f"Idempotency-Key: {key}\r\n" if key else "") + "\r\n"
        if self._streams is None:
            self._streams = await asyncio.open_connection(self._host, self._port)
        reader, writer = self._streams
        writer.write(head.encode("latin-1") + payload)
        status_line = await reader.readline()
        if not status_line:
            raise ConnectionError("the service closed the connection")
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            data = await reader.readexactly(int(headers["content-length"]))
        else:  # chunked
            parts = []
            while size := int((await reader.readline()).strip(), 16):
                parts.append(await reader.readexactly(size))
                await reader.readline()
            await reader.readline()
            data = b"".join(parts)
        if headers.get("connection") == "close":
            self.close()
        return status, json.loads(data) if data else None

    def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None


async def _client(
    address: tuple[str, int], token: str, analyst: str, deadline: float, warmup: int, seed: int, stats: Stats
) -> None:
    """One analyst's connection: releases back to back until the deadline (a retry now and then)."""
    rng = random.Random(seed)
    connection = _Connection(*address, token)
    last: tuple[dict[str, Any], str, int] | None = None
    try:
        for _ in range(warmup):  # the workers' first Sessions and plans; not measured
            await connection.post("/v1/preview", _query(rng, analyst))
        while time.monotonic() < deadline:
            retry = last is not None and rng.random() < 0.15
            body, key = (last[0], last[1]) if retry and last is not None else (_query(rng, analyst), uuid.uuid4().hex)
            start = time.perf_counter()
            status, doc = await connection.post("/v1/releases", body, key)
            stats.latencies.append(time.perf_counter() - start)
            stats.statuses[status] = stats.statuses.get(status, 0) + 1
            if status != 200:
                continue
            if doc["charged"] is not None:
                stats.charged += 1
                stats.last_charge = time.monotonic()
            stats.cached += bool(doc["cached"])
            if retry and last is not None and doc["release_id"] != last[2]:
                stats.retry_mismatches += 1
            last = (body, key, doc["release_id"])
    finally:
        connection.close()


async def _load(
    address: tuple[str, int], tokens: dict[str, str], args: argparse.Namespace, stats: list[Stats]
) -> float:
    """Every analyst's ``--in-flight`` connections until the deadline; returns when the load started."""
    deadline = time.monotonic() + args.duration
    started = time.monotonic()
    await asyncio.gather(
        *(
            _client(address, tokens[a], a, deadline, 2, i * args.in_flight + j, stats[i])
            for i, a in enumerate(tokens)
            for j in range(args.in_flight)
        )
    )
    return started


def _epsilon(loss: PrivacyLoss) -> Fraction:
    assert isinstance(loss, PureDP | ApproxDP)
    return loss.epsilon


def _overspend(ledger_url: str, analysts: list[str]) -> tuple[Fraction, list[str]]:
    """Excess of spent over cap, summed over scopes, and any scope whose spend is not its charges' sum."""
    excess, problems = Fraction(0), []
    with Ledger.open(ledger_url) as ledger:
        charges = [c for c in ledger.charges("events") if c.state in SPENT]
        scopes = [(Scope.total(), charges)] + [
            (Scope.analyst(a), [c for c in charges if c.analyst == a]) for a in analysts
        ]
        for scope, in_scope in scopes:
            status = ledger.budget("events", scope)
            spent, cap = _epsilon(status.spent), _epsilon(status.cap)
            excess += max(Fraction(0), spent - cap)
            counted = sum((_epsilon(c.loss) for c in in_scope), Fraction(0))
            if counted != spent:
                problems.append(f"{scope}: ledger says {spent}, its charges sum to {counted}")
        if not ledger.verify().ok:
            problems.append("the audit chain is broken")
    return excess, problems


def main() -> int:
    args = _args()
    schema, ledger_url = (None, args.ledger) if args.ledger else fresh_schema()
    root = Path(tempfile.mkdtemp(prefix="dpsense-load-"))
    data_dir = root / "data"
    data_dir.mkdir()
    _write_data(data_dir / "events.csv", args.persons)
    analysts = [f"analyst{i:02d}" for i in range(args.clients)]
    with Ledger.open(ledger_url) as ledger:
        for name in ("steward", *analysts):
            ledger.add_analyst(name)
        steward = ledger.create_token("steward", role="steward")
        tokens = {a: ledger.create_token(a) for a in analysts}
    floor = ("--min-latency", str(args.min_latency), "--latency-quantum", str(args.latency_quantum))
    process, url = start_service(
        ledger_url, data_dir, root / "server.log", workers=args.workers, processes=args.processes, extra=floor
    )
    try:
        _setup(url, steward, analysts, args)
        stats = [Stats() for _ in analysts]
        address = ("127.0.0.1", int(url.rsplit(":", 1)[1]))
        cpu_before = (cpu_seconds({process.pid}), cpu_seconds(name="postgres"), time.process_time())
        busy_before = machine_busy()
        started = asyncio.run(_load(address, tokens, args, stats))
        elapsed = time.monotonic() - started
        busy_after = machine_busy()
        cpu = (cpu_seconds({process.pid}), cpu_seconds(name="postgres"), time.process_time())
        charging = max([s.last_charge for s in stats if s.charged] or [started + elapsed]) - started
        excess, problems = _overspend(ledger_url, analysts)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        if schema is not None:
            drop_schema(schema)
    server_cpu, pg_cpu, client_cpu = (after - before for after, before in zip(cpu, cpu_before, strict=True))
    machine = (busy_after[0] - busy_before[0]) / max(1, busy_after[1] - busy_before[1])
    latencies = sorted(x for s in stats for x in s.latencies)
    statuses: dict[int, int] = {}
    for s in stats:
        for code, n in s.statuses.items():
            statuses[code] = statuses.get(code, 0) + n
    charged = sum(s.charged for s in stats)
    answers = statuses.get(200, 0)
    server_errors = sum(n for code, n in statuses.items() if code >= 500)
    mismatches = sum(s.retry_mismatches for s in stats)
    p50 = 1000 * latencies[len(latencies) // 2] if latencies else float("nan")
    p99 = 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] if latencies else float("nan")
    requests = max(1, len(latencies))
    goal_p99 = args.goal_p99_ms if args.goal_p99_ms is not None else args.min_latency * 1000 + GOAL_P99_ABOVE_FLOOR_MS
    figures = {
        "clients": args.clients,
        "in_flight_per_client": args.in_flight,
        "processes": args.processes,
        "workers_per_process": args.workers,
        "load_average_1min": os.getloadavg()[0],
        "duration_s": round(elapsed, 2),
        "requests": len(latencies),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "releases_charged": charged,
        "answers_cached": sum(s.cached for s in stats),
        "charging_window_s": round(charging, 2),
        "releases_per_s": charged / charging,
        "answers_per_s": answers / elapsed,
        "p50_latency_ms": p50,
        "p99_latency_ms": p99,
        "overspend_epsilon": float(excess),
        "ledger_problems": problems,
        "server_errors": server_errors,
        "retry_mismatches": mismatches,
        "server_cpu_ms_per_request": 1000 * server_cpu / requests,
        "postgres_cpu_ms_per_request": 1000 * pg_cpu / requests,
        "client_cpu_ms_per_request": 1000 * client_cpu / requests,
        "machine_busy": machine,
    }
    print(
        f"service load: {args.clients} analysts x {args.in_flight} in flight for {elapsed:.1f} s, {len(latencies)}"
        f" release requests; service: {args.processes} process(es) x {args.workers} workers;"
        f" load average {figures['load_average_1min']:.2f}"
    )
    print(f"  statuses {figures['statuses']}  charged {charged}  answered from the store {figures['answers_cached']}")
    print(
        f"  releases/s (charged, over the {charging:.1f} s until the last charge) {figures['releases_per_s']:.1f}"
        f"   answers/s (all 200, whole run) {figures['answers_per_s']:.1f}"
    )
    print(f"  latency p50 {p50:.0f} ms  p99 {p99:.0f} ms (release floor {args.min_latency * 1000:.0f} ms)")
    print(f"  overspend ε {float(excess):g}; ledger problems: {problems or 'none'}")
    print(
        f"  CPU per release request: service {figures['server_cpu_ms_per_request']:.1f} ms, PostgreSQL"
        f" {figures['postgres_cpu_ms_per_request']:.1f} ms, this client {figures['client_cpu_ms_per_request']:.1f} ms;"
        f" machine busy {100 * machine:.0f} % of {os.cpu_count()} cores"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=1), encoding="utf-8")
    print(f"TARGET releases_per_s {figures['releases_per_s']:.1f} >= {args.goal_rps:g}")
    print(f"TARGET p99_latency_ms {p99:.0f} <= {goal_p99:g}")
    print(f"TARGET overspend_epsilon {float(excess):g} <= 0")
    print(f"TARGET server_errors {server_errors} <= 0")
    print(f"TARGET retry_mismatches {mismatches} <= 0")
    return 1 if excess or problems or server_errors or mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
