"""The public bound on rows a data-dependent step collects: refused for free above the engine's limit;
data beyond the declared population is refused at registration, so no release can exceed the bound."""

from __future__ import annotations

from pathlib import Path

import pytest

import dpsense as dp
from dpsense.core.errors import InvalidData
from tests.spark_support import spark_available, spark_session
from tests.system.release.support import planted, policy, register


def test_data_beyond_the_declared_population_is_refused_at_registration(tmp_path: Path) -> None:
    """Registration guarantees the population bound, so the collect bound can never trip in a release."""
    with dp.Session.open(f"sqlite:///{tmp_path / 'l.db'}", analyst="steward", role="steward") as session:
        # 600 persons but a declared population of 100: refused before anything is registered
        with pytest.raises(InvalidData, match="raise population") as info:
            register(session, planted(persons=600), policy=policy(population=100), budget=dp.Budget(epsilon=4))
        assert "600" not in str(info.value)  # the unnoised count of units is never shown
        assert session.datasets() == []
        # exactly the population is within the bound; the median's view then fits population x C rows
        events = register(session, planted(persons=100), policy=policy(population=100), budget=dp.Budget(epsilon=4))
        assert session.release(events.query().agg(m=dp.median("age")), epsilon=1).table["m"].iloc[0] is not None


def test_units_counted_on_the_raw_snapshot_rows_without_a_unit_do_not_count(tmp_path: Path) -> None:
    frame = planted(persons=10)
    frame.loc[frame.index[:3], "person_id"] = None
    with dp.Session.open(f"sqlite:///{tmp_path / 'l.db'}", analyst="steward", role="steward") as session:
        register(session, frame, policy=policy(population=10), policies={"person_id": "drop"})
        assert session.datasets() == ["events"]


@pytest.mark.skipif(not spark_available(), reason="pyspark or Java is missing")
def test_spark_registration_refuses_more_units_than_the_population(tmp_path: Path) -> None:
    from dpsense.engine import SparkEngine

    engine = SparkEngine(spark_session(), collect_limit=10**7)
    try:
        with dp.Session.open(f"sqlite:///{tmp_path / 'l.db'}", analyst="steward", role="steward", engine=engine) as s:
            frame = spark_session().createDataFrame(planted(persons=30))
            with pytest.raises(InvalidData, match="population"):
                register(s, frame, policy=policy(population=29))
            assert s.datasets() == []
            register(s, frame, policy=policy(population=30))
    finally:
        engine.close()


@pytest.mark.skipif(not spark_available(), reason="pyspark or Java is missing")
def test_a_worst_case_above_the_engines_collect_limit_is_refused_before_any_charge(tmp_path: Path) -> None:
    from dpsense.engine import SparkEngine

    engine = SparkEngine(spark_session(), collect_limit=1000)
    try:
        url = f"sqlite:///{tmp_path / 'l.db'}"
        with dp.Session.open(url, analyst="steward", role="steward", engine=engine) as session:
            events = register(session, spark_session().createDataFrame(planted(persons=50)))
            with pytest.raises(dp.DPSenseError, match="collect limit"):  # 10^6 x 5 rows > 1000
                session.release(events.query().agg(m=dp.median("age")), epsilon=1)
            with pytest.raises(dp.DPSenseError, match="collect limit"):
                session.preview(events.query().agg(m=dp.median("age")), epsilon=1)
            assert session.ledger.charges("events") == []
            assert session.release(events.query().agg(n=dp.count()), epsilon=1).table["n"].iloc[0] >= 0
    finally:
        engine.close()


@pytest.mark.skipif(not spark_available(), reason="pyspark or Java is missing")
def test_a_dataset_registered_from_a_spark_table_name_reattaches_without_source(tmp_path: Path) -> None:
    from dpsense.engine import SparkEngine

    spark = spark_session()
    spark.createDataFrame(planted(persons=40)).createOrReplaceTempView("events_table")
    url = f"sqlite:///{tmp_path / 'l.db'}"
    first = SparkEngine(spark, collect_limit=10**7)
    try:
        with dp.Session.open(url, analyst="steward", role="steward", engine=first) as session:
            register(session, "events_table")
    finally:
        first.close()
    second = SparkEngine(spark, collect_limit=10**7)
    try:
        with dp.Session.open(url, analyst="steward", role="steward", engine=second) as session:
            events = session.dataset("events")  # no source=: the table name was remembered
            assert session.release(events.query().agg(n=dp.count()), epsilon=1).table["n"].iloc[0] >= 0
    finally:
        second.close()
