"""Load test of the HTTP release service: concurrent analysts on loopback, then an overspend audit.

This script is the client process. It starts the service (``python -m dpsense.service serve``) as a
second process on 127.0.0.1 over a PostgreSQL ledger (``--ledger``, default a throw-away schema in
``DPSENSE_BENCH_PG_URL`` = postgresql://postgres@127.0.0.1:5432/test), registers a synthetic dataset
through the steward's route, gives every analyst a token and a sub-budget, then runs ``--clients``
analysts (one thread and one keep-alive connection each) for ``--duration`` seconds. Each sends
releases with fresh idempotency keys (distinct queries, so most are charged), retries some with the
same key (which must return the same release), and asks a few shared queries (answered from the
store). The dataset's total budget is set to bind before the analysts' own ones, so the run ends
with budgets exhausted under contention.

Afterwards the ledger is audited: for the total and every analyst scope, spent <= cap, and the
spent amount equals the exact sum of the spending charges in that scope. Overspend is the sum of
any excess. Prints releases per second (charged answers), answers per second (all 200s), p50/p99
latency of release requests, refusals and server errors (releases per second counts charged answers
over the time until the last charge, so refusals after the budget ran out do not dilute it), and ends with TARGET lines
(``TARGET <name> <measured> <op> <goal>``). Exits 1 only on a correctness failure (overspend, a
server error, a retry answered with another release); a missed speed target still exits 0.

Bounded in count and time: the clients stop at the deadline, the server is stopped at the end, and
every request goes to 127.0.0.1.

    python benchmarks/service_load.py                       # 16 analysts, 60 s
    python benchmarks/service_load.py --clients 8 --duration 10 --total-epsilon 6
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import numpy as np
import pandas as pd

from dpsense.core.privacy_loss import ApproxDP, PrivacyLoss, PureDP
from dpsense.ledger import ChargeState, Ledger, Scope

PG_URL = os.environ.get("DPSENSE_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
SPENT = {ChargeState.RESERVED, ChargeState.COMMITTED, ChargeState.FAILED, ChargeState.ABANDONED}
#: Each release's ε in thousandths (distinct values make distinct, charged queries).
EPSILON_MILLI = (10, 50)
GOAL_RPS = 10.0
GOAL_P99_MS = 2000.0
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
    parser.add_argument("--workers", type=int, default=4, help="the service's worker threads")
    parser.add_argument("--min-latency", type=float, default=0.25, help="the service's release latency floor")
    parser.add_argument("--latency-quantum", type=float, default=0.25, help="the service's latency rounding")
    parser.add_argument("--analyst-epsilon", type=float, default=4.0, help="each analyst's sub-budget")
    parser.add_argument("--total-epsilon", type=float, default=24.0, help="the dataset's total budget")
    parser.add_argument("--persons", type=int, default=5000, help="privacy units in the synthetic data")
    parser.add_argument("--goal-rps", type=float, default=GOAL_RPS)
    parser.add_argument("--goal-p99-ms", type=float, default=GOAL_P99_MS)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON here")
    return parser.parse_args()


def _fresh_schema() -> tuple[str, str]:
    import psycopg

    schema = f"dpsense_load_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return schema, f"{PG_URL}?options={quote(f'-csearch_path={schema}')}"


def _drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


def _start(args: argparse.Namespace, ledger_url: str, data_dir: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    command = [
        sys.executable, "-m", "dpsense.service", "serve", "--ledger", ledger_url, "--data-dir", str(data_dir),
        "--host", "127.0.0.1", "--port", str(port), "--workers", str(args.workers),
        "--min-latency", str(args.min_latency), "--latency-quantum", str(args.latency_quantum),
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


def _client(url: str, token: str, analyst: str, deadline: float, warmup: int, seed: int, stats: Stats) -> None:
    rng = random.Random(seed)
    headers = {"Authorization": f"Bearer {token}"}
    last: tuple[dict[str, Any], str, int] | None = None
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        for _ in range(warmup):  # attach the dataset on the workers; not measured
            client.post("/v1/preview", json=_query(rng, analyst))
        while time.monotonic() < deadline:
            retry = last is not None and rng.random() < 0.15
            body, key = (last[0], last[1]) if retry and last is not None else (_query(rng, analyst), uuid.uuid4().hex)
            start = time.perf_counter()
            response = client.post("/v1/releases", json=body, headers={"Idempotency-Key": key})
            stats.latencies.append(time.perf_counter() - start)
            stats.statuses[response.status_code] = stats.statuses.get(response.status_code, 0) + 1
            if response.status_code != 200:
                continue
            doc = response.json()
            if doc["charged"] is not None:
                stats.charged += 1
                stats.last_charge = time.monotonic()
            stats.cached += bool(doc["cached"])
            if retry and last is not None and doc["release_id"] != last[2]:
                stats.retry_mismatches += 1
            last = (body, key, doc["release_id"])


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
    schema, ledger_url = (None, args.ledger) if args.ledger else _fresh_schema()
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
    process, url = _start(args, ledger_url, data_dir, root / "server.log")
    try:
        _setup(url, steward, analysts, args)
        stats = [Stats() for _ in analysts]
        deadline = time.monotonic() + args.duration
        threads = [
            threading.Thread(target=_client, args=(url, tokens[a], a, deadline, 2, i, stats[i]))
            for i, a in enumerate(analysts)
        ]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=args.duration + 120)
        elapsed = time.monotonic() - started
        charging = max([s.last_charge for s in stats if s.charged] or [started + elapsed]) - started
        excess, problems = _overspend(ledger_url, analysts)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        if schema is not None:
            _drop_schema(schema)
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
    figures = {
        "clients": args.clients,
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
    }
    print(f"service load: {args.clients} analysts for {elapsed:.1f} s, {len(latencies)} release requests")
    print(f"  statuses {figures['statuses']}  charged {charged}  answered from the store {figures['answers_cached']}")
    print(
        f"  releases/s (charged, over the {charging:.1f} s until the last charge) {figures['releases_per_s']:.1f}"
        f"   answers/s (all 200, whole run) {figures['answers_per_s']:.1f}"
    )
    print(f"  latency p50 {p50:.0f} ms  p99 {p99:.0f} ms (release floor {args.min_latency * 1000:.0f} ms)")
    print(f"  overspend ε {float(excess):g}; ledger problems: {problems or 'none'}")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=1), encoding="utf-8")
    print(f"TARGET releases_per_s {figures['releases_per_s']:.1f} >= {args.goal_rps:g}")
    print(f"TARGET p99_latency_ms {p99:.0f} <= {args.goal_p99_ms:g}")
    print(f"TARGET overspend_epsilon {float(excess):g} <= 0")
    print(f"TARGET server_errors {server_errors} <= 0")
    print(f"TARGET retry_mismatches {mismatches} <= 0")
    return 1 if excess or problems or server_errors or mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
