"""The steward's CLI commands (issue 17, item 8): datasets, budgets and API tokens without Python.

A user's report: "no steward commands for listing datasets, setting budgets or tokens in the CLI
(tokens need `python -m dpsense.service`)".
"""

from __future__ import annotations

import json

from dpsense.ledger import Ledger
from tests.system.cli.support import Cli


def test_datasets_are_listed_and_a_profile_is_shown(registered: Cli) -> None:
    listed = registered("dataset", "list", "--json")
    assert listed.exit_code == 0, listed.stderr
    (row,) = json.loads(listed.stdout)["datasets"]
    assert row["dataset"] == "events" and row["snapshots"] == ["v1"] and row["privacy_unit"] == "person_id"
    assert "events" in registered("dataset", "list").stdout
    shown = " ".join(registered("dataset", "show", "events").stdout.split())
    assert "privacy unit 'person_id'" in shown and "at most 3 rows per unit" in shown and "[0, 24]" in shown
    missing = registered("dataset", "show", "nope")
    assert missing.exit_code != 0 and "Traceback" not in missing.stderr


def test_a_steward_sets_the_total_and_an_analysts_sub_budget(registered: Cli) -> None:
    total = registered.steward("set-budget", "events", "--epsilon", "12", "--delta", "1e-8")
    assert total.exit_code == 0, total.stderr
    assert "cap ε=12" in total.stdout
    sub = registered.steward("set-budget", "events", "--epsilon", "0.75", "--for-analyst", "alice")
    assert sub.exit_code == 0, sub.stderr
    assert registered.budget()["cap"]["epsilon"] == "12/1"
    two = registered.steward("set-budget", "events", "--epsilon", "1", "--for-analyst", "a", "--family", "f")
    assert two.exit_code != 0 and "one scope" in two.stderr
    period = registered.steward("set-budget", "events", "--epsilon", "1", "--period", "10-20")
    assert period.exit_code != 0 and "--period takes START:END" in period.stderr
    analyst = registered("set-budget", "events", "--epsilon", "100")
    assert analyst.exit_code != 0 and "--steward" in analyst.stderr
    with Ledger.open(registered.ledger) as ledger:
        assert ledger.budget("events").cap.epsilon == 12


def test_tokens_are_created_listed_and_revoked_without_the_service_module(registered: Cli) -> None:
    created = registered.steward("token", "create", "carol", "--expires-in", "3600")
    assert created.exit_code == 0, created.stderr
    token = created.stdout.strip()
    with Ledger.open(registered.ledger) as ledger:
        identity = ledger.verify_token(token)
        assert identity is not None and identity.analyst == "carol"
    listed = json.loads(registered.steward("token", "list", "--json").stdout)["tokens"]
    (info,) = [t for t in listed if t["analyst"] == "carol"]
    assert info["state"] == "active" and token not in json.dumps(listed)  # never the secret
    assert registered.steward("token", "revoke", info["token_id"]).exit_code == 0
    again = registered.steward("token", "revoke", info["token_id"])
    assert again.exit_code != 0 and "no active token" in again.stderr
    with Ledger.open(registered.ledger) as ledger:
        assert ledger.verify_token(token) is None
    bad_role = registered.steward("token", "create", "dave", "--role", "admin")
    assert bad_role.exit_code != 0 and "--role is analyst or steward" in bad_role.stderr


def test_odd_numbers_in_steward_flags_are_one_line_errors(registered: Cli) -> None:
    """A review's findings: '²' passes str.isdigit, 20-digit periods overflow SQLite; both were tracebacks."""
    for args in (
        ("set-budget", "events", "--epsilon", "1", "--period", "²:5"),
        ("set-budget", "events", "--epsilon", "1", "--period", f"{10**20}:{10**20 + 5}"),
        ("dataset", "amend", "events", "--max-groups", "region=²"),
    ):
        result = registered.steward(*args)
        assert result.exit_code not in (0, 1) and "Traceback" not in result.stderr, (args, result.stderr)
        assert result.stderr.strip().startswith("error:") and len(result.stderr.strip().splitlines()) == 1
    count = registered.spec("count", {"dataset": "events", "epsilon": 0.5, "aggregates": {"n": {"kind": "count"}}})
    for target in ("n=abc", "n=0x10"):
        result = registered("preview", count, "--target", target)
        assert result.exit_code == 2 and "--target" in result.stderr and "Traceback" not in result.stderr, target
