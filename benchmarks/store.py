"""The steward's and the analyst's day at 10^7 rows: register once, then attach, release and filter fast.

Data (made in DuckDB from hashes of the row number, so every run sees the same table, written to a
Parquet file in a temporary directory): N rows of health events, ``person`` (about N / 5 persons,
so a person's row count is about Poisson(5)), ``region`` (4 public keys), ``age`` in [0, 120] and
``hours`` in [0, 24]; at most C = 10 rows per person count (about 3 % of the rows belong to
persons with more).

Each figure is compared with the same work done by plain DuckDB on the same file in the same run
(the baseline runs alternate with the runs they are compared to):

- **registration** (``Session.register_dataset``: checks, fingerprint, index, the stored snapshot)
  against one plain pass that computes the same keyed fingerprint and unit index with the same SQL
  (``CREATE TABLE`` from the Parquet file, the fingerprint query, the index query) — once each;
- **attach**: ``session.dataset(name)`` in a new Session, with the store (this page's subject) and
  without it (``store=False``: the source is read, fingerprinted and indexed again, as before);
- **CLI release**: ``dpsense sql "SELECT region, COUNT(*), AVG(hours) ..." --epsilon E`` as a new
  process each time (a new ε, so never a stored answer), against a new process running the same
  SELECT on the Parquet file with DuckDB's Python client;
- **cached CLI answer**: the same command with the same ``--request-id``: the stored release;
- **filtered release**: ``Session.release`` of ``filter("age", ">=", 65)`` grouped by region, count
  and mean of hours, against the same filtered ``GROUP BY`` on the Parquet file, in-process.

    python benchmarks/store.py              # 10^7 rows, best of 3
    python benchmarks/store.py --rows 1e6   # smaller

Ends with TARGET lines (``registration_vs_plain_scan``, ``cli_release_vs_duckdb``,
``cached_cli_seconds``, ``filtered_release_vs_groupby``) and exits 0 even when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

import dpsense as dp
from _timing import best_of, label, peak_rss_mib
from dpsense.engine import ColumnInfo
from dpsense.engine.sql import _index_query, _query, _steward_query
from dpsense.noise.entropy import random_bytes
from dpsense.statistics._steps import bounded_sum

MAX_ROWS_PER_UNIT = 10
REGIONS = ["north", "south", "east", "west"]
POLICY = {
    "protected": "a person and all their events",
    "population": 10_000_000,
    "planned_releases": 1000,
    "release_window": "2026-12-01/2027-11-30",
    "delta_rationale": "δ = 1e-9, well below 1/(10 x population)",
    "per_release_epsilon": 10,
    "attacker_knowledge": "all but one person's rows",
    "minimum_useful_accuracy": "counts within ±100",
    "approved_by": "benchmark steward",
    "approved_on": "2026-12-02",
    "next_review": "2027-06-02",
}
BIN = Path(sys.executable).parent


def make_events(path: Path, rows: int) -> None:
    """The Parquet file ``events(person BIGINT, region VARCHAR, age INTEGER, hours DOUBLE)``."""
    con = duckdb.connect()
    con.execute(
        "COPY (SELECT CAST(hash(range, 'person') % $persons AS BIGINT) AS person, "
        "(['north', 'south', 'east', 'west'])[1 + CAST(hash(range, 'region') % 4 AS INTEGER)] AS region, "
        "CAST(hash(range, 'age') % 121 AS INTEGER) AS age, "
        "CAST(hash(range, 'hours') % 2401 AS DOUBLE) / 100.0 AS hours FROM range($rows)) "
        f"TO '{path}' (FORMAT parquet)",
        {"persons": max(1, rows // 5), "rows": rows},
    )
    con.close()


def plain_registration(path: Path) -> float:
    """One plain pass computing the same fingerprint and unit index (with the stored grid units)."""
    con = duckdb.connect()
    start = time.perf_counter()
    con.execute(f"CREATE TEMP TABLE src AS SELECT * FROM read_parquet('{path}')")
    columns = tuple(ColumnInfo(str(r[0]), str(r[1]), _kind(str(r[1]))) for r in con.execute("DESCRIBE src").fetchall())
    key = random_bytes(32)
    con.execute(
        _steward_query.fingerprint_query("src", columns), {"key": _steward_query.fingerprint_row_key(key)}
    ).fetchall()
    params: dict[str, object] = dict(_query.derived_keys(key, "index", _index_query.INDEX_KEYS))
    extra = []
    for i, (column, high, kind) in enumerate([("age", 120, "integer"), ("hours", 24, "float")]):
        expr, p = _query.stored_grid_units(bounded_sum(column, 0, high), kind, f"q{i}")
        params.update(p)
        extra.append(f"{expr} AS __dps_q{i}")
    sql = _index_query.unit_index_query("src", [c.name for c in columns], unit_column="person", extra=extra)
    con.execute(f"CREATE TEMP TABLE idx AS {sql}", params)
    con.execute(f"CREATE TEMP TABLE stored AS {_index_query.position_order_query('idx', 'person')}")
    seconds = time.perf_counter() - start
    con.close()
    return seconds


def _kind(sql_type: str) -> str:
    if sql_type in ("BIGINT", "INTEGER"):
        return "integer"
    if sql_type == "DOUBLE":
        return "float"
    return "string"


def register(url: str, path: Path) -> float:
    with dp.Session.open(url, analyst="steward", role="steward") as steward:
        start = time.perf_counter()
        steward.register_dataset(
            "events",
            source=path,
            privacy_unit="person",
            bounds={"age": (0, 120), "hours": (0, 24)},
            keys={"region": REGIONS},
            max_rows_per_unit=MAX_ROWS_PER_UNIT,
            budget=dp.Budget(epsilon=10**6, delta=1e-9),
            policy=dp.PrivacyPolicy(**POLICY),  # type: ignore[arg-type]
        )
        seconds = time.perf_counter() - start
        steward.add_analyst("alice")
        return seconds


def attach(url: str, *, store: bool) -> float:
    start = time.perf_counter()
    with dp.Session.open(url, analyst="alice", store=store) as session:
        session.dataset("events")
        return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=float, default=1e7)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows, repeats = int(args.rows), args.repeats
    with tempfile.TemporaryDirectory(prefix="dpsense-store-") as tmp:
        workdir = Path(tmp)
        path = workdir / "events.parquet"
        make_events(path, rows)
        url = f"sqlite:///{workdir / 'ledger.db'}"
        # Installed packages carry their compiled bytecode; a machine that forbids writing it (as this one's
        # PYTHONDONTWRITEBYTECODE=1 does) would make every process compile dpsense's sources again.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"DPSENSE_LEDGER": url, "DPSENSE_ANALYST": "alice"}
        baseline_register = plain_registration(path)
        registration = register(url, path)
        store_files = sorted((workdir / "ledger.db.store").glob("*.duckdb"))
        store_mib = sum(f.stat().st_size for f in store_files) / 2**20
        attach_store, attach_source = best_of(1, lambda: attach(url, store=True), lambda: attach(url, store=False))

        calls = iter(range(1, 10**6))
        sql = "SELECT region, COUNT(*), AVG(hours) FROM events GROUP BY region"
        plain_sql = f"SELECT region, count(*), avg(hours) FROM read_parquet('{path}') GROUP BY region"

        def cli_release() -> None:
            epsilon = f"{0.5 + next(calls) * 1e-6:.6f}"
            subprocess.run([str(BIN / "dpsense"), "sql", sql, "--epsilon", epsilon], env=env, check=True,
                           capture_output=True)  # fmt: skip

        def cli_plain() -> None:
            code = f"import duckdb; duckdb.connect().execute({plain_sql!r}).fetchall()"
            subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)

        def cli_cached() -> None:
            subprocess.run(
                [str(BIN / "dpsense"), "sql", sql, "--epsilon", "0.25", "--request-id", "the-same-question"],
                env=env, check=True, capture_output=True,
            )  # fmt: skip

        plain_cli, release_cli, cached_cli = best_of(repeats, cli_plain, cli_release, cli_cached)

        con = duckdb.connect()
        filtered_sql = (
            f"SELECT region, count(*), avg(hours) FROM read_parquet('{path}') WHERE age >= 65 GROUP BY region"
        )
        with dp.Session.open(url, analyst="alice") as session:
            events = session.dataset("events")

            def filtered_release() -> None:
                query = events.query().filter("age", ">=", 65).group_by("region").agg(n=dp.count(), h=dp.mean("hours"))
                assert not session.release(query, epsilon=0.5 + next(calls) * 1e-6).cached

            plain_filtered, released_filtered = best_of(
                repeats, lambda: con.execute(filtered_sql).fetchall(), filtered_release
            )
        con.close()

    load = os.getloadavg()[0]
    print(f"rows {label(rows)}, <= {MAX_ROWS_PER_UNIT} rows per person, best of {repeats}, load {load:.2f}")
    print(f"registration (once):        {registration:8.2f} s   plain fingerprint + index {baseline_register:.2f} s"
          f"   ratio {registration / baseline_register:.2f}x   stored file {store_mib:.0f} MiB")  # fmt: skip
    print(f"attach, from the store:     {attach_store:8.3f} s")
    print(f"attach, from the source:    {attach_source:8.2f} s   (store=False: read, fingerprint, index again)")
    print(f"CLI release (new process):  {release_cli:8.3f} s   plain DuckDB process {plain_cli:.3f} s"
          f"   ratio {release_cli / plain_cli:.2f}x")  # fmt: skip
    print(f"cached CLI answer:          {cached_cli:8.3f} s")
    print(f"filtered release (Python):  {released_filtered:8.3f} s   plain filtered group-by {plain_filtered:.3f} s"
          f"   ratio {released_filtered / plain_filtered:.2f}x")  # fmt: skip
    print(f"peak RSS {peak_rss_mib():.0f} MiB")
    suffix = "" if rows == 10**7 else f"_{label(rows)}"
    print(f"TARGET registration_vs_plain_scan{suffix} {registration / baseline_register:.2f} <= 3.0")
    print(f"TARGET cli_release_vs_duckdb{suffix} {release_cli / plain_cli:.2f} <= 3.0")
    print(f"TARGET cached_cli_seconds{suffix} {cached_cli:.3f} <= 1.0")
    print(f"TARGET filtered_release_vs_groupby{suffix} {released_filtered / plain_filtered:.2f} <= 3.0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
