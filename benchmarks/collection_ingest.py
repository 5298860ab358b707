"""Ingest throughput of local-DP reports through the HTTP service, then the estimate over all of them.

This script is the client process. It starts the service (``python -m dpsense.service serve``,
``--processes`` processes of ``--workers`` worker threads) on 127.0.0.1 over a PostgreSQL ledger (a
throw-away schema in ``DPSENSE_BENCH_PG_URL`` = postgresql://postgres@127.0.0.1:5432/test), registers a
collection through the steward's route (Apple's Count Mean Sketch: ``--hashes`` hash functions into
``--buckets`` buckets, ε = 2 per report) and gives ``--clients`` collectors a token each. Each collector
then sends batches of ``--batch`` reports for ``--duration`` seconds, one batch at a time on its own
keep-alive connection, each report from a distinct device id (so every per-client budget check is a
new row). The reports are made before the clock starts, with the shape a device sends (a uniform hash
index and the bits of a randomized one-hot vector drawn as a device would at this ε: each bit set with
probability 1/(1 + e^(ε/2)) but the true bucket's, set with e^(ε/2)/(1 + e^(ε/2))); what is timed is the service's work:
parsing and checking every report, the per-client budget upsert, the batch's summary, the audit entry.

Afterwards one estimate over everything stored is timed (the analyst's route: read and add the batch
summaries, decode the dictionary), and the ledger is checked: the accepted reports equal the
collection's tally. Prints reports/s, batches/s, p50/p99 batch latency, the service's CPU per 1 000
reports and the load average, and ends with TARGET lines (``TARGET <name> <measured> <op> <goal>``; the
goal is issue 19's 5 000 reports/s). Exits 1 only on a correctness failure (a server error, a tally
that differs); a missed speed target still exits 0.

    python benchmarks/collection_ingest.py                      # 16 collectors, 500-report batches, 30 s
    python benchmarks/collection_ingest.py --duration 10 --batch 1000
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from _service import cpu_seconds, drop_schema, fresh_schema, start_service
from dpsense.device import CmsScheme
from dpsense.device.hashing import encode_bits
from dpsense.ledger import Ledger

GOAL_REPORTS_PER_S = 5000.0
EPSILON = 2.0
WORDS = [f"word{i}" for i in range(200)]


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=16, help="concurrent collectors")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load")
    parser.add_argument("--batch", type=int, default=500, help="reports per batch")
    parser.add_argument("--hashes", type=int, default=16, help="the sketch's hash functions")
    parser.add_argument("--buckets", type=int, default=256, help="the sketch's buckets per hash")
    parser.add_argument("--processes", type=int, default=2, help="the service's processes")
    parser.add_argument("--workers", type=int, default=3, help="the service's worker threads per process")
    return parser.parse_args()


def _bits(count: int, probability: float) -> list[bool]:
    """``count`` bits, each set with ``probability`` (benchmark data from os.urandom, not product noise)."""
    raw = os.urandom(4 * count)
    return [int.from_bytes(raw[4 * i : 4 * i + 4], "little") < probability * 2**32 for i in range(count)]


def _reports(args: argparse.Namespace, count: int, prefix: str) -> list[dict[str, Any]]:
    flip = 1.0 / (1.0 + math.exp(EPSILON / 2))
    out = []
    for i in range(count):
        hash_index = int.from_bytes(os.urandom(2), "little") % args.hashes
        bits = _bits(args.buckets, flip)
        bits[int.from_bytes(os.urandom(2), "little") % args.buckets] = _bits(1, 1 - flip)[0]
        out.append({"client_id": f"{prefix}-{i}", "report": {"hash": hash_index, "bits": encode_bits(bits)}})
    return out


async def _collector(
    url: str, token: str, batches: list[list[dict[str, Any]]], deadline: float, seen: dict[str, Any]
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
        for i, reports in enumerate(batches):
            if time.monotonic() >= deadline:
                return
            start = time.monotonic()
            response = await client.post(
                "/v1/collections/words/reports", json={"batch_id": f"b{i}", "reports": reports}
            )
            seen["latencies"].append(time.monotonic() - start)
            if response.status_code != 200:
                seen["errors"].append(f"{response.status_code} {response.text[:300]}")
                return
            seen["accepted"] += response.json()["accepted"]
            seen["batches"] += 1


def main() -> int:
    args = _args()
    scheme = CmsScheme(num_hashes=args.hashes, num_buckets=args.buckets, epsilon=str(EPSILON))
    per_client = math.ceil(args.duration * 2 * GOAL_REPORTS_PER_S / args.clients / args.batch) + 1
    print(f"making {args.clients} x {per_client} batches of {args.batch} reports ...", flush=True)
    plans = [[_reports(args, args.batch, f"c{c}b{b}") for b in range(per_client)] for c in range(args.clients)]
    schema, ledger_url = fresh_schema("dpsense_ingest")
    root = Path(tempfile.mkdtemp(prefix="dpsense-ingest-"))
    (root / "data").mkdir()
    try:
        with Ledger.open(ledger_url) as ledger:
            ledger.add_analyst("steward")
            ledger.add_analyst("alice")
            steward = ledger.create_token("steward", role="steward")
            analyst = ledger.create_token("alice")
            tokens = []
            for c in range(args.clients):
                ledger.add_analyst(f"relay{c}")
                tokens.append(ledger.create_token(f"relay{c}", role="collector"))
        process, url = start_service(
            ledger_url, root / "data", root / "server.log", workers=args.workers, processes=args.processes
        )
        try:
            body = {"name": "words", "scheme": scheme.to_json(), "dictionary": WORDS, "max_reports_per_client": 10}
            made = httpx.post(url + "/v1/collections", json=body, headers={"Authorization": f"Bearer {steward}"})
            made.raise_for_status()
            seen: dict[str, Any] = {"latencies": [], "errors": [], "accepted": 0, "batches": 0}
            load_before = os.getloadavg()[0]
            cpu_before = cpu_seconds({process.pid})
            start = time.monotonic()
            deadline = start + args.duration

            async def run() -> None:
                await asyncio.gather(
                    *(_collector(url, t, p, deadline, seen) for t, p in zip(tokens, plans, strict=True))
                )

            asyncio.run(run())
            elapsed = time.monotonic() - start
            cpu = cpu_seconds({process.pid}) - cpu_before
            load_after = os.getloadavg()[0]
            headers = {"Authorization": f"Bearer {analyst}"}
            t0 = time.monotonic()
            estimate = httpx.post(url + "/v1/collections/words/estimates", json={}, headers=headers, timeout=600)
            estimate_s = time.monotonic() - t0
            status = httpx.get(url + "/v1/collections/words", headers=headers).json()
        finally:
            process.terminate()
            process.wait(30)
    finally:
        drop_schema(schema)
    latencies = sorted(seen["latencies"])
    p50 = latencies[len(latencies) // 2] * 1000 if latencies else float("nan")
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000 if latencies else float("nan")
    rate = seen["accepted"] / elapsed
    print(
        f"{args.clients} collectors x batches of {args.batch} for {elapsed:.1f} s ({args.processes} processes x"
        f" {args.workers} workers): {seen['accepted']} reports in {seen['batches']} batches"
    )
    print(
        f"reports/s {rate:.0f}; batches/s {seen['batches'] / elapsed:.1f};"
        f" batch latency p50 {p50:.0f} ms, p99 {p99:.0f} ms"
    )
    print(f"service CPU {cpu:.1f} s = {1000 * cpu / max(1, seen['accepted']):.2f} s per 1 000 reports")
    print(
        f"estimate over {status['reports']} reports in {status['batches']} batches:"
        f" {estimate_s:.2f} s (HTTP {estimate.status_code})"
    )
    print(f"load average at start {load_before:.2f}, at end {load_after:.2f}")
    failed = bool(seen["errors"]) or estimate.status_code != 200 or status["reports"] != seen["accepted"]
    for error in seen["errors"][:5]:
        print("ERROR", error)
    print(f"TARGET ingest_reports_per_s {rate:.0f} >= {GOAL_REPORTS_PER_S:.0f}")
    print(f"TARGET ingest_batch_p99_ms {p99:.0f} <= 1000")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
