"""Shared helpers of the CLI system tests: a CSV source, a privacy policy file, specs, a CLI runner."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from click.testing import Result
from typer.testing import CliRunner

from dpsense.cli._app import app
from dpsense.ledger import Ledger
from tests.factories import policy_fields

REGIONS = ["north", "south", "east", "west"]

POLICY: dict[str, Any] = policy_fields()

SPEC: dict[str, Any] = {
    "dataset": "events",
    "epsilon": 1,
    "group_by": {"column": "region"},
    "max_groups_per_unit": 1,
    "aggregates": {
        "people": {"kind": "count_units"},
        "events": {"kind": "count", "max_rows_per_unit": 3},
        "mean_hours": {"kind": "mean", "column": "hours"},
        "median_age": {"kind": "median", "column": "age"},
    },
}


def write_csv(path: Path, persons: int = 400, rows_per_person: int = 3) -> Path:
    """Persons in 4 regions (person % 4), ``rows_per_person`` rows each, hours in [1, 12.7], ages 20-80."""
    lines = ["person_id,region,hours,age"]
    for row in range(persons * rows_per_person):
        person = row // rows_per_person
        hours = 1 + (row % 17) * 0.731
        lines.append(f"p{person},{REGIONS[person % 4]},{hours:.3f},{20 + (person * 7) % 61}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_yaml(path: Path, document: object) -> Path:
    path.write_text(yaml.safe_dump(document, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


@dataclass
class Cli:
    """Runs the typer app in-process against one ledger, as the analyst unless told otherwise."""

    root: Path
    ledger: str

    def __call__(self, *args: str, analyst: str = "alice") -> Result:
        env = {"DPSENSE_LEDGER": self.ledger, "DPSENSE_ANALYST": analyst, "COLUMNS": "200"}
        return CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)

    def steward(self, *args: str) -> Result:
        return self(*args, "--steward", analyst="steward")

    def spec(self, name: str, document: object) -> str:
        return str(write_yaml(self.root / f"{name}.yaml", document))

    def budget(self, dataset: str = "events") -> dict[str, Any]:
        result = self("budget", dataset, "--json")
        assert result.exit_code == 0, result.stderr
        doc: dict[str, Any] = json.loads(result.stdout)
        return doc

    def charges(self, dataset: str = "events") -> int:
        with Ledger.open(self.ledger) as ledger:
            return len(ledger.charges(dataset))

    def ledger_state(self) -> tuple[object, ...]:
        """The budget as ``budget --json`` shows it, the number of charges and of audit-log entries."""
        with Ledger.open(self.ledger) as ledger:
            entries = ledger.verify().entries
        return (self.budget(), self.charges(), entries)


def register_events(cli: Cli, *extra: str) -> None:
    """Register ``events`` from a CSV as the steward (extra options appended) and add analyst alice."""
    source = write_csv(cli.root / "events.csv")
    policy = write_yaml(cli.root / "policy.yaml", POLICY)
    result = cli.steward(
        "dataset", "add", "events",
        "--source", str(source), "--unit", "person_id",
        "--bound", "hours=0:24", "--bound", "age=0:120",
        "--keys", "region=north,south,east,west",
        "--max-rows-per-unit", "3",
        "--budget-epsilon", "10", "--budget-delta", "1e-8",
        "--privacy-policy", str(policy), "--create",
        *extra,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    added = cli.steward("analyst", "add", "alice")
    assert added.exit_code == 0, added.stderr


def exact(loss: dict[str, Any]) -> dict[str, str]:
    """A JSON privacy loss's exact parameters (its ``"n/d"`` strings), without its kind and approximations."""
    return {k: v for k, v in loss.items() if k not in ("kind", "approx")}


def records(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """A JSON release's rows as records (column name -> value)."""
    return [dict(zip(doc["columns"], row, strict=True)) for row in doc["rows"]]
