"""The public bound on rows a data-dependent step collects: refused for free above the engine's limit,
charged when the data turn out to exceed the declared population."""

from __future__ import annotations

from pathlib import Path

import pytest

import dpsense as dp
from dpsense.core.errors import ChargedFailure
from tests.spark_support import spark_available, spark_session
from tests.system.release.support import planted, policy, register


def test_data_beyond_the_declared_population_is_a_charged_failure(tmp_path: Path) -> None:
    with dp.Session.open(f"sqlite:///{tmp_path / 'l.db'}", analyst="steward", role="steward") as session:
        # 600 persons but a declared population of 100: the median's view holds more than 100 x 5 rows
        events = register(session, planted(persons=600), policy=policy(population=100), budget=dp.Budget(epsilon=4))
        with pytest.raises(ChargedFailure):
            session.release(events.query().agg(m=dp.median("age")), epsilon=1)
        assert session.budget("events").spent.epsilon == 1  # the failure read data: it is charged
        # additive statistics collect nothing: the same dataset still answers them
        release = session.release(events.query().agg(n=dp.count()), epsilon=1)
        assert release.table["n"].iloc[0] >= 0


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
