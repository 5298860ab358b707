"""Bad input is refused with exit code 2, one red line naming the field or rule, and no ledger change."""

from __future__ import annotations

from typing import Any

import pytest

from dpsense.cli._errors import EXIT_BUDGET, EXIT_CHARGED, EXIT_REFUSED, exit_code
from dpsense.core.errors import BudgetExhausted, ChargedFailure, InvalidBounds
from dpsense.ledger import Ledger
from tests.system.cli.support import POLICY, SPEC, Cli, write_csv, write_yaml

COUNT = {"dataset": "events", "epsilon": 1, "aggregates": {"n": {"kind": "count"}}}


def _without(doc: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != key}


BAD_SPECS: dict[str, tuple[object, list[str]]] = {
    "epsilon typo": (_without(COUNT, "epsilon") | {"epsilonn": 1}, ["'epsilonn'", "did you mean 'epsilon'"]),
    "aggregates typo": (
        _without(COUNT, "aggregates") | {"agregates": COUNT["aggregates"]},
        ["'agregates'", "did you mean 'aggregates'"],
    ),
    "field typo inside an aggregate": (
        COUNT | {"aggregates": {"m": {"kind": "mean", "colum": "hours"}}},
        ["aggregates.m", "'colum'", "did you mean 'column'"],
    ),
    "unknown aggregate kind": (
        COUNT | {"aggregates": {"n": {"kind": "cuont"}}},
        ["aggregates.n.kind", "unknown aggregate kind (got 'cuont')", "did you mean 'count'"],
    ),
    "a field the kind does not use": (
        COUNT | {"aggregates": {"m": {"kind": "mean", "column": "hours", "q": 0.5}}},
        ["aggregates.m", "mean does not use 'q'"],
    ),
    "a required field missing": (
        COUNT | {"aggregates": {"p": {"kind": "quantile", "column": "age"}}},
        ["aggregates.p", "quantile needs 'q'"],
    ),
    "epsilon missing": (_without(COUNT, "epsilon"), ["'epsilon' is required", "add epsilon:"]),
    "epsilon not a number": (COUNT | {"epsilon": True}, ["epsilon", "must be a number"]),
    "unknown column": (COUNT | {"aggregates": {"m": {"kind": "mean", "column": "weight"}}}, ["weight", "use one of"]),
    "epsilon zero": (COUNT | {"epsilon": 0}, ["epsilon", "> 0"]),
    "delta one": (
        COUNT | {"delta": 1, "aggregates": {"n": {"kind": "count", "mechanism": "gaussian"}}},
        ["delta", "[0, 1)"],
    ),
    "reversed bounds": (
        COUNT | {"aggregates": {"m": {"kind": "mean", "column": "hours", "bounds": [24, 0]}}},
        ["aggregates.m", "reversed", "swap"],
    ),
    "over the per-release cap": (COUNT | {"epsilon": 3}, ["per-release cap", "epsilon <= 2"]),
    "unknown filter op": (
        COUNT | {"filters": [{"column": "age", "op": "=>", "value": 18}]},
        ["filters[0]", "'=>'", "use one of"],
    ),
    "not a mapping": (["dataset", "events"], ["release spec", "valid dictionary"]),
}


@pytest.mark.parametrize("case", sorted(BAD_SPECS))
def test_a_bad_release_spec_is_refused_and_the_ledger_is_unchanged(registered: Cli, case: str) -> None:
    document, fragments = BAD_SPECS[case]
    before = registered.ledger_state()
    result = registered("release", registered.spec("bad", document), "--json")
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    line = result.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line and "Traceback" not in line
    for fragment in fragments:
        assert fragment in line
    assert registered.ledger_state() == before


def test_malformed_yaml_and_a_missing_file_are_refused(registered: Cli) -> None:
    path = registered.root / "broken.yaml"
    path.write_text("dataset: events\naggregates: {n: {kind: count}\n", encoding="utf-8")
    broken = registered("release", str(path))
    assert broken.exit_code == 2 and "not valid YAML at line" in broken.stderr
    missing = registered("release", str(registered.root / "nosuch.yaml"))
    assert missing.exit_code == 2 and "does not exist" in missing.stderr


def test_a_preview_of_a_bad_spec_is_refused_too(registered: Cli) -> None:
    result = registered("preview", registered.spec("bad", COUNT | {"epsilon": 3}))
    assert result.exit_code == 2 and "per-release cap" in result.stderr


BAD_REGISTRATIONS: dict[str, tuple[list[str], list[str]]] = {
    "bound without a colon": (["--bound", "hours=0-24"], ["--bound", "COLUMN=LOWER:UPPER"]),
    "reversed bounds": (["--bound", "hours=24:0"], ["reversed", "swap"]),
    "unknown policy": (["--policy", "hours=clmap"], ["--policy", "did you mean 'clamp'"]),
    "unknown kind": (["--kind", "hours=pointt"], ["--kind", "did you mean 'point'"]),
    "unknown unit column": (["--unit", "patient"], ["patient"]),
    "cap above the budget": (["--budget-epsilon", "1"], ["per-release ε cap", "at most 1"]),
    "delta near 1/population": (["--budget-delta", "1e-6"], ["δ", "delta <="]),
}


@pytest.mark.parametrize("case", sorted(BAD_REGISTRATIONS))
def test_a_bad_registration_is_refused_and_registers_nothing(cli: Cli, case: str) -> None:
    options, fragments = BAD_REGISTRATIONS[case]
    source = write_csv(cli.root / "events.csv")
    policy = write_yaml(cli.root / "policy.yaml", POLICY)
    base = {"--unit": "person_id", "--budget-epsilon": "10"}
    for flag, value in zip(options[::2], options[1::2], strict=True):
        base[flag] = value
    pairs = [item for flag, value in base.items() for item in (flag, value)]
    if "--bound" not in base:
        pairs += ["--bound", "hours=0:24"]
    result = cli.steward(
        "dataset", "add", "events", "--source", str(source), "--privacy-policy", str(policy), "--create", *pairs
    )
    assert result.exit_code == 2, (result.stdout, result.stderr)
    for fragment in fragments:
        assert fragment in result.stderr
    with Ledger.open(cli.ledger) as ledger:
        assert ledger.dataset_names() == []


def test_a_privacy_policy_with_a_typo_is_refused(cli: Cli) -> None:
    policy = write_yaml(cli.root / "policy.yaml", _without(POLICY, "approved_by") | {"aproved_by": "me"})
    result = cli.steward(
        "dataset", "add", "events", "--source", str(write_csv(cli.root / "e.csv")), "--unit", "person_id",
        "--budget-epsilon", "10", "--privacy-policy", str(policy), "--create",
    )  # fmt: skip
    assert result.exit_code == 2
    assert "privacy policy" in result.stderr and "did you mean 'approved_by'" in result.stderr


def test_steward_commands_need_the_steward_flag(registered: Cli) -> None:
    result = registered("analyst", "add", "bob")
    assert result.exit_code == 2 and "--steward" in result.stderr


def test_an_unknown_analyst_cannot_release(registered: Cli) -> None:
    before = registered.ledger_state()
    result = registered("release", registered.spec("spec", SPEC), analyst="mallory")
    assert result.exit_code == 2 and "analyst" in result.stderr
    assert registered.ledger_state() == before


def test_exit_codes_follow_the_error_tree() -> None:
    assert exit_code(BudgetExhausted("dataset total", "ε=1", "ε=0")) == EXIT_BUDGET == 3
    assert exit_code(ChargedFailure("r1")) == EXIT_CHARGED == 4
    assert exit_code(InvalidBounds("bounds are reversed", (2, 1), "swap them")) == EXIT_REFUSED == 2
