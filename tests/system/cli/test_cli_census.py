"""`dpsense dataset add --hierarchy`: a census hierarchy declared from the command line, then released from a
spec (issue 19, item 2); a malformed leaves file is refused naming the flag and the line, nothing registered.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from click.testing import Result

from dpsense.ledger import Ledger
from tests.system.cli.support import POLICY, Cli, write_yaml

DISTRICTS = {"north": ["n1", "n2"], "south": ["s1", "s2", "s3"]}


def _add(cli: Cli, leaves_text: str, *extra: str) -> Result:
    person = np.arange(300)
    leaves = [(r, d) for r, names in DISTRICTS.items() for d in names]
    frame = pd.DataFrame(
        {
            "person_id": person,
            "region": [leaves[p % len(leaves)][0] for p in person],
            "district": [leaves[p % len(leaves)][1] for p in person],
        }
    )
    frame.to_csv(cli.root / "census.csv", index=False)
    (cli.root / "leaves.csv").write_text(leaves_text)
    policy = write_yaml(cli.root / "policy.yaml", POLICY)
    return cli.steward(
        "dataset", "add", "census", "--source", str(cli.root / "census.csv"), "--unit", "person_id",
        "--keys", "region=north,south", "--keys", "district=n1,n2,s1,s2,s3", "--max-rows-per-unit", "1",
        "--hierarchy", f"geo=region,district:{cli.root / 'leaves.csv'}",
        "--budget-epsilon", "5", "--privacy-policy", str(policy), "--create", *extra,
    )  # fmt: skip


def test_a_hierarchy_declared_on_the_command_line_is_released_consistently(cli: Cli) -> None:
    added = _add(cli, "north,n1\nnorth,n2\n\nsouth,s1\nsouth,s2\nsouth,s3\n")
    assert added.exit_code == 0, added.stderr
    assert cli.steward("analyst", "add", "alice").exit_code == 0
    spec = cli.spec(
        "t",
        {
            "dataset": "census",
            "epsilon": 1,
            "aggregates": {"people": {"kind": "hierarchical_count", "hierarchy": "geo"}},
        },
    )
    result = cli("release", spec, "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    rows = [dict(zip(doc["columns"], row, strict=True)) for row in doc["rows"]]
    total = next(r["people"] for r in rows if r["level"] == "total")
    assert total == sum(r["people"] for r in rows if r["level"] == "region")
    assert sorted((r["region"], r["district"]) for r in rows if r["level"] == "district") == sorted(
        (r, d) for r, names in DISTRICTS.items() for d in names
    )


def test_a_malformed_leaves_file_is_refused_naming_the_flag_and_the_line(cli: Cli) -> None:
    bad = _add(cli, "north,n1\nnorth\n")
    assert bad.exit_code == 2 and "--hierarchy" in bad.stderr and "line 2" in bad.stderr
    two_parents = _add(cli, "north,n1\nsouth,n1\n")
    assert two_parents.exit_code == 2 and "two parents" in two_parents.stderr
    ledger_file = Path(cli.ledger.removeprefix("sqlite:///"))
    if ledger_file.exists():  # the second refusal came after --create opened the ledger: nothing registered
        with Ledger.open(cli.ledger) as ledger:
            assert ledger.dataset_names() == []
