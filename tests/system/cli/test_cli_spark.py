"""The CLI's engine choice: ``engine: spark`` in a release spec, ``--engine spark`` on the commands.

The refusals need no Spark: a bad engine setting is judged with the spec, before the ledger is
opened and before any data is read. One test runs the CLI on Spark (in-process, on the shared local
session of tests/spark_support.py, which the CLI reuses because its master is the same) and checks
that a spec with ``engine: spark`` releases what the same spec releases on DuckDB.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.spark_support import spark_available, spark_session
from tests.system.cli.support import POLICY, REGIONS, SPEC, Cli, exact, records, write_csv, write_yaml

#: A large per-release ε, so the two engines' noisy answers lie close to the same exact values.
EPSILON = 400
NEAR = {"people": 1.0, "events": 1.0, "mean_hours": 0.05, "median_age": 1.0}


@pytest.mark.parametrize(
    ("settings", "options", "message"),
    [
        ({"engine": "sparkk"}, [], "did you mean 'spark'"),
        ({"spark_master": "local[2]"}, [], "'spark_master' is only valid with engine: spark"),
        ({"engine": "duckdb", "spark_collect_limit": 10}, [], "only valid with engine: spark"),
        ({"engine": "spark", "spark_master": "localhost:7077"}, [], "not a Spark master URL"),
        ({"engine": "spark", "spark_collect_limit": 0}, [], "must be an integer >= 1"),
        ({"engine": "duckdb"}, ["--engine", "spark"], "the spec and --engine disagree"),
        ({}, ["--spark-master", "local[2]"], "--spark-master: only valid with the Spark engine"),
        ({}, ["--engine", "spark", "--spark-master", "local[2"], "not a Spark master URL"),
    ],
)
def test_bad_engine_settings_are_refused_before_the_ledger_or_the_data(
    registered: Cli, settings: dict[str, Any], options: list[str], message: str
) -> None:
    before = registered.ledger_state()
    # The source does not exist: reading any data would fail with another message.
    spec = registered.spec("bad", SPEC | {"source": "missing.csv"} | settings)
    for command in ("release", "preview"):
        result = registered(command, spec, *options)
        assert result.exit_code == 2, (command, result.stdout)
        assert message in result.stderr and "Traceback" not in result.stderr
    assert registered.ledger_state() == before


def test_dataset_add_refuses_spark_options_without_the_spark_engine(cli: Cli) -> None:
    source = write_csv(cli.root / "events.csv")
    policy = write_yaml(cli.root / "policy.yaml", POLICY)
    added = cli.steward(
        "dataset", "add", "events", "--source", str(source), "--unit", "person_id",
        "--budget-epsilon", "4", "--privacy-policy", str(policy), "--spark-collect-limit", "1000", "--create",
    )  # fmt: skip
    assert added.exit_code == 2
    assert "--spark-collect-limit: only valid with the Spark engine" in added.stderr
    assert "add --engine spark" in added.stderr
    assert not (cli.root / "ledger.db").exists()  # refused before the ledger was opened


def test_a_missing_pyspark_names_the_extra(registered: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("pyspark", "pyspark.sql"):
        monkeypatch.setitem(sys.modules, module, None)  # as if pyspark were not installed
    monkeypatch.delitem(sys.modules, "dpsense.engine.spark._engine", raising=False)
    before = registered.ledger_state()
    result = registered("release", registered.spec("spark", SPEC | {"engine": "spark"}))
    assert result.exit_code == 2
    assert "the Spark engine needs pyspark" in result.stderr and "pip install 'dpsense[spark]'" in result.stderr
    assert registered.ledger_state() == before


def _register(cli: Cli, *engine: str) -> None:
    source = write_csv(cli.root / "events.csv")
    policy = write_yaml(cli.root / "policy.yaml", POLICY | {"per_release_epsilon": EPSILON, "planned_releases": 2})
    added = cli.steward(
        "dataset", "add", "events", "--source", str(source), "--unit", "person_id",
        "--bound", "hours=0:24", "--bound", "age=0:120", "--keys", "region=north,south,east,west",
        "--max-rows-per-unit", "3", "--budget-epsilon", str(2 * EPSILON), "--privacy-policy", str(policy),
        "--create", *engine,
    )  # fmt: skip
    assert added.exit_code == 0, added.stderr
    assert cli.steward("analyst", "add", "alice").exit_code == 0


def _release(cli: Cli, spec: dict[str, Any]) -> dict[str, Any]:
    result = cli("release", cli.spec("spec", spec), "--json")
    assert result.exit_code == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)  # one document: Spark wrote nothing on stdout
    return doc


@pytest.mark.skipif(not spark_available(), reason="pyspark or Java is not installed")
def test_a_spark_spec_releases_what_the_duckdb_spec_releases(tmp_path: Path) -> None:
    spark_session()  # the shared local[2] session: the CLI reuses it (same master) and leaves it running
    on_duckdb = Cli(tmp_path / "duckdb", f"sqlite:///{tmp_path / 'duckdb.db'}")
    on_spark = Cli(tmp_path / "spark", f"sqlite:///{tmp_path / 'spark.db'}")
    for cli in (on_duckdb, on_spark):
        cli.root.mkdir()
    _register(on_duckdb)
    _register(on_spark, "--engine", "spark")
    spec = SPEC | {"epsilon": EPSILON}
    duck = _release(on_duckdb, spec)
    # The median may collect up to population x 3 rows to the driver: the public collect limit covers them.
    spark = _release(on_spark, spec | {"engine": "spark", "spark_master": "local[2]", "spark_collect_limit": 3_000_000})
    assert spark["charged"] == duck["charged"] and exact(duck["charged"]) == {"epsilon": f"{EPSILON}/1"}
    assert spark["budget"]["spent"] == duck["budget"]["spent"]
    assert sorted(spark["columns"]) == sorted(duck["columns"])
    by_region = {row["region"]: row for row in records(duck)}
    assert sorted(by_region) == sorted(REGIONS) == sorted(row["region"] for row in records(spark))
    for row in records(spark):
        for name, tolerance in NEAR.items():
            assert abs(row[name] - by_region[row["region"]][name]) <= tolerance, (name, row, by_region)
    assert spark_session().sparkContext._jsc.sc().isStopped() is False  # the shared session still runs


def test_the_embedded_engine_wants_an_existing_file(tmp_path: Path) -> None:
    cli = Cli(tmp_path, f"sqlite:///{tmp_path / 'l.db'}")
    policy = write_yaml(tmp_path / "policy.yaml", POLICY)
    added = cli.steward(
        "dataset", "add", "events", "--source", "events_table", "--unit", "person_id",
        "--budget-epsilon", "1", "--privacy-policy", str(policy),
    )  # fmt: skip
    assert added.exit_code == 2
    assert "existing CSV or Parquet file" in added.stderr and "--engine spark" in added.stderr


@pytest.mark.skipif(not spark_available(), reason="pyspark or Java is not installed")
def test_a_spark_table_name_is_a_cli_source(tmp_path: Path) -> None:
    spark = spark_session()  # the shared local[2] session: the CLI reuses it
    spark.read.csv(str(write_csv(tmp_path / "events.csv")), header=True, inferSchema=True).createOrReplaceTempView(
        "cli_events"
    )
    cli = Cli(tmp_path, f"sqlite:///{tmp_path / 'l.db'}")
    policy = write_yaml(tmp_path / "policy.yaml", POLICY)
    added = cli.steward(
        "dataset", "add", "events", "--source", "cli_events", "--unit", "person_id",
        "--bound", "hours=0:24", "--max-rows-per-unit", "3", "--budget-epsilon", "2",
        "--privacy-policy", str(policy), "--engine", "spark", "--create",
    )  # fmt: skip
    assert added.exit_code == 0, added.stderr
    assert "registered" in added.stdout
