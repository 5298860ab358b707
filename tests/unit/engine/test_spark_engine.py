"""SparkEngine specifics: sources, secret hygiene in plans and catalog, collect limits, selection, cleanup.

The behaviour every engine shares is in tests/conformance (run on Spark too); here are the parts that
only Spark has: Spark DataFrames and catalog tables as sources, derived keys as plan literals (never
the salt), persisted snapshots that ``close`` frees, and the distributed narrowing of order statistics.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from tests.spark_support import spark_available, spark_session

if not spark_available():  # pragma: no cover - depends on the machine
    pytest.skip("pyspark or Java is not installed", allow_module_level=True)

from dpsense.core.errors import DPSenseError, InternalError, InvalidData, UnsupportedRequest, UsageError
from dpsense.engine import (
    BoundedView,
    CollectLimitExceeded,
    Engine,
    SparkEngine,
    TableInfo,
    _portable,
    clipped_sum,
    count_rows,
    predicate,
)
from dpsense.engine.spark import _select
from dpsense.noise.entropy import random_bytes


@pytest.fixture(scope="module")
def spark() -> Any:
    return spark_session()


@pytest.fixture
def engine(spark: Any) -> Iterator[SparkEngine]:
    eng = SparkEngine(spark, collect_limit=100_000)
    try:
        yield eng
    finally:
        eng.close()


def people() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "person": [1, 1, 1, 2, 2, 3, 4, 4, 4, 4],
            "region": ["north", "north", "south", "south", "east", "north", "east", "east", "west", "north"],
            "hours": [1.5, 30.0, 2.25, -4.0, 8.0, 0.1, 3.0, 3.0, 7.5, 12.0],
        }
    )


def persistent_rdds(spark: Any) -> int:
    return int(spark.sparkContext._jsc.getPersistentRDDs().size())


def test_is_an_engine_and_always_portable(engine: SparkEngine) -> None:
    assert isinstance(engine, Engine)
    assert engine.portable is True


def test_lazy_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import dpsense.engine

    monkeypatch.setitem(sys.modules, "pyspark", None)  # as if pyspark were not installed
    monkeypatch.delitem(sys.modules, "dpsense.engine.spark._engine", raising=False)
    with pytest.raises(ImportError, match=r"dpsense\[spark\]"):
        dpsense.engine.SparkEngine  # noqa: B018 - the attribute access is the import under test


def test_register_a_spark_dataframe_and_a_catalog_table(engine: SparkEngine, spark: Any) -> None:
    frame = spark.createDataFrame(pa.Table.from_pandas(people(), preserve_index=False))
    info = engine.register("df", frame)
    assert info.column_names == ("person", "region", "hours")
    assert [c.kind for c in info.columns] == ["integer", "string", "float"]
    frame.createOrReplaceTempView("dpsense_people_view")
    try:
        assert engine.register("by_name", "dpsense_people_view") == TableInfo("by_name", info.columns)
        # The registered snapshot is a copy: replacing the view later changes nothing.
        changed = pa.Table.from_pandas(people().assign(hours=99.0), preserve_index=False)
        spark.createDataFrame(changed).createOrReplaceTempView("dpsense_people_view")
        view = engine.bounded_rows("by_name", unit_column="person", max_rows_per_unit=100, salt=random_bytes(32))
        assert 99.0 not in engine.collect(view, columns=["hours"])["hours"]
    finally:
        spark.catalog.dropTempView("dpsense_people_view")
    with pytest.raises(UsageError, match="__dps_"):
        engine.register("bad", spark.createDataFrame(pa.table({"__dps_x": [1]})))


def test_register_a_parquet_directory_and_a_uri(engine: SparkEngine, spark: Any, tmp_path: Any) -> None:
    folder = tmp_path / "people.parquet"
    spark.createDataFrame(pa.Table.from_pandas(people(), preserve_index=False)).write.parquet(str(folder))
    assert folder.is_dir()  # what Spark writes: a directory of part files
    info = engine.register("by_path", folder)
    assert engine.register("by_uri", folder.as_uri()) == TableInfo("by_uri", info.columns)  # file://, as hdfs://
    key = random_bytes(32)
    assert engine.fingerprint("by_path", key) == engine.fingerprint("by_uri", key)
    with pytest.raises(InvalidData, match="does not exist"):
        engine.register("typo", tmp_path / "typo.parquet")  # a local path is checked before Spark runs
    with pytest.raises(InvalidData, match="could not be read"):
        engine.register("gone", (tmp_path / "gone.parquet").as_uri())  # a URI is Spark's to resolve


def test_a_dataframe_the_caller_cached_stays_cached(engine: SparkEngine, spark: Any) -> None:
    frame = spark.createDataFrame(pa.Table.from_pandas(people(), preserve_index=False)).persist()
    try:
        frame.count()
        engine.register("cached", frame)
        engine.index_units("cached", unit_column="person", key=random_bytes(32))
        engine.forget("cached")
        assert frame.storageLevel.useMemory  # the engine kept a copy of its own and freed only that
    finally:
        frame.unpersist()


def test_salt_never_reaches_plans_or_catalog(
    engine: SparkEngine, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    tables_before = {t.name for t in spark.catalog.listTables()}
    engine.register("t", people())
    salts = [random_bytes(32) for _ in range(3)]

    def plans_of(view: BoundedView) -> str:
        engine.group_aggregates(view, group_column="region", keys=["north"], aggregates=[count_rows()])
        capsys.readouterr()
        for mode in (True, "formatted"):
            engine._views[view.name].frame.explain(mode)
        return capsys.readouterr().out

    windowed = plans_of(engine.bounded_rows("t", unit_column="person", max_rows_per_unit=2, salt=salts[0]))
    capped = plans_of(
        engine.bounded_rows(
            "t",
            unit_column="person",
            max_rows_per_unit=2,
            salt=salts[1],
            group_column="region",
            max_groups_per_unit=1,
            where=[predicate("hours", ">", 0.0)],
        )
    )
    engine.index_units("t", unit_column="person", key=random_bytes(32))
    rotated = plans_of(engine.bounded_rows("t", unit_column="person", max_rows_per_unit=2, salt=salts[2]))
    for plans in (windowed, capped, rotated):
        assert "== Physical Plan ==" in plans
        for salt in salts:
            assert salt.hex() not in plans and salt.hex()[:16] not in plans
    # What the plans hold instead: keys derived by HMAC (documented as plan literals).
    assert _portable.text_key(salts[0], "rows") in windowed
    tables = spark.catalog.listTables()
    assert {t.name for t in tables} == tables_before
    assert not any(salt.hex() in repr(t) for t in tables for salt in salts)


def test_collect_needs_a_public_bound_and_charges_a_discovered_excess(spark: Any) -> None:
    with SparkEngine(spark) as engine:
        engine.register("t", people())
        view = engine.bounded_rows("t", unit_column="person", max_rows_per_unit=100, salt=random_bytes(32))
        with pytest.raises(UsageError, match="public bound") as refused:
            engine.collect(view, columns=["hours"])
        assert "max_rows" in str(refused.value)
        with pytest.raises(UsageError, match="positive integer"):
            engine.collect(view, columns=["hours"], max_rows=0)
        assert engine.collect(view, columns=["hours"], max_rows=10)["hours"].size == 10
        with pytest.raises(CollectLimitExceeded) as exceeded:
            engine.collect(view, columns=["hours"], max_rows=9)
        assert isinstance(exceeded.value, DPSenseError) and not isinstance(exceeded.value, UsageError)
        assert "10" not in str(exceeded.value)  # the true number of rows is not in the error
    with SparkEngine(spark, collect_limit=3) as limited:
        assert limited.collect_limit == 3 and SparkEngine(spark).collect_limit is None
        limited.register("t", people())
        view = limited.bounded_rows("t", unit_column="person", max_rows_per_unit=1, salt=random_bytes(32))
        with pytest.raises(CollectLimitExceeded):
            limited.collect(view, columns=["person"])
        assert limited.collect(view, columns=["person"], max_rows=4)["person"].tolist() == [1, 2, 3, 4]


def test_portable_units_and_capped_groups_are_integers_or_strings(engine: SparkEngine) -> None:
    engine.register("t", people().assign(weight=np.linspace(0, 1, 10)))
    salt = random_bytes(32)
    with pytest.raises(UnsupportedRequest, match="integer or string"):
        engine.bounded_rows("t", unit_column="hours", max_rows_per_unit=1, salt=salt)
    with pytest.raises(UnsupportedRequest, match="integer or string"):
        engine.bounded_rows(
            "t", unit_column="person", max_rows_per_unit=1, salt=salt, group_column="weight", max_groups_per_unit=1
        )
    with pytest.raises(UnsupportedRequest, match="integer or string"):
        engine.index_units("t", unit_column="hours", key=salt)
    view = engine.bounded_rows("t", unit_column="region", max_rows_per_unit=1, salt=salt)  # strings are fine
    assert len(engine.collect(view, columns=["region"])["region"]) == 4


def test_order_statistics_narrow_by_counts_without_collecting_the_column(
    engine: SparkEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Force several narrowing rounds on a small table: a tiny exact step and a coarse summary.
    monkeypatch.setattr(_select, "EXACT_ROWS", 40)
    monkeypatch.setattr(_select, "ACCURACY", 50)
    rng = np.random.default_rng(4)
    n = 3000
    values = np.round(rng.normal(0.0, 10.0, n), 1)  # many ties
    values[:150] = 50.0  # a block clipped to the upper bound
    engine.register("t", pd.DataFrame({"person": np.arange(n), "x": values}))
    view = engine.bounded_rows("t", unit_column="person", max_rows_per_unit=1, salt=random_bytes(32))
    low, high = -25.0, 20.0
    clipped = np.sort(np.clip(values, low, high))
    collected: list[int] = []
    real_exact = _select._exact

    def counting_exact(subset: Any, lo: int, hi: int, below: int, run: Any) -> dict[int, float]:
        collected.append(hi - lo + 1)
        return real_exact(subset, lo, hi, below, run)

    monkeypatch.setattr(_select, "_exact", counting_exact)
    for rank, width in [(1500, 5), (2, 3), (n + 2, 4)]:
        window = engine.order_statistics_window(view, column="x", low=low, high=high, rank=rank, width=width)
        ranks = np.arange(rank - width, rank + width + 1)
        want = [low if i <= 0 else high if i > n else clipped[i - 1] for i in ranks]
        np.testing.assert_array_equal(window.ranks, ranks)
        np.testing.assert_array_equal(window.values, np.array(want))
    assert len(collected) == 3 and max(collected) <= 2 * 5 + 1


def storage_levels(spark: Any) -> list[tuple[bool, bool]]:
    """(in memory, on disk) of each persisted RDD's storage level."""
    rdds = spark.sparkContext._jsc.getPersistentRDDs().values()
    return sorted((bool(r.getStorageLevel().useMemory()), bool(r.getStorageLevel().useDisk())) for r in rdds)


def test_registration_keeps_one_copy_on_disk_until_the_index_is_in_memory(spark: Any) -> None:
    """Spark's heap at 10^8 rows: the checks read a disk copy, the policies add none, the index alone is cached."""
    before = storage_levels(spark)
    engine = SparkEngine(spark, collect_limit=1000)
    engine.register("t", people())
    assert storage_levels(spark) == sorted([*before, (False, True)])  # on disk only
    engine.apply_policies("t", clamp={"hours": (0.0, 10.0)})  # a map of the same copy, not a second one
    assert storage_levels(spark) == sorted([*before, (False, True)])
    with engine.release_scope():
        view = engine.bounded_rows("t", unit_column="person", max_rows_per_unit=4, salt=random_bytes(32))
        clamped = engine.collect(view, columns=["hours"])["hours"]
    assert sorted(clamped.tolist()) == [0.0, 0.1, 1.5, 2.25, 3.0, 3.0, 7.5, 8.0, 10.0, 10.0]
    engine.index_units("t", unit_column="person", key=random_bytes(32))
    assert storage_levels(spark) == sorted([*before, (True, True)])  # the indexed snapshot, memory and disk
    with engine.release_scope():
        view = engine.bounded_rows("t", unit_column="person", max_rows_per_unit=4, salt=random_bytes(32))
        assert sorted(engine.collect(view, columns=["hours"])["hours"].tolist()) == sorted(clamped.tolist())
    engine.close()
    assert storage_levels(spark) == before


def test_close_unpersists_snapshots_and_views(spark: Any) -> None:
    before = persistent_rdds(spark)
    engine = SparkEngine(spark, collect_limit=1000)
    engine.register("t", people())
    view = engine.bounded_rows("t", unit_column="person", max_rows_per_unit=1, salt=random_bytes(32))
    engine.group_aggregates(
        view, group_column=None, keys=None, aggregates=[clipped_sum("hours", low=0, high=10, grid_exponent=-4)]
    )
    assert persistent_rdds(spark) == before + 1  # the snapshot (views are queries, computed when read)
    engine.index_units("t", unit_column="person", key=random_bytes(32))
    assert persistent_rdds(spark) == before + 1  # the indexed snapshot replaced the first one
    with engine.release_scope():
        engine.collect(
            engine.bounded_rows("t", unit_column="person", max_rows_per_unit=2, salt=random_bytes(32)),
            columns=["hours"],
        )
    engine.close()
    assert persistent_rdds(spark) == before
    with pytest.raises(UsageError, match="closed"):
        engine.table_info("t")


def test_spark_errors_never_carry_their_message() -> None:
    secret = "s3cr3t-row-value"

    def failing() -> None:
        raise RuntimeError(f"cannot cast {secret}")

    with pytest.raises(InternalError) as err:
        SparkEngine._run(failing)
    assert secret not in str(err.value) and err.value.__cause__ is None


def test_a_session_registers_a_spark_dataframe_and_a_table_name(spark: Any, tmp_path: Any) -> None:
    import dpsense as dp
    from tests.system.release.support import policy

    frame = spark.createDataFrame(pa.Table.from_pandas(people(), preserve_index=False))
    frame.createOrReplaceTempView("dpsense_session_people")
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    declared: dict[str, Any] = {
        "privacy_unit": "person",
        "bounds": {"hours": (0, 24)},
        "policies": {"hours": "clamp"},
        "keys": {"region": ["north", "south", "east", "west"]},
        "max_rows_per_unit": 3,
        "budget": dp.Budget(epsilon=4),
        "policy": policy(),
    }
    try:
        with SparkEngine(spark, collect_limit=100) as engine:
            session = dp.Session.open(ledger, analyst="steward", role="steward", engine=engine)
            with session:
                by_frame = session.register_dataset("people", source=frame, **declared)
                by_name = session.register_dataset("people_again", source="dpsense_session_people", **declared)
                assert not by_frame.linked and by_name.linked  # the same rows: one budget, whatever the source
                assert by_name.name == "people" and session.datasets() == ["people"]
                query = by_frame.query().group_by("region").agg(n=dp.count(), h=dp.mean("hours"))
                result = session.release(query, epsilon=1)
                assert sorted(result.table["region"]) == sorted(["north", "south", "east", "west"])
        # A later session (another engine) attaches the snapshot from the table name, checked by fingerprint.
        with (
            SparkEngine(spark, collect_limit=100) as engine,
            dp.Session.open(ledger, analyst="steward", engine=engine) as later,
        ):
            later.dataset("people", source="dpsense_session_people")
            assert later.release(query, epsilon=1).cached
    finally:
        spark.catalog.dropTempView("dpsense_session_people")


def test_a_session_on_spark_groups_by_two_columns(spark: Any, tmp_path: Any) -> None:
    """Issue 17 item 3 on Spark: a cross product of declared keys and a median per value pair."""
    import dpsense as dp
    from tests.system.release.support import policy

    rows = pd.DataFrame(
        {
            "person": np.repeat(np.arange(200), 2),
            "region": np.array(["north", "south"])[np.repeat(np.arange(200), 2) % 2],
            "shift": np.tile([1, 2], 200),
            "hours": np.tile([3.0, 9.0], 200),
        }
    )
    frame = spark.createDataFrame(pa.Table.from_pandas(rows, preserve_index=False))
    with (
        SparkEngine(spark, collect_limit=10_000) as engine,
        dp.Session.open(
            f"sqlite:///{tmp_path / 'ledger.db'}", analyst="steward", role="steward", engine=engine
        ) as session,
    ):
        visits = session.register_dataset(
            "visits",
            source=frame,
            privacy_unit="person",
            bounds={"hours": (0, 24)},
            keys={"region": ["north", "south"], "shift": [1, 2]},
            max_rows_per_unit=2,
            max_groups_per_unit={"region": 1, "shift": 2},
            budget=dp.Budget(epsilon=4),
            policy=policy(population=1000),
        )
        query = visits.query().group_by("region", "shift").agg(n=dp.count(), m=dp.median("hours"))
        table = session.release(query, epsilon=2).table
    assert [(r, s) for r, s in zip(table["region"], table["shift"], strict=True)] == [
        ("north", 1),
        ("north", 2),
        ("south", 1),
        ("south", 2),
    ]
    assert all(abs(n - 100) < 40 for n in table["n"])  # 100 rows per pair; Laplace scale 2 / 1 = 2
