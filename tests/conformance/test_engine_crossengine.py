"""Cross-engine conformance: DuckDB in portable mode and Spark give identical results for the same salt.

The per-engine suite (the other modules here) shows each engine keeps the seam's promises; this one
shows the two portable engines keep the *same rows*: for the same data, salt and request, the bounded
views, the aggregates on them (counts, distinct units, present values, exact clipped sums), the
order-statistics windows and collected points are equal, and so are the steward's fingerprints,
data-quality counts and policies. The last tests run whole ``Session`` releases on both engines
under the test-only deterministic noise source and compare the released tables.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.spark_support import spark_available, spark_session

if not spark_available():  # pragma: no cover - depends on the machine
    pytest.skip("pyspark or Java is not installed", allow_module_level=True)

import dpsense as dp
from dpsense.engine import (
    Aggregate,
    BoundedView,
    DuckDBEngine,
    Engine,
    SparkEngine,
    centered_squares,
    clipped_sum,
    count_present,
    count_rows,
    count_units,
    predicate,
)
from dpsense.noise.entropy import random_bytes
from dpsense.noise.testing import deterministic_entropy
from tests.factories import policy_fields

ENGINES = ("duckdb-portable", "spark")


@pytest.fixture
def engines() -> Iterator[dict[str, Engine]]:
    pair: dict[str, Engine] = {
        "duckdb-portable": DuckDBEngine(portable=True),
        "spark": SparkEngine(spark_session(), collect_limit=1_000_000),
    }
    try:
        yield pair
    finally:
        for engine in pair.values():
            engine.close()


def events(units: int = 120, seed: int = 3) -> pa.Table:
    """Units with 1..9 rows, identical rows, missing and non-finite values, NULL units and groups."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 10, units)
    person = np.repeat(np.arange(units), sizes)
    n = person.size
    hours = np.round(rng.normal(8.0, 6.0, n), 2)
    hours[rng.random(n) < 0.05] = np.nan
    hours[:3] = [math.inf, -math.inf, 1e300]
    region = rng.choice(["north", "south", "east", "west"], n).astype(object)
    region[rng.random(n) < 0.03] = None
    label = rng.integers(0, 3, n)  # few labels: many identical rows within a unit
    person_values: list[int | None] = person.tolist()
    person_values[5] = None
    return pa.table(
        {
            "person": pa.array(person_values, pa.int64()),
            "region": pa.array(region.tolist(), pa.string()),
            "label": pa.array(label, pa.int32()),
            "hours": pa.array([None if i % 41 == 7 else float(v) for i, v in enumerate(hours)], pa.float64()),
            "score": pa.array(rng.integers(-5, 50, n), pa.int16()),
        }
    )


def register_all(engines: dict[str, Engine], name: str, source: Any) -> None:
    infos = [engine.register(name, source) for engine in engines.values()]
    assert [c.kind for c in infos[0].columns] == [c.kind for c in infos[1].columns]
    assert infos[0].column_names == infos[1].column_names


def bound_all(engines: dict[str, Engine], table: str = "t", **kw: Any) -> dict[str, BoundedView]:
    return {name: engine.bounded_rows(table, **kw) for name, engine in engines.items()}


def rows_of(engine: Engine, view: BoundedView, columns: list[str]) -> list[tuple[Any, ...]]:
    """The view's rows, sorted, with NaN spelled "nan" so that equal rows compare equal."""
    got = engine.collect(view, columns=columns)
    rows = zip(*(got[c].tolist() for c in columns), strict=True)
    spelled = [tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in row) for row in rows]
    return sorted(spelled, key=repr)


def same(values: dict[str, Any]) -> Any:
    first, second = (values[name] for name in ENGINES)
    assert first == second
    return first


# -- steward steps -----------------------------------------------------------------------------------


def awkward_types() -> pa.Table:
    return pa.table(
        {
            "person": pa.array([1, 2, 3, 4, None], pa.int64()),
            "x": pa.array([0.1, -0.0, math.nan, math.inf, None]),
            "f": pa.array([0.5, None, 1e-40, -3.25, 7.0], pa.float32()),
            "d": pa.array(
                [Decimal("1.25"), None, Decimal("-2.50"), Decimal("0"), Decimal("9.99")], pa.decimal128(9, 2)
            ),
            "s": pa.array(["a", "", None, "é,1:x", "-"]),
            "b": pa.array([True, False, None, True, True]),
            "day": pa.array([dt.date(2024, 1, 2), None, dt.date(1970, 1, 1), dt.date(2000, 2, 29), dt.date(1, 1, 1)]),
            "n": pa.array([1, None, -(2**63), 2**63 - 1, 0], pa.int64()),
        }
    )


def test_fingerprints_quality_and_policies_agree(engines: dict[str, Engine]) -> None:
    key = bytes(range(32))
    register_all(engines, "t", awkward_types())
    register_all(engines, "e", events())
    for table in ("t", "e"):
        same({n: e.fingerprint(table, key) for n, e in engines.items()})
    columns = list(awkward_types().column_names)
    same({n: e.data_quality("t", columns) for n, e in engines.items()})
    for engine in engines.values():
        engine.apply_policies(
            "t", drop_missing=["person"], drop_nonfinite=["x"], clamp={"f": (-1.0, 1.0), "d": (0.0, 5.0), "n": (0, 9)}
        )
    same({n: e.fingerprint("t", key) for n, e in engines.items()})
    same({n: e.data_quality("t", columns) for n, e in engines.items()})
    views = bound_all(engines, unit_column="person", max_rows_per_unit=5, salt=random_bytes(32))
    same({n: rows_of(engines[n], v, ["person", "x", "f", "d", "n"]) for n, v in views.items()})


def test_a_snapshot_registered_on_one_engine_has_the_same_fingerprint_on_the_other(
    engines: dict[str, Engine], tmp_path: Path
) -> None:
    table = events()
    path = tmp_path / "events.parquet"
    pq.write_table(table, path)
    engines["duckdb-portable"].register("file", path)
    engines["spark"].register("file", spark_session().createDataFrame(table))
    same({n: e.fingerprint("file", b"k" * 16) for n, e in engines.items()})


# -- bounding ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("c", [1, 2, 4])
def test_windowed_bound_keeps_the_same_rows(engines: dict[str, Engine], c: int) -> None:
    register_all(engines, "t", events())
    salt = random_bytes(32)
    views = bound_all(engines, unit_column="person", max_rows_per_unit=c, salt=salt)
    kept = same({n: rows_of(engines[n], v, ["person", "label", "hours", "score"]) for n, v in views.items()})
    assert kept and max(sum(1 for r in kept if r[0] == p) for p in {r[0] for r in kept}) <= c


def test_filters_and_group_caps_keep_the_same_rows(engines: dict[str, Engine]) -> None:
    register_all(engines, "t", events())
    salt = random_bytes(32)
    for where, cap, grouping in [
        ([predicate("hours", ">", 2.0)], None, "region"),
        ([predicate("region", "in", ["north", "east"]), predicate("score", "<=", 30)], None, "region"),
        ([], 1, "region"),
        ([predicate("label", "!=", 2)], 2, "region"),
        ([], 2, ("region", "label")),
    ]:
        extra: dict[str, Any] = {"group_column": grouping, "max_groups_per_unit": cap} if cap else {}
        views = bound_all(engines, unit_column="person", max_rows_per_unit=3, salt=salt, where=where, **extra)
        same({n: rows_of(engines[n], v, ["person", "region", "label", "score"]) for n, v in views.items()})


def test_indexed_bound_keeps_the_same_rows(engines: dict[str, Engine]) -> None:
    register_all(engines, "t", events())
    key = random_bytes(32)
    for engine in engines.values():
        engine.index_units("t", unit_column="person", key=key)
    for c in (1, 3):
        views = bound_all(engines, unit_column="person", max_rows_per_unit=c, salt=random_bytes(32))
        same({n: rows_of(engines[n], v, ["person", "label", "hours", "score"]) for n, v in views.items()})
    string_units = events().append_column("who", pa.array([f"u{i % 37}" for i in range(events().num_rows)]))
    register_all(engines, "s", string_units)
    for engine in engines.values():
        engine.index_units("s", unit_column="who", key=key)
    views = bound_all(engines, table="s", unit_column="who", max_rows_per_unit=2, salt=random_bytes(32))
    same({n: rows_of(engines[n], v, ["who", "label", "score"]) for n, v in views.items()})


# -- aggregates, order statistics, collect -----------------------------------------------------------


def aggregates() -> list[Aggregate]:
    return [
        count_rows(),
        count_units(),
        count_present("hours"),
        clipped_sum("hours", low=0.0, high=24.0, grid_exponent=-20, name="h_grid"),
        clipped_sum("hours", low=-0.3, high=17.1, grid_exponent=-2, name="h_coarse"),  # bounds off the grid
        clipped_sum("score", low=-1.5, high=40.0, grid_exponent=0, name="s_int"),
        centered_squares("hours", low=0.0, high=24.0, name="h_squares"),
        centered_squares("score", low=-1.5, high=40.0, name="s_squares"),
    ]


def test_group_aggregates_agree_for_every_aggregate_and_bounding_rule(engines: dict[str, Engine]) -> None:
    register_all(engines, "t", events())
    salt = random_bytes(32)
    rules: list[dict[str, Any]] = [
        {"max_rows_per_unit": 2},
        {"max_rows_per_unit": 5, "where": [predicate("label", "in", [0, 1])]},
        {"max_rows_per_unit": 3, "group_column": "region", "max_groups_per_unit": 1},
        {"max_rows_per_unit": 3, "group_column": ("region", "label"), "max_groups_per_unit": 2},
    ]
    for rule in rules:
        views = bound_all(engines, unit_column="person", salt=salt, **rule)
        if isinstance(rule.get("group_column"), tuple):
            for pairs in ([("north", 0), ("south", 2), ("nowhere", 1)], None):
                same(
                    {
                        n: engines[n].group_aggregates(
                            v, group_column=("region", "label"), keys=pairs, aggregates=aggregates()
                        )
                        for n, v in views.items()
                    }
                )
            continue
        for keys in (["north", "south", "nowhere"], None):
            same(
                {
                    n: engines[n].group_aggregates(v, group_column="region", keys=keys, aggregates=aggregates())
                    for n, v in views.items()
                }
            )
        if "group_column" not in rule:
            same(
                {
                    n: engines[n].group_aggregates(v, group_column=None, keys=None, aggregates=aggregates())
                    for n, v in views.items()
                }
            )
            same(
                {
                    n: engines[n].group_aggregates(v, group_column="label", keys=[0, 1, 2], aggregates=aggregates())
                    for n, v in views.items()
                }
            )
    for engine in engines.values():
        engine.index_units("t", unit_column="person", key=salt)
    views = bound_all(engines, unit_column="person", max_rows_per_unit=2, salt=random_bytes(32))
    same(
        {
            n: engines[n].group_aggregates(v, group_column="region", keys=["west", "east"], aggregates=aggregates())
            for n, v in views.items()
        }
    )


def test_order_statistics_and_collect_agree(engines: dict[str, Engine]) -> None:
    register_all(engines, "t", events(units=400))
    views = bound_all(engines, unit_column="person", max_rows_per_unit=2, salt=random_bytes(32))
    for rank, width in [(1, 3), (150, 5), (400, 2), (2000, 1)]:
        windows = {
            n: engines[n].order_statistics_window(v, column="hours", low=-2.0, high=20.0, rank=rank, width=width)
            for n, v in views.items()
        }
        np.testing.assert_array_equal(windows["spark"].ranks, windows["duckdb-portable"].ranks)
        np.testing.assert_array_equal(windows["spark"].values, windows["duckdb-portable"].values)
    collected = {n: engines[n].collect(v, columns=["region", "hours", "score"]) for n, v in views.items()}
    for column in ("region", "hours", "score"):
        np.testing.assert_array_equal(collected["spark"][column], collected["duckdb-portable"][column])


# -- whole releases through a Session ----------------------------------------------------------------

POLICY = policy_fields(
    population=10_000,
    delta_rationale="δ = 1e-7, well below 1/(10 x population)",
    per_release_epsilon=10,
    minimum_useful_accuracy="counts within ±50",
)


def release_tables(engine: Engine, source: Any, ledger: Path, seed: int) -> list[pd.DataFrame]:
    with deterministic_entropy(seed):
        session = dp.Session.open(
            f"sqlite:///{ledger}", analyst="alice", role="steward", engine=engine, allow_test_noise=True
        )
        try:
            events_ds = session.register_dataset(
                "events",
                source=source,
                privacy_unit="person",
                bounds={"hours": (0, 24), "score": (0, 40)},
                keys={"region": ["north", "south", "east", "west"]},
                policies={"hours": "drop", "person": "drop", "region": "drop"},
                max_rows_per_unit=4,
                budget=dp.Budget(epsilon=100, delta=1e-6),
                policy=dp.PrivacyPolicy(**POLICY),  # type: ignore[arg-type]
            )
            grouped = (
                events_ds.query()
                .group_by("region")
                .max_groups_per_unit(2)
                .agg(
                    n=dp.count(),
                    people=dp.count_units(),
                    h=dp.sum("hours"),
                    mean_score=dp.mean("score"),
                    var_score=dp.variance("score"),
                )
            )
            filtered = (
                events_ds.query()
                .filter("label", "==", 1)
                .agg(
                    n=dp.count(),
                    median=dp.median("hours"),
                    smooth=dp.median("hours", mechanism="smooth_median"),  # read by rank: distributed selection
                )
            )
            return [
                session.release(grouped, epsilon=1.0).table,
                session.release(filtered, epsilon=0.5).table,
            ]
        finally:
            session.close()


def test_session_releases_give_identical_tables(tmp_path: Path) -> None:
    data = events(units=300)
    duck = DuckDBEngine(portable=True)
    spark = SparkEngine(spark_session(), collect_limit=1_000_000)
    try:
        on_duckdb = release_tables(duck, data, tmp_path / "duck.db", seed=11)
        on_spark = release_tables(spark, spark_session().createDataFrame(data), tmp_path / "spark.db", seed=11)
    finally:
        duck.close()
        spark.close()
    assert len(on_duckdb) == len(on_spark) == 2
    for a, b in zip(on_duckdb, on_spark, strict=True):
        pd.testing.assert_frame_equal(a, b)
    assert on_duckdb[0]["n"].sum() > 0
