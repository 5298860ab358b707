"""`dpsense release` grouped by several columns from a YAML spec: one key column each, in the order asked."""

from __future__ import annotations

import json

from tests.system.cli.support import REGIONS, Cli, records

BASE = {"dataset": "events", "epsilon": 1, "aggregates": {"n": {"kind": "count"}}}


def test_a_key_set_and_a_cross_product_from_yaml(registered: Cli) -> None:
    pairs = [["north", 20], ["south", 27], ["east", 20]]
    spec = registered.spec("pairs", {**BASE, "group_by": {"columns": ["region", "age"], "keys": pairs}})
    result = registered("release", spec, "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["columns"][:2] == ["region", "age"]
    assert sorted([r["region"], r["age"]] for r in records(doc)) == sorted(pairs)
    crossed = registered.spec(
        "crossed", {**BASE, "group_by": [{"column": "age", "keys": [20, 27]}, {"column": "region"}]}
    )
    table = registered("release", crossed)
    assert table.exit_code == 0, table.stderr
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in table.stdout.splitlines() if "│" in line]
    header = next(line for line in table.stdout.splitlines() if "┃" in line)
    assert [c.strip() for c in header.split("┃")[1:3]] == ["age", "region"]  # as asked
    assert sorted((c[0], c[1]) for c in cells) == sorted((a, r) for a in ("20", "27") for r in REGIONS)
    assert registered.charges() == 2


def test_a_bad_key_set_is_refused_in_yaml_words_before_any_charge(registered: Cli) -> None:
    before = registered.ledger_state()
    spec = registered.spec("bad", {**BASE, "group_by": {"columns": ["region", "age"], "keys": ["north"]}})
    result = registered("release", spec)
    assert result.exit_code == 2 and "columns" in result.stderr and "Traceback" not in result.stderr
    typo = registered.spec("typo", {**BASE, "group_by": {"columns": ["region", "age"], "keys": [["norht", 20]]}})
    refused = registered("release", typo)
    assert refused.exit_code == 2 and "did you mean" in refused.stderr
    assert registered.ledger_state() == before
