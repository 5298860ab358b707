"""Release speed: a grouped DP release through the Session, against the plain non-private group-by.

Data (made in DuckDB from hashes of the row number, so every run sees the same table, written to a
Parquet file in a temporary directory): N rows, about 10^6 privacy units, 1,000 public groups and a
float value in [0, 100). The baseline is ``SELECT g, count(*), sum(x) FROM events GROUP BY g`` in
DuckDB on a native table holding the same rows.

Session table (the target): ``dpsense.Session`` over a SQLite ledger in the temporary directory
registers the Parquet file (privacy unit, bounds [0, 100] on ``x``, the 1,000 keys of ``g``, at most
5 rows per unit, a complete privacy policy, a large budget), then each timed release is
``session.release(dataset.query().group_by("g").agg(n=dp.count(), s=dp.sum("x")), epsilon=...)``
with a new ε every time (the cache key holds ε, so no release is answered from the store). The time
is the whole release: planning, ledger reserve and commit, the engine steps, noise, the record.
Registration (data checks, fingerprint, policies, the unit index) is a one-time steward cost shown
apart and not in the ratio; ``engine`` is the part of a release spent in engine calls (the rest is
planning, the ledger and noise).

Engine table (for scale): the engine steps alone on an indexed copy. ``index`` is ``index_units``
(once, storing the clipped sum's grid units as the Session's registration does); ``1 pass`` is
``bounded_rows`` then one ``group_aggregates`` holding the count and the
clipped sum (what the Session asks for); ``2 passes`` asks for them in two calls. ``per-unit``
is a bare ``GROUP BY unit`` count, the least any per-release per-unit aggregation must do.

Two more releases per size, each against its own plain DuckDB query in the same run: **filtered**,
the same release with ``filter("x", ">", 10)`` against the same ``WHERE x > 10`` GROUP BY; and the
**grouped median** (``dp.median("x")`` per group, the default mechanism) against DuckDB's exact
``SELECT g, median(x) ... GROUP BY g``.

**Memory**: a child process registers the same Parquet file and runs the three releases, with the
engine's ``memory_limit`` (DuckDB's buffer pool, which holds the stored snapshot, its index and every
sort) set to 1.5 times the raw column bytes (38 MiB at least) (rows x 20 bytes: ``unit`` BIGINT, ``g`` INTEGER, ``x``
DOUBLE), leaving half the raw bytes for the arrays dpsense collects (the grouped median's column and
groups, and their conversion); it reports its peak RSS minus its RSS after the imports and the
Session's opening (the fixed overhead, stated beside it): the TARGET; and each step's own peak (registration,
the three releases; the high-water mark is cleared before each). Two more children run with the
limit at twice the raw bytes (DuckDB then fills it, and the collected arrays come on top) and without
a limit (DuckDB's default, 80 % of the machine's memory), for comparison.

Each measurement has one warm-up run, then the best of 5 (of 1 with ``--quick``); the baseline runs
alternate with the runs they are compared to, so a busy machine slows both alike.

    python benchmarks/release.py                # 10^5 and 10^7 rows
    python benchmarks/release.py --rows 1e6     # other sizes
    python benchmarks/release.py --quick        # 10^5 and 10^6 rows, best of 1

Ends with TARGET lines (issue 18): ``release_vs_groupby_1e7 <= 1.3``, ``filtered_vs_filtered_groupby_1e7
<= 2``, ``grouped_median_vs_duckdb_median_1e7 <= 3``, ``release_vs_groupby_1e5 <= 5`` and
``peak_rss_over_raw_1e7 <= 2`` (each when that size was measured), then informative ``INFO`` lines;
exits 0 even when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dpsense as dp
from _timing import TimedEngine, best_of, current_rss_mib, high_water_rss_mib, label
from dpsense.engine import DuckDBEngine, clipped_sum, count_rows
from dpsense.noise.entropy import random_bytes

TARGET_ROWS = 10**7
GROUPS = 1000
MAX_ROWS_PER_UNIT = 5
GRID_EXPONENT = -34  # the executor's grid for bounds [0, 100]: 2**(6 - 40)
POLICY = {
    "protected": "a person and all their events",
    "population": 1_000_000,
    "planned_releases": 1000,
    "release_window": "2026-12-01/2027-11-30",
    "delta_rationale": "δ = 1e-8, well below 1/(10 x population)",
    "per_release_epsilon": 10,
    "attacker_knowledge": "all but one person's rows",
    "minimum_useful_accuracy": "counts within ±100",
    "approved_by": "benchmark steward",
    "approved_on": "2026-11-29",
    "next_review": "2027-05-29",
}


def make_events(con: duckdb.DuckDBPyConnection, rows: int, units: int) -> None:
    """The synthetic table ``events(unit BIGINT, g INTEGER, x DOUBLE)``, deterministic in ``rows``."""
    con.execute("DROP TABLE IF EXISTS events")
    con.execute(
        "CREATE TABLE events AS SELECT CAST(hash(range, 'unit') % $units AS BIGINT) AS unit, "
        "CAST(hash(range, 'group') % $groups AS INTEGER) AS g, "
        "CAST(hash(range, 'value') % 1000000 AS DOUBLE) / 10000.0 AS x FROM range($rows)",
        {"units": units, "groups": GROUPS, "rows": rows},
    )


def index_if_needed(engine: DuckDBEngine, table: str, unit: str) -> None:
    """Index the registered snapshot unless ``register_dataset`` already did (it will, in _datasets.register)."""
    if engine._indexes.get(table) != unit:
        engine.index_units(table, unit_column=unit, key=random_bytes(32))


@dataclass
class SessionResult:
    register: float
    plain: float
    release: float
    engine: float
    filtered_plain: float = float("nan")
    filtered: float = float("nan")
    median_plain: float = float("nan")
    median: float = float("nan")


#: The plain DuckDB queries the releases are compared with (the same data in a native table).
PLAIN_SQL = "SELECT g, count(*), sum(x) FROM events GROUP BY g"
FILTERED_SQL = "SELECT g, count(*), sum(x) FROM events WHERE x > 10 GROUP BY g"
MEDIAN_SQL = "SELECT g, median(x) FROM events GROUP BY g"
#: Raw bytes of one row: unit BIGINT, g INTEGER, x DOUBLE.
ROW_BYTES = 8 + 4 + 8


def register(session: dp.Session, source: object) -> dp.Dataset:
    """The benchmark's dataset ``events`` from ``source`` (a Parquet path, a Spark DataFrame), declared once."""
    return session.register_dataset(
        "events",
        source=source,
        privacy_unit="unit",
        bounds={"x": (0, 100)},
        keys={"g": list(range(GROUPS))},
        max_rows_per_unit=MAX_ROWS_PER_UNIT,
        budget=dp.Budget(epsilon=10**6, delta=1e-8),
        policy=dp.PrivacyPolicy(**POLICY),  # type: ignore[arg-type]
    )


def queries(dataset: dp.Dataset) -> tuple[dp.Query, dp.Query, dp.Query]:
    """The unfiltered, the filtered and the median release of the benchmark."""
    grouped = dataset.query().group_by("g")
    return (
        grouped.agg(n=dp.count(), s=dp.sum("x")),
        dataset.query().filter("x", ">", 10).group_by("g").agg(n=dp.count(), s=dp.sum("x")),
        grouped.agg(m=dp.median("x")),
    )


def measure_session(
    parquet: Path, workdir: Path, con: duckdb.DuckDBPyConnection, repeats: int, *, medians: bool
) -> SessionResult:
    engine = TimedEngine(DuckDBEngine())
    session = dp.Session.open(f"sqlite:///{workdir / 'ledger.db'}", analyst="bench", role="steward", engine=engine)  # type: ignore[arg-type]
    try:
        start = time.perf_counter()
        dataset = register(session, parquet)
        index_if_needed(engine.inner, dataset.table, dataset.profile.unit)
        registered = time.perf_counter() - start
        query, filtered, median = queries(dataset)
        calls = iter(range(1, 1_000_000))
        best_engine = float("inf")

        def released(asked: dp.Query, timed: bool = False) -> Callable[[], None]:
            def run() -> None:
                nonlocal best_engine
                engine.seconds = 0.0
                result = session.release(asked, epsilon=0.5 + next(calls) * 1e-6)  # a new ε: never cached
                assert not result.cached and len(result.table) == GROUPS
                if timed:
                    best_engine = min(best_engine, engine.seconds)

            return run

        def plain(sql: str) -> Callable[[], None]:
            return lambda: con.execute(sql).fetchall()  # type: ignore[no-any-return]

        baseline, total = best_of(repeats, plain(PLAIN_SQL), released(query, timed=True))
        result = SessionResult(registered, baseline, total, best_engine)
        result.filtered_plain, result.filtered = best_of(repeats, plain(FILTERED_SQL), released(filtered))
        if medians:
            result.median_plain, result.median = best_of(max(1, repeats // 2), plain(MEDIAN_SQL), released(median))
        return result
    finally:
        session.close()
        engine.inner.close()


@dataclass
class EngineResult:
    plain: float
    per_unit: float
    index: float
    bounded_rows: float
    one_pass: float
    two_passes: float


def measure_engine(con: duckdb.DuckDBPyConnection, plain: Callable[[], object], repeats: int) -> EngineResult:
    per_unit_sql = "SELECT max(n) FROM (SELECT unit, count(*) AS n FROM events GROUP BY unit)"
    (per_unit,) = best_of(repeats, lambda: con.execute(per_unit_sql).fetchall())
    keys = list(range(GROUPS))
    count = count_rows("n")
    total = clipped_sum("x", low=0.0, high=100.0, grid_exponent=GRID_EXPONENT, name="s")
    with DuckDBEngine(connection=con) as engine:
        engine.register("events", "events")
        start = time.perf_counter()
        engine.index_units("events", unit_column="unit", key=random_bytes(32), sums=[total])
        index = time.perf_counter() - start
        bounding = float("inf")

        def release(passes: list[list[Any]]) -> Callable[[], None]:
            def run() -> None:
                nonlocal bounding
                with engine.release_scope():
                    start = time.perf_counter()
                    view = engine.bounded_rows(
                        "events", unit_column="unit", max_rows_per_unit=MAX_ROWS_PER_UNIT, salt=random_bytes(32)
                    )
                    bounding = min(bounding, time.perf_counter() - start)
                    for aggregates in passes:
                        rows = engine.group_aggregates(view, group_column="g", keys=keys, aggregates=aggregates)
                        assert len(rows) == GROUPS

            return run

        baseline, one_pass, two_passes = best_of(repeats, plain, release([[count, total]]), release([[count], [total]]))
    return EngineResult(baseline, per_unit, index, bounding, one_pass, two_passes)


@dataclass
class MemoryResult:
    limit: str | None
    fixed_mib: float
    peak_mib: float
    steps: dict[str, float]  # each step's own peak (the high-water mark cleared before it)


def memory_child(parquet: str, limit: str) -> int:
    """The child of ``measure_memory``: register and release with ``limit`` ('' = DuckDB's default)."""
    workdir = Path(tempfile.mkdtemp(prefix="dpsense-bench-rss-"))
    engine = DuckDBEngine(memory_limit=limit or None)
    session = dp.Session.open(f"sqlite:///{workdir / 'ledger.db'}", analyst="bench", role="steward", engine=engine)
    # the fixed overhead: every module and pool a release loads, measured after the same releases on 1 000 rows
    tiny = workdir / "tiny.parquet"
    duckdb.execute(f"COPY (SELECT * FROM '{parquet}' LIMIT 1000) TO '{tiny}' (FORMAT parquet)")
    warm = register(session, tiny)
    for i, query in enumerate(queries(warm)):
        session.release(query, epsilon=2 + i / 10)
    session.close()
    engine.close()
    engine = DuckDBEngine(memory_limit=limit or None)
    session = dp.Session.open(f"sqlite:///{workdir / 'big.db'}", analyst="bench", role="steward", engine=engine)
    fixed = current_rss_mib()
    steps = {}
    clear_high_water()
    dataset = register(session, Path(parquet))
    steps["register"] = high_water_rss_mib()
    for name, (i, query) in zip(("release", "filtered", "median"), enumerate(queries(dataset)), strict=True):
        clear_high_water()
        session.release(query, epsilon=1 + i / 10)
        steps[name] = high_water_rss_mib()
    print(" ".join(f"{name}={peak:.1f}" for name, peak in steps.items()))
    print(f"{fixed:.1f} {max(steps.values()):.1f}")  # ru_maxrss would hold the parent's peak at the fork
    return 0


def clear_high_water() -> None:
    """Reset this process's VmHWM to its current RSS (Linux: /proc/self/clear_refs), to read one step's peak."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
        refs.write("5")


def measure_memory(parquet: Path, limit: str | None) -> MemoryResult:
    """Peak RSS of a new process that registers ``parquet`` and releases the three queries."""
    run = subprocess.run(
        [sys.executable, __file__, "--memory-child", str(parquet), limit or ""],
        capture_output=True,
        text=True,
        check=True,
    )
    *_, named, last = run.stdout.strip().splitlines()
    fixed, peak = (float(v) for v in last.split())
    steps = {name: float(v) for name, v in (item.split("=") for item in named.split())}
    return MemoryResult(limit, fixed, peak, steps)


def measure(rows: int, units: int, repeats: int) -> tuple[SessionResult, EngineResult, list[MemoryResult]]:
    with tempfile.TemporaryDirectory(prefix="dpsense-bench-") as tmp:
        workdir = Path(tmp)
        parquet = workdir / "events.parquet"
        con = duckdb.connect()
        make_events(con, rows, units)
        con.execute(f"COPY events TO '{parquet}' (FORMAT parquet)")

        def plain() -> None:
            con.execute(PLAIN_SQL).fetchall()

        session = measure_session(parquet, workdir, con, repeats, medians=True)
        engine = measure_engine(con, plain, repeats)
        con.close()
        # DuckDB needs some tens of MiB of its own whatever the data (at 10^6 rows 28 MiB fails a sort): 38 at least
        limits = [f"{max(38, int(factor * rows * ROW_BYTES) // 2**20)}MiB" for factor in (1.5, 2)]
        memory = [measure_memory(parquet, limit) for limit in (*limits, None)] if rows >= 10**6 else []
    return session, engine, memory


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", nargs="+", type=float, help="table sizes, e.g. --rows 1e6 1e7")
    parser.add_argument("--units", type=float, default=1e6, help="privacy units (default 1e6)")
    parser.add_argument("--quick", action="store_true", help="10^5 and 10^6 rows, best of 1")
    parser.add_argument("--memory-child", nargs=2, metavar=("PARQUET", "LIMIT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        return memory_child(*args.memory_child)
    sizes = [int(r) for r in args.rows] if args.rows else ([10**5, 10**6] if args.quick else [10**5, TARGET_ROWS])
    repeats = 1 if args.quick else 5
    units = int(args.units)
    print(
        f"grouped release (count + clipped sum, <= {MAX_ROWS_PER_UNIT} rows per unit, {GROUPS} public groups, "
        f"~{units:,} units); best of {repeats}, warm; load average {os.getloadavg()[0]:.2f} at the start"
    )
    results = {rows: measure(rows, units, repeats) for rows in sizes}
    session_columns = [("rows", 6), ("group-by", 10), ("register*", 10), ("release", 10), ("engine", 10)]
    print("\nSession.release (* one-time steward cost incl. index_units, not in the ratio)")
    print(" ".join(f"{name:>{w}}" for name, w in [*session_columns, ("ratio", 7)]))
    for rows, (s, _, _) in results.items():
        print(
            f"{label(rows):>6} {ms(s.plain):>10} {ms(s.register):>10} {ms(s.release):>10} {ms(s.engine):>10} "
            f"{s.release / s.plain:6.1f}x"
        )
    print("\nfiltered release (WHERE x > 10) and grouped median, each against its plain DuckDB query")
    print(" ".join(f"{n:>{w}}" for n, w in [("rows", 6), ("filtered", 10), ("release", 10), ("ratio", 7)]), end="")
    print(" ".join(f"{n:>{w}}" for n, w in [("", 2), ("median()", 10), ("dp.median", 10), ("ratio", 7)]))
    for rows, (s, _, _) in results.items():
        print(
            f"{label(rows):>6} {ms(s.filtered_plain):>10} {ms(s.filtered):>10} {s.filtered / s.filtered_plain:6.1f}x"
            f"   {ms(s.median_plain):>10} {ms(s.median):>10} {s.median / s.median_plain:6.1f}x"
        )
    engine_columns = [("rows", 6), ("group-by", 10), ("per-unit", 10), ("index*", 10), ("bounded", 10)]
    print("\nengine steps only (* once per snapshot)")
    print(
        " ".join(
            f"{n:>{w}}" for n, w in [*engine_columns, ("1 pass", 10), ("ratio", 7), ("2 passes", 10), ("ratio", 7)]
        )
    )
    for rows, (_, e, _) in results.items():
        print(
            f"{label(rows):>6} {ms(e.plain):>10} {ms(e.per_unit):>10} {ms(e.index):>10} {ms(e.bounded_rows):>10} "
            f"{ms(e.one_pass):>10} {e.one_pass / e.plain:6.1f}x {ms(e.two_passes):>10} {e.two_passes / e.plain:6.1f}x"
        )
    print("\nmemory: a new process registers and runs the three releases (MiB)")
    over_raw: dict[int, float] = {}
    for rows, (_, _, memory) in results.items():
        raw = rows * ROW_BYTES / 2**20
        for m in memory:
            above = m.peak_mib - m.fixed_mib
            print(
                f"{label(rows):>6} raw columns {raw:7.0f}  memory_limit {m.limit or 'DuckDB default':>14}  "
                f"fixed overhead {m.fixed_mib:5.0f}  peak {m.peak_mib:6.0f}  peak - fixed {above:6.0f} "
                f"({above / raw:.2f}x raw)"
            )
            per_step = ", ".join(f"{name} {(peak - m.fixed_mib) / raw:.2f}x" for name, peak in m.steps.items())
            print(f"{'':>6} each step's peak - fixed over raw: {per_step}")
            if m.limit is not None:
                over_raw.setdefault(rows, above / raw)  # the first: memory_limit 1.5x raw
    targets = [
        ("release_vs_groupby", TARGET_ROWS, lambda s: s.release / s.plain, 1.3),
        ("filtered_vs_filtered_groupby", TARGET_ROWS, lambda s: s.filtered / s.filtered_plain, 2.0),
        ("grouped_median_vs_duckdb_median", TARGET_ROWS, lambda s: s.median / s.median_plain, 3.0),
        ("release_vs_groupby", 10**5, lambda s: s.release / s.plain, 5.0),
    ]
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    for name, rows, ratio, goal in targets:
        if rows in results:
            print(f"TARGET {name}_{label(rows)} {ratio(results[rows][0]):.2f} <= {goal}")
    if TARGET_ROWS in over_raw:
        print(f"TARGET peak_rss_over_raw_{label(TARGET_ROWS)} {over_raw[TARGET_ROWS]:.2f} <= 2.0")
    for rows, (s, _, _) in results.items():
        if rows not in (TARGET_ROWS, 10**5):
            print(f"INFO release_vs_groupby_{label(rows)} {s.release / s.plain:.2f} (informative)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
