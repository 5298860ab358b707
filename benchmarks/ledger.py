"""Ledger throughput: committed debits per second with 1, 4 and 16 client processes.

A committed debit is one ``reserve`` (atomic check-and-debit) followed by one ``commit`` (release
stored), each its own durable transaction. Every configuration gets a fresh dataset whose cap
admits exactly ``TARGET_DEBITS`` debits of ε = 0.01 while the clients attempt 20 % more, so the
refusal path runs too; overspend is (spent - cap) if positive, and must be 0.

SQLite uses a file in a temporary directory; PostgreSQL uses ``DPSENSE_BENCH_PG_URL`` (default
postgresql://postgres@127.0.0.1:5432/test) in a throw-away schema. Ends with TARGET lines; exits 0.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import secrets
import tempfile
import time
from fractions import Fraction
from urllib.parse import quote

from dpsense.core import ApproxDP, PureDP
from dpsense.core.errors import BudgetExhausted
from dpsense.ledger import Ledger, ReleaseRecord

TARGET_DEBITS = 1500
CLIENTS = (1, 4, 16)
RECORD = ReleaseRecord(0.5, "laplace", "1", {}, "person_id", "add_remove", "bench")
PG_URL = os.environ.get("DPSENSE_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _client(url: str, dataset: str, worker: int, attempts: int) -> tuple[int, float, float]:
    ok = 0
    with Ledger.open(url) as ledger:
        start = time.perf_counter()
        for i in range(attempts):
            try:
                res = ledger.reserve(
                    dataset=dataset, analyst=f"c{worker}", request_id=f"{dataset}-{i}", loss=PureDP(0.01)
                )
            except BudgetExhausted:
                continue
            ledger.commit(res, RECORD)
            ok += 1
        end = time.perf_counter()
    return ok, start, end


def run(url: str, clients: int, tag: str) -> tuple[float, Fraction]:
    dataset = f"{tag}_{clients}"
    with Ledger.open(url) as ledger:
        for w in range(clients):
            ledger.add_analyst(f"c{w}")
        cap = Fraction(TARGET_DEBITS, 100)
        ledger.register_dataset(dataset, budget=PureDP(cap))
    attempts = -(-TARGET_DEBITS * 6 // 5 // clients)
    with mp.get_context("fork").Pool(clients) as pool:
        results = pool.starmap(_client, [(url, dataset, w, attempts) for w in range(clients)])
    committed = sum(r[0] for r in results)
    elapsed = max(r[2] for r in results) - min(r[1] for r in results)
    with Ledger.open(url) as ledger:
        spent = ledger.budget(dataset).spent
        assert isinstance(spent, ApproxDP)
        overspend = max(Fraction(0), spent.epsilon - cap)
        assert committed == TARGET_DEBITS and len(ledger.releases(dataset)) == committed and ledger.verify().ok
    return committed / elapsed, overspend


def _pg_schema() -> tuple[str, str] | None:
    try:
        import psycopg

        schema = f"dpsense_bench_{secrets.token_hex(4)}"
        with psycopg.connect(PG_URL, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        return schema, f"{PG_URL}?options={quote(f'-csearch_path={schema}')}"
    except Exception as exc:
        print(f"PostgreSQL unavailable ({exc.__class__.__name__}); skipping it")
        return None


def main() -> int:
    rates: dict[tuple[str, int], float] = {}
    overspend = Fraction(0)
    with tempfile.TemporaryDirectory() as tmp:
        backends = [("sqlite", f"sqlite:///{tmp}/ledger.db")]
        pg = _pg_schema()
        if pg:
            backends.append(("postgresql", pg[1]))
        try:
            for name, url in backends:
                for clients in CLIENTS:
                    rate, over = run(url, clients, name)
                    rates[(name, clients)] = rate
                    overspend = max(overspend, over)
                    print(f"{name:10s} clients={clients:2d}  {rate:8.0f} committed debits/s  overspend={over}")
        finally:
            if pg:
                import psycopg

                with psycopg.connect(PG_URL, autocommit=True) as conn:
                    conn.execute(f"DROP SCHEMA IF EXISTS {pg[0]} CASCADE")
    if ("postgresql", 16) in rates:
        print(f"TARGET ledger_pg_debits_per_s_16 {rates[('postgresql', 16)]:.0f} >= 500")
    print(f"TARGET ledger_sqlite_debits_per_s_16 {rates[('sqlite', 16)]:.0f} >= 200")
    print(f"TARGET ledger_overspend {float(overspend):g} <= 0")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
