"""Release speed on Spark: the grouped DP release of benchmarks/release.py against the plain Spark group-by.

Data (made inside Spark from ``spark.range`` and ``xxhash64`` of the row number, so every run sees the
same table; nothing passes through pandas): N rows, about 10^6 privacy units, 1,000 public groups and
a float value in [0, 100), persisted (memory and disk) before anything is timed. The baseline is the
plain non-private ``groupBy("g").agg(count(*), sum(x))`` on that persisted DataFrame, collected.

Session table (the target): ``dpsense.Session`` with ``engine=SparkEngine(spark)`` over a SQLite
ledger registers the DataFrame (privacy unit, bounds [0, 100] on ``x``, the 1,000 keys of ``g``, at
most 5 rows per unit, a complete privacy policy, a large budget); registration (data checks,
fingerprint, the persisted snapshot and the unit index) is a one-time steward cost shown apart and
not in the ratio. Each timed release is ``session.release(query.group_by("g").agg(n=dp.count(),
s=dp.sum("x")), epsilon=...)`` with a new ε (never a cached answer): planning, ledger reserve and
commit, the engine steps on the executors, noise on the driver. ``engine`` is the part spent in
engine calls.

Engine table (for scale): ``1 pass`` is ``bounded_rows`` on the indexed snapshot (a filter, no
shuffle) plus one ``group_aggregates`` holding the count and the clipped sum; ``windowed`` is the
same with a public filter that keeps every row, which forces the windowed bound (a shuffle by unit
and a keyed SHA-256 order per release; not run at 10^8 rows, where it takes many minutes).

Memory: the Python driver's peak RSS (``resource.getrusage``), the JVM's peak RSS (``VmHWM`` of the
Spark driver process; in local mode the executors run inside it) and the peak of its old-generation
heap pool (JMX), where cached blocks and long-lived hash tables sit.

Each measurement has one warm-up run, then the best of 3 (of 1 with ``--quick``; ``--repeats`` sets
it). The memory line printed after each size holds the peaks so far, so with several sizes in one run
the line after a size is that size's peak (peaks only grow).

    python benchmarks/spark.py                 # 10^7 and 10^8 rows (10^8 takes a while)
    python benchmarks/spark.py --rows 1e7      # other sizes
    python benchmarks/spark.py --rows 1e8 --repeats 1   # 10^8 rows, one warm-up and one timed run each
    python benchmarks/spark.py --quick         # 10^6 rows, best of 1, under a minute

Ends with ``TARGET spark_release_vs_groupby_1e7 <ratio> <= 3.0`` (and the same for 1e8 when it was
measured); exits 0 even when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dpsense as dp
from _timing import TimedEngine, label, peak_rss_mib
from dpsense.engine import SparkEngine, clipped_sum, count_rows, predicate
from dpsense.noise.entropy import random_bytes
from release import register as register_events

TARGET_ROWS = (10**7, 10**8)
TARGET_RATIO = 3.0
GROUPS = 1000
MAX_ROWS_PER_UNIT = 5
GRID_EXPONENT = -34  # the executor's grid for bounds [0, 100]: 2**(6 - 40)
WINDOWED_UP_TO = 10**7


def start_spark(driver_memory: str, partitions: int) -> SparkSession:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("dpsense-benchmark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")  # no call-site capture per expression
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def make_events(spark: SparkSession, rows: int, units: int, partitions: int) -> DataFrame:
    """``events(unit BIGINT, g INT, x DOUBLE)`` from hashes of the row number, persisted."""
    ids = spark.range(0, rows, numPartitions=partitions)

    def hashed(salt: str, modulus: int) -> Any:
        return sf.pmod(sf.xxhash64(sf.col("id"), sf.lit(salt)), sf.lit(modulus))

    frame = ids.select(
        hashed("unit", units).alias("unit"),
        hashed("group", GROUPS).cast("int").alias("g"),
        (hashed("value", 1_000_000).cast("double") / 10_000.0).alias("x"),
    ).persist(StorageLevel.MEMORY_AND_DISK)
    frame.count()
    return frame


def best_of(repeats: int, run: Callable[[], object]) -> float:
    run()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.0f}ms" if seconds < 10 else f"{seconds:.1f}s"


@dataclass
class Result:
    generate: float
    plain: float
    register: float
    release: float
    engine: float
    one_pass: float
    windowed: float | None


def measure(spark: SparkSession, rows: int, units: int, repeats: int, partitions: int, windowed: bool) -> Result:
    start = time.perf_counter()
    events = make_events(spark, rows, units, partitions)
    generate = time.perf_counter() - start

    def plain_group_by() -> None:
        assert len(events.groupBy("g").agg(sf.count(sf.lit(1)), sf.sum("x")).collect()) == GROUPS

    plain = best_of(repeats, plain_group_by)
    engine = TimedEngine(SparkEngine(spark))
    with tempfile.TemporaryDirectory(prefix="dpsense-spark-bench-") as tmp:
        session = dp.Session.open(
            f"sqlite:///{Path(tmp) / 'ledger.db'}",
            analyst="bench",
            role="steward",
            engine=engine,  # type: ignore[arg-type]
        )
        try:
            start = time.perf_counter()
            dataset = register_events(session, events)  # the declarations of benchmarks/release.py
            if engine.inner._tables[dataset.table].index_unit != "unit":  # until the Session indexes itself
                engine.inner.index_units(dataset.table, unit_column="unit", key=random_bytes(32))
            register = time.perf_counter() - start
            query = dataset.query().group_by("g").agg(n=dp.count(), s=dp.sum("x"))
            calls = iter(range(1, 1_000_000))
            best_engine = float("inf")

            def release() -> None:
                nonlocal best_engine
                engine.seconds = 0.0
                result = session.release(query, epsilon=0.5 + next(calls) * 1e-6)
                assert not result.cached and len(result.table) == GROUPS
                best_engine = min(best_engine, engine.seconds)

            release_time = best_of(repeats, release)
            one_pass = best_of(repeats, lambda: engine_pass(engine.inner, dataset.table, []))
            windowed_time = None
            if windowed:
                keep_all = [predicate("x", ">=", 0.0)]
                windowed_time = best_of(min(repeats, 1), lambda: engine_pass(engine.inner, dataset.table, keep_all))
        finally:
            session.close()
            engine.inner.close()
    plain = min(plain, best_of(repeats, plain_group_by))  # before and after
    events.unpersist(blocking=True)
    return Result(generate, plain, register, release_time, best_engine, one_pass, windowed_time)


def engine_pass(engine: SparkEngine, table: str, where: list[Any]) -> None:
    keys = list(range(GROUPS))
    aggregates = [
        count_rows("n"),
        clipped_sum("x", low=0.0, high=100.0, grid_exponent=GRID_EXPONENT, name="s"),
    ]
    with engine.release_scope():
        view = engine.bounded_rows(
            table, unit_column="unit", max_rows_per_unit=MAX_ROWS_PER_UNIT, salt=random_bytes(32), where=where
        )
        assert len(engine.group_aggregates(view, group_column="g", keys=keys, aggregates=aggregates)) == GROUPS


def memory_report(spark: SparkSession) -> str:
    python_peak = peak_rss_mib()
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    pid = int(jvm.java.lang.ProcessHandle.current().pid())
    jvm_peak_rss = float("nan")
    status = Path(f"/proc/{pid}/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                jvm_peak_rss = int(line.split()[1]) / 1024
    old_gen_peak = 0  # the heap pool that holds what lives long (cached blocks, hash tables)
    for pool in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans():
        if str(pool.getType().toString()) == "Heap memory" and "Old" in str(pool.getName()):
            old_gen_peak = max(old_gen_peak, int(pool.getPeakUsage().getUsed()))
    heap_max = int(jvm.java.lang.Runtime.getRuntime().maxMemory())
    return (
        f"driver (Python) peak RSS {python_peak:.0f} MiB; Spark JVM (driver and local executors) peak RSS "
        f"{jvm_peak_rss:.0f} MiB, old-generation heap peak {old_gen_peak / 2**20:.0f} MiB of a "
        f"{heap_max / 2**20:.0f} MiB heap"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", nargs="+", type=float, help="table sizes, e.g. --rows 1e7 1e8")
    parser.add_argument("--units", type=float, default=1e6, help="privacy units (default 1e6)")
    parser.add_argument("--quick", action="store_true", help="10^6 rows, best of 1")
    parser.add_argument("--driver-memory", default="6g", help="Spark driver memory (local mode: all of Spark)")
    parser.add_argument("--partitions", type=int, default=8, help="input and shuffle partitions")
    parser.add_argument("--repeats", type=int, help="timed runs after the warm-up (default 3, 1 with --quick)")
    args = parser.parse_args()
    sizes = [int(r) for r in args.rows] if args.rows else ([10**6] if args.quick else list(TARGET_ROWS))
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 3)
    units = int(args.units)
    started = time.perf_counter()
    spark = start_spark(args.driver_memory, args.partitions)
    print(
        f"grouped release on Spark local[2] (count + clipped sum, <= {MAX_ROWS_PER_UNIT} rows per unit, {GROUPS} "
        f"public groups, ~{units:,} units); best of {repeats}, warm; Spark started in "
        f"{time.perf_counter() - started:.1f}s",
        flush=True,
    )
    results: dict[int, Result] = {}
    for rows in sizes:
        windowed = not args.quick and rows <= WINDOWED_UP_TO
        results[rows] = measure(spark, rows, units, repeats, args.partitions, windowed)
        r = results[rows]
        print(
            f"  {label(rows)}: plain {ms(r.plain)}, release {ms(r.release)} ({r.release / r.plain:.2f}x), "
            f"register {ms(r.register)}; generated in {ms(r.generate)}",
            flush=True,
        )
        print(f"  memory after {label(rows)}: {memory_report(spark)}", flush=True)
    columns = [("rows", 6), ("generate*", 10), ("group-by", 10), ("register*", 10), ("release", 10), ("engine", 10)]
    print("\nSession.release (* not in the ratio: data generation, and the one-time steward registration)")
    print(" ".join(f"{name:>{w}}" for name, w in [*columns, ("ratio", 7)]))
    for rows, r in results.items():
        print(
            f"{label(rows):>6} {ms(r.generate):>10} {ms(r.plain):>10} {ms(r.register):>10} {ms(r.release):>10} "
            f"{ms(r.engine):>10} {r.release / r.plain:6.2f}x"
        )
    print("\nengine steps only")
    print(
        " ".join(
            f"{n:>{w}}" for n, w in [("rows", 6), ("group-by", 10), ("1 pass", 10), ("ratio", 7), ("windowed", 10)]
        )
    )
    for rows, r in results.items():
        windowed_text = "-" if r.windowed is None else ms(r.windowed)
        print(
            f"{label(rows):>6} {ms(r.plain):>10} {ms(r.one_pass):>10} {r.one_pass / r.plain:6.2f}x {windowed_text:>10}"
        )
    print(f"\nmemory: {memory_report(spark)}")
    for rows, r in results.items():
        if rows in TARGET_ROWS:
            print(f"TARGET spark_release_vs_groupby_{label(rows)} {r.release / r.plain:.2f} <= {TARGET_RATIO}")
        else:
            print(
                f"INFO spark_release_vs_groupby_{label(rows)} {r.release / r.plain:.2f} "
                "(informative; the targets are at 1e7 and 1e8)"
            )
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
