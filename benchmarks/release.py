"""Release speed: the engine steps of a grouped DP release against the plain non-private group-by.

Data (made in DuckDB from hashes of the row number, so every run sees the same table): N rows,
about 10^6 privacy units, 1,000 public groups and a float value in [0, 100). The baseline is
``SELECT g, count(*), sum(x) FROM events GROUP BY g`` on the same connection and table. The
release is ``run_engine_release``: ``bounded_rows`` (at most 5 rows per unit, a fresh salt per run)
then ``group_aggregates`` (count of rows and an exact clipped sum over the 1,000 public keys), then
``drop``; noise and accounting are not included (they run on 1,000 numbers). For scale, the table
also shows ``per-unit``: a bare ``GROUP BY unit`` count, the least work any per-unit contribution
bound must do. Each measurement has one warm-up run, then the best of 3. Peak RSS is the process
maximum so far (DuckDB runs in-process).

    python benchmarks/release.py                # 10^6 and 10^7 rows
    python benchmarks/release.py --rows 1e6     # other sizes
    python benchmarks/release.py --quick        # 10^5 and 10^6 rows, best of 1

Ends with one TARGET line per size and exits 0 even when a target is missed.
"""

from __future__ import annotations

import argparse
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass

import duckdb

from dpsense.engine import DuckDBEngine, GroupRow, clipped_sum, count_rows
from dpsense.noise.entropy import random_bytes

TARGET_RATIO = 3.0
GROUPS = 1000


@dataclass(frozen=True)
class Workload:
    """What one grouped release asks of the engine."""

    table: str
    unit_column: str
    group_column: str
    value_column: str
    keys: list[int]
    max_rows_per_unit: int = 5
    low: float = 0.0
    high: float = 100.0
    grid_exponent: int = -20


def run_engine_release(engine: DuckDBEngine, work: Workload) -> tuple[list[GroupRow], dict[str, float]]:
    """The engine steps of one grouped release, and the seconds each took (swap in Session.release later)."""
    steps: dict[str, float] = {}
    start = time.perf_counter()
    view = engine.bounded_rows(
        work.table,
        unit_column=work.unit_column,
        max_rows_per_unit=work.max_rows_per_unit,
        salt=random_bytes(32),
        group_column=work.group_column,
    )
    steps["bounded_rows"] = time.perf_counter() - start
    try:
        start = time.perf_counter()
        aggregates = [
            count_rows(),
            clipped_sum(work.value_column, low=work.low, high=work.high, grid_exponent=work.grid_exponent),
        ]
        rows = engine.group_aggregates(view, group_column=work.group_column, keys=work.keys, aggregates=aggregates)
        steps["group_aggregates"] = time.perf_counter() - start
    finally:
        engine.drop(view)
    return rows, steps


def make_events(con: duckdb.DuckDBPyConnection, rows: int, units: int) -> None:
    """The synthetic table ``events(unit BIGINT, g INTEGER, x DOUBLE)``, deterministic in ``rows``."""
    con.execute("DROP TABLE IF EXISTS events")
    con.execute(
        "CREATE TABLE events AS SELECT CAST(hash(range, 'unit') % $units AS BIGINT) AS unit, "
        "CAST(hash(range, 'group') % $groups AS INTEGER) AS g, "
        "CAST(hash(range, 'value') % 1000000 AS DOUBLE) / 10000.0 AS x FROM range($rows)",
        {"units": units, "groups": GROUPS, "rows": rows},
    )


def best_of(repeats: int, run: Callable[[], object]) -> float:
    run()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def label(rows: int) -> str:
    exponent = len(str(rows)) - 1
    return f"1e{exponent}" if rows == 10**exponent else str(rows)


def measure(rows: int, units: int, repeats: int) -> dict[str, float]:
    con = duckdb.connect()
    make_events(con, rows, units)
    work = Workload("events", "unit", "g", "x", list(range(GROUPS)))
    plain_sql = "SELECT g, count(*), sum(x) FROM events GROUP BY g"
    plain = best_of(repeats, lambda: con.execute(plain_sql).fetchall())
    per_unit_sql = "SELECT max(n) FROM (SELECT unit, count(*) AS n FROM events GROUP BY unit)"
    per_unit = best_of(repeats, lambda: con.execute(per_unit_sql).fetchall())
    steps: dict[str, float] = {}
    with DuckDBEngine(connection=con) as engine:
        engine.register(work.table, "events")

        def release() -> None:
            got, timings = run_engine_release(engine, work)
            assert len(got) == GROUPS
            for name, seconds in timings.items():
                steps[name] = min(steps.get(name, float("inf")), seconds)

        total = best_of(repeats, release)
    con.close()
    return {
        "plain": plain,
        "per_unit": per_unit,
        "release": total,
        **steps,
        "ratio": total / plain,
        "rss": peak_rss_mib(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", nargs="+", type=float, help="table sizes, e.g. --rows 1e6 1e7")
    parser.add_argument("--units", type=float, default=1e6, help="privacy units (default 1e6)")
    parser.add_argument("--quick", action="store_true", help="10^5 and 10^6 rows, best of 1")
    args = parser.parse_args()
    sizes = [int(r) for r in args.rows] if args.rows else ([10**5, 10**6] if args.quick else [10**6, 10**7])
    repeats = 1 if args.quick else 3
    units = int(args.units)
    print(f"grouped release: <= 5 rows per unit, {GROUPS} public groups, ~{units:,} units; best of {repeats}, warm")
    columns = [
        ("rows", 6),
        ("group-by", 10),
        ("per-unit", 10),
        ("bounded_rows", 13),
        ("aggregates", 11),
        ("release", 10),
    ]
    print(" ".join(f"{name:>{width}}" for name, width in [*columns, ("ratio", 7), ("peak RSS", 10)]))
    results = {}
    for rows in sizes:
        r = measure(rows, units, repeats)
        results[rows] = r
        print(
            f"{label(rows):>6} {r['plain'] * 1e3:8.1f}ms {r['per_unit'] * 1e3:8.1f}ms "
            f"{r['bounded_rows'] * 1e3:11.1f}ms {r['group_aggregates'] * 1e3:9.1f}ms {r['release'] * 1e3:8.1f}ms "
            f"{r['ratio']:6.1f}x {r['rss']:7.0f}MiB"
        )
    for rows, r in results.items():
        print(f"TARGET release_vs_groupby_{label(rows)} {r['ratio']:.2f} <= {TARGET_RATIO}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
