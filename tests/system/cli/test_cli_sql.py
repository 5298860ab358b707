"""`dpsense sql`: SQL questions through the same Session and ledger; rewrites cost nothing twice."""

from __future__ import annotations

import json

from tests.system.cli.support import REGIONS, Cli, exact, records, register_events


def test_sql_releases_once_and_a_rewrite_is_cached(cli: Cli) -> None:
    register_events(cli, "--max-groups", "region=1")  # a person lives in one region: declared once
    registered = cli
    first = registered(
        "sql", "SELECT region, COUNT(DISTINCT person_id) AS people FROM events GROUP BY region", "--epsilon", "0.5"
    )
    assert first.exit_code == 0, first.stderr
    assert "people" in first.stdout and "charged ε=0.5" in first.stdout
    rewrite = registered(
        "sql",
        "select count(distinct PERSON_ID) persons, region from EVENTS as e group by e.region",
        "--epsilon",
        "0.5",
        "--json",
    )
    assert rewrite.exit_code == 0, rewrite.stderr
    doc = json.loads(rewrite.stdout)
    assert doc["cached"] is True and doc["charged"] is None
    assert doc["columns"] == ["persons", "persons_error95", "region"]
    assert sorted(row["region"] for row in records(doc)) == sorted(REGIONS)
    assert registered.charges() == 1
    assert exact(registered.budget()["spent"]) == {"epsilon": "1/2", "delta": "0/1"}


def test_refused_sql_exits_2_names_the_construct_and_charges_nothing(registered: Cli) -> None:
    before = registered.ledger_state()
    result = registered("sql", "SELECT COUNT(*) FROM events LIMIT 5", "--epsilon", "0.5")
    assert result.exit_code == 2 and result.stdout == ""
    assert "LIMIT" in result.stderr and "returned table" in result.stderr
    assert registered.ledger_state() == before
