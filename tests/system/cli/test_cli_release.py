"""The CLI end to end on real DuckDB and a real SQLite ledger: register, release, cache, budget, history."""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
import subprocess
import sys
from contextlib import closing

import pytest

from dpsense.ledger import Ledger
from tests.system.cli.support import (
    POLICY,
    REGIONS,
    SPEC,
    Cli,
    exact,
    records,
    register_events,
    write_csv,
    write_yaml,
)


def test_dataset_add_registers_once_and_links_the_same_data(cli: Cli) -> None:
    source = write_csv(cli.root / "events.csv")
    policy = write_yaml(cli.root / "policy.yaml", POLICY)
    added = cli.steward(
        "dataset", "add", "events", "--source", str(source), "--unit", "person_id",
        "--bound", "hours=0:24", "--policy", "hours=clamp", "--keys", "region=north,south,east,west",
        "--budget-epsilon", "4", "--privacy-policy", str(policy), "--create",
    )  # fmt: skip
    assert added.exit_code == 0, added.stderr
    assert "'events' snapshot 'v1': registered" in added.stdout
    assert "[0, 24]" in added.stdout and "clamp" in added.stdout and "north" in added.stdout
    assert cli.budget()["cap"] == {"kind": "approx", "epsilon": "4/1", "delta": "0/1", "approx": [4.0, 0.0]}
    declared = (
        "--unit", "person_id", "--bound", "hours=0:24", "--policy", "hours=clamp",
        "--keys", "region=north,south,east,west", "--privacy-policy", str(cli.root / "policy.yaml"),
    )  # fmt: skip
    source_again = ("--source", str(cli.root / "events.csv"))
    again = cli.steward("dataset", "add", "events_copy", *source_again, *declared, "--budget-epsilon", "4")
    assert again.exit_code == 0, again.stderr
    assert "linked to its budget" in again.stdout  # the same data never opens a second budget
    with Ledger.open(cli.ledger) as ledger:
        assert ledger.dataset_names() == ["events"]
        head = ledger.verify().head_hash
    other = cli.steward(
        "dataset", "add", "events_copy", *source_again, *declared, "--budget-epsilon", "10", "--adjacency", "replace"
    )  # other declarations: refused, never a silent link
    assert other.exit_code == 2, other.stdout
    assert "already registered as dataset 'events'" in other.stderr
    assert (
        "adjacency: registered 'add_remove', given 'replace'" in other.stderr and "budget: registered" in other.stderr
    )
    assert "register with the same declarations to link" in other.stderr and "Traceback" not in other.stderr
    with Ledger.open(cli.ledger) as ledger:
        assert ledger.dataset_names() == ["events"] and ledger.verify().head_hash == head


def test_a_release_prints_a_table_and_charges_once(registered: Cli) -> None:
    spec = registered.spec("spec", SPEC)
    first = registered("release", spec)
    assert first.exit_code == 0, first.stderr
    for word in ("region", "people", "people_error95", "mean_hours", "median_age", *REGIONS):
        assert word in first.stdout
    assert "charged ε=1, δ=0" in first.stdout
    assert exact(registered.budget()["spent"]) == {"epsilon": "1/1", "delta": "0/1"}

    again = registered("release", spec)
    assert again.exit_code == 0, again.stderr
    assert "cached: no new charge" in again.stdout
    assert exact(registered.budget()["spent"]) == {"epsilon": "1/1", "delta": "0/1"}
    assert registered.charges() == 1


def test_json_and_csv_output_hold_the_stored_noisy_values(registered: Cli) -> None:
    spec = registered.spec("spec", SPEC | {"request_id": "job-7"})
    as_json = registered("release", spec, "--json")
    assert as_json.exit_code == 0, as_json.stderr
    doc = json.loads(as_json.stdout)  # exactly one document: anything else on stdout would not parse
    assert doc["cached"] is False and exact(doc["charged"]) == {"epsilon": "1/1"}  # a pure-DP charge has no δ
    assert doc["budget"]["remaining"] == {
        "kind": "approx",
        "epsilon": "9/1",
        "delta": "1/100000000",  # exact "n/d" strings, as the service sends them
        "approx": [9.0, 1e-08],
    }
    assert "people" in doc["explain"]
    rows = records(doc)
    assert sorted(row["region"] for row in rows) == sorted(REGIONS)
    with Ledger.open(registered.ledger) as ledger:
        (stored,) = ledger.releases("events")
    # the ledger stores each statistic under its meaning (count_units()); the CLI shows the spec's name
    stored_people = [row[stored.value["columns"].index("count_units()")] for row in stored.value["rows"]]
    assert [row["people"] for row in rows] == stored_people
    assert all(isinstance(row["mean_hours"], float) and 0 <= row["mean_hours"] <= 24 for row in rows)

    as_csv = registered("release", spec, "--csv")
    assert as_csv.exit_code == 0, as_csv.stderr
    lines = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert [r["region"] for r in lines] == [row["region"] for row in rows]
    assert [float(r["people"]) for r in lines] == [float(v) for v in stored_people]
    assert [float(r["mean_hours"]) for r in lines] == [row["mean_hours"] for row in rows]
    assert registered.charges() == 1


def test_budget_csv_and_table(registered: Cli) -> None:
    as_csv = registered("budget", "events", "--csv")
    assert as_csv.exit_code == 0, as_csv.stderr
    (row,) = csv.DictReader(io.StringIO(as_csv.stdout))
    assert row["cap_epsilon"] == "10" and row["cap_delta"] == "0.00000001" and row["spent_epsilon"] == "0"
    human = registered("budget", "events")
    assert human.exit_code == 0 and "remaining" in human.stdout and "0.00000001" in human.stdout
    both = registered("budget", "events", "--json", "--csv")
    assert both.exit_code == 2 and both.stdout == ""


def test_history_lists_releases_and_verify_log_is_ok(registered: Cli) -> None:
    first = registered("release", registered.spec("a", SPEC), "--json")
    second = registered("release", registered.spec("b", SPEC | {"epsilon": 0.5}), "--json")
    assert first.exit_code == 0 and second.exit_code == 0
    history = registered("history", "events", "--json")
    assert history.exit_code == 0, history.stderr
    releases = json.loads(history.stdout)["releases"]
    ids = [json.loads(done.stdout)["release_id"] for done in (first, second)]
    assert [r["release_id"] for r in releases] == ids
    assert [exact(r["charged"]) for r in releases] == [{"epsilon": "1/1"}, {"epsilon": "1/2"}]
    assert all(r["analyst"] == "alice" and r["charge_id"] and r["explain"] for r in releases)
    assert registered("history", "events", analyst="bob").stdout.count("alice") == 0  # others' releases stay hidden


def test_history_says_when_who_and_what_was_asked(registered: Cli) -> None:
    """Issue 17, item 6: three different releases used to read "laplace | count | 0.1" alike."""
    asked = [
        "SELECT COUNT(*) FROM events",
        "SELECT region, COUNT(*) FROM events GROUP BY region",
        "SELECT region, AVG(hours) FROM events WHERE age >= 30 AND region IN ('north', 'south') GROUP BY region",
    ]
    for sql in asked:
        assert registered("sql", sql, "--epsilon", "0.1").exit_code == 0
    listed = json.loads(registered("history", "events", "--json").stdout)["releases"]
    assert [r["question"] for r in listed] == [
        "count()",
        "count() by region",
        "mean(hours) by region where age >= 30 and region in ('north', 'south')",
    ]
    assert all(isinstance(r["created_at"], float) for r in listed)
    table = " ".join(registered("history", "events").stdout.split())
    assert "count() by region" in table and "time" in table and "Z" in table
    csv_lines = registered("history", "events", "--csv").stdout.splitlines()
    assert csv_lines[0] == "release_id,time,analyst,snapshot,question,epsilon,delta,mechanism,charge_id"

    verified = registered("verify-log", "--json")
    assert verified.exit_code == 0
    report = json.loads(verified.stdout)
    assert report["ok"] is True and report["entries"] > 0
    assert "ledger ok" in registered("verify-log").stdout


def test_preview_prints_the_plan_and_charges_nothing(registered: Cli) -> None:
    before = registered.ledger_state()
    result = registered("preview", registered.spec("spec", SPEC))
    assert result.exit_code == 0, result.stderr
    assert "nothing charged" in result.stdout and "laplace" in result.stdout.lower()
    assert registered.ledger_state() == before


def test_preview_prints_each_statistics_expected_error_and_the_epsilon_a_target_needs(registered: Cli) -> None:
    before = registered.ledger_state()
    count = {"dataset": "events", "epsilon": 0.5, "aggregates": {"n": {"kind": "count"}}}
    result = registered("preview", registered.spec("count", count), "--target", "n=40")
    assert result.exit_code == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "Expected errors at ε = 0.50" in out and "'n' (count): |error| <= " in out
    assert "least ε for 'n' within ±40:" in out
    mean = registered("preview", registered.spec("spec", SPEC))
    assert "'mean_hours' (mean): depends on the group's size n" in " ".join(mean.stdout.split())
    bad = registered("preview", registered.spec("count", count), "--target", "n")
    assert bad.exit_code != 0 and "--target takes NAME=VALUE" in bad.stderr
    assert registered.ledger_state() == before


def test_an_exhausted_budget_exits_3_without_a_charge(cli: Cli) -> None:
    register_events(cli)
    count = {"dataset": "events", "aggregates": {"n": {"kind": "count"}}}
    for i in range(5):  # ε = 2 five times spends the whole budget of 10
        spec = cli.spec(f"s{i}", count | {"epsilon": 2, "filters": [{"column": "age", "op": ">=", "value": 20 + i}]})
        assert cli("release", spec, "--json").exit_code == 0
    before = cli.ledger_state()
    result = cli("release", cli.spec("over", count | {"epsilon": 0.5}))
    assert result.exit_code == 3
    assert result.stdout == "" and "budget cannot cover" in result.stderr
    assert cli.ledger_state() == before


def test_the_module_entry_point_runs_in_a_subprocess(registered: Cli) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPSENSE_")} | {"DPSENSE_ANALYST": "alice"}
    done = subprocess.run(
        [sys.executable, "-m", "dpsense.cli", "budget", "events", "--json", "--ledger", registered.ledger],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert exact(json.loads(done.stdout)["cap"]) == {"epsilon": "10/1", "delta": "1/100000000"}
    missing = subprocess.run(
        [sys.executable, "-m", "dpsense.cli", "budget", "nosuch", "--ledger", registered.ledger],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.startswith("error: ") and "Traceback" not in missing.stderr
    assert missing.stderr.strip().count("\n") == 0  # one line


def test_verify_log_exits_1_on_a_tampered_chain(registered: Cli) -> None:
    path = registered.ledger.removeprefix("sqlite:///")
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE audit_log SET event = 'commit' WHERE seq = 2")
    result = registered("verify-log")
    assert result.exit_code == 1
    assert "ledger tampered at entry 2" in result.stderr and result.stdout == ""
    assert json.loads(registered("verify-log", "--json").stdout)["first_broken_seq"] == 2


def test_a_spec_asks_for_approximate_bounds_and_gets_two_charged_columns(registered: Cli) -> None:
    spec = registered.spec(
        "bounds",
        {"dataset": "events", "epsilon": 1, "aggregates": {"h": {"kind": "approx_bounds", "column": "hours"}}},
    )
    released = registered("release", spec, "--json")
    assert released.exit_code == 0, released.stderr
    (row,) = records(json.loads(released.stdout))
    assert row["h_low"] <= 1.0 and row["h_high"] >= 16.0  # hours lie in [1, 12.7]: bins [1, 2) .. [8, 16)
    assert exact(registered.budget()["spent"]) == {"epsilon": "1/1", "delta": "0/1"}


def test_a_typical_range_declared_with_the_cli_makes_the_mean_clip_adaptively(cli: Cli) -> None:
    # hours in [0, 24], typical 1..3: the power-of-two cover [1, 4] is 8x narrower than the bounds (the rule's ratio)
    source = write_csv(cli.root / "events.csv")
    policy = write_yaml(cli.root / "policy.yaml", POLICY)
    added = cli.steward(
        "dataset", "add", "events", "--source", str(source), "--unit", "person_id", "--bound", "hours=0:24",
        "--typical", "hours=1:3", "--max-rows-per-unit", "3", "--budget-epsilon", "10", "--privacy-policy", str(policy),
        "--create",
    )  # fmt: skip
    assert added.exit_code == 0, added.stderr
    assert "[0, 24] typical [1, 3]" in added.stdout  # the profile shows the declaration
    mean = {"dataset": "events", "epsilon": 1, "aggregates": {"m": {"kind": "mean", "column": "hours"}}}
    shown = cli.steward("preview", cli.spec("m", mean))
    assert shown.exit_code == 0, shown.stderr
    assert "approx_bounds" in shown.stdout and "adaptive clip by default" in " ".join(shown.stdout.split())


@pytest.mark.parametrize(
    ("typical", "message"),
    [("hours=1", "--typical: expected COLUMN=LOWER:UPPER"), ("hours=1:30", "inside its declared bounds")],
)
def test_a_bad_typical_range_in_the_cli_names_the_flag_and_registers_nothing(
    cli: Cli, typical: str, message: str
) -> None:
    source = write_csv(cli.root / "events.csv")
    policy = write_yaml(cli.root / "policy.yaml", POLICY)
    result = cli.steward(
        "dataset", "add", "events", "--source", str(source), "--unit", "person_id", "--bound", "hours=0:24",
        "--typical", typical, "--budget-epsilon", "10", "--privacy-policy", str(policy), "--create",
    )  # fmt: skip
    assert result.exit_code == 2 and message in " ".join(result.stderr.split()) and "Traceback" not in result.stderr
    assert cli.steward("budget", "events").exit_code != 0


def test_a_key_typo_in_a_spec_is_refused_with_the_closest_key_and_no_charge(registered: Cli) -> None:
    before = registered.ledger_state()
    typo = {"dataset": "events", "epsilon": 1, "filters": [{"column": "region", "op": "==", "value": "norht"}]}
    result = registered("release", registered.spec("typo", typo | {"aggregates": {"n": {"kind": "count"}}}))
    assert result.exit_code == 2 and "did you mean 'north'?" in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr and registered.ledger_state() == before
