"""`dpsense collection`: register, ingest a JSON-lines file of device reports, estimate, show (issue 19).

Also: a rerun of the same ingest stores nothing twice; a client past its budget is listed by line;
bad files are refused in the CLI's words (the flag, the line) with nothing stored; the `main` entry
point knows the sub-command (it is registered when `dpsense.cli.main` runs).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpsense.cli import main
from dpsense.device import KrrClient, KrrScheme
from dpsense.device.testing import deterministic_entropy
from dpsense.ledger import Ledger
from tests.system.cli.support import Cli

WORDS = ["red", "green", "blue"]


def _files(root: Path, count: int, seed: int) -> tuple[Path, Path, Path]:
    scheme = KrrScheme(dictionary=WORDS, epsilon="3")
    (root / "scheme.json").write_text(json.dumps(scheme.to_json()))
    client = KrrClient(scheme)
    with deterministic_entropy(seed):
        lines = [
            json.dumps({"client_id": f"d{i}", "report": client.report(WORDS[i % 3] if i % 4 else "red")})
            for i in range(count)
        ]
    (root / "reports.jsonl").write_text("\n".join(lines) + "\n")
    (root / "words.txt").write_text("red\ngreen\n\nblue\n")
    return root / "scheme.json", root / "reports.jsonl", root / "words.txt"


def test_add_ingest_estimate_show(cli: Cli) -> None:
    scheme, reports, words = _files(cli.root, 900, 4)
    added = cli.steward(
        "collection", "add", "colours", "--scheme", str(scheme), "--max-reports-per-client", "1", "--create"
    )
    assert added.exit_code == 0, added.stderr
    assert "at most 1 report(s) per client" in added.stdout
    assert cli.steward("analyst", "add", "alice").exit_code == 0
    first = cli("collection", "ingest", "colours", str(reports), "--batch-id", "day1", "--json")
    assert first.exit_code == 0, first.stderr
    assert json.loads(first.stdout) == {"accepted": 900, "refused": [], "replayed_batches": 0}
    again = cli("collection", "ingest", "colours", str(reports), "--batch-id", "day1")
    assert again.exit_code == 0 and "accepted 900, refused 0 (1 batch(es) were stored already" in again.stdout
    over = cli("collection", "ingest", "colours", str(reports), "--batch-id", "day2", "--json")
    refused = json.loads(over.stdout)["refused"]
    assert json.loads(over.stdout)["accepted"] == 0 and refused[:2] == [
        {"line": 1, "reason": "client_budget"},
        {"line": 2, "reason": "client_budget"},
    ]
    estimate = cli("collection", "estimate", "colours", "--candidates", str(words), "--json")
    assert estimate.exit_code == 0, estimate.stderr
    doc = json.loads(estimate.stdout)
    assert [row[0] for row in doc["rows"]] == WORDS and doc["charged"]["epsilon"] == "0/1"
    table = cli("collection", "estimate", "colours", "--candidates", str(words), "--explain")
    assert "cached: the stored estimate" in table.stdout and "no central budget" in table.stdout
    shown = json.loads(cli("collection", "show", "colours", "--json").stdout)
    assert (shown["reports"], shown["clients"], shown["guarantee"]["epsilon_per_report"]) == (900, 900, "3")
    history = cli("history", "colours", "--json")
    assert history.exit_code == 0 and len(json.loads(history.stdout)["releases"]) == 1
    with Ledger.open(cli.ledger) as ledger:
        assert ledger.verify().ok


def test_bad_files_and_flags_are_refused_in_the_cli_words(cli: Cli) -> None:
    scheme, reports, _ = _files(cli.root, 10, 5)
    bad_scheme = cli.root / "bad.json"
    bad_scheme.write_text('{"scheme": "krr", "version": 1, "dictionary": ["a"], "epsilon": "3"}')
    refused = cli.steward(
        "collection", "add", "x", "--scheme", str(bad_scheme), "--max-reports-per-client", "1", "--create"
    )
    assert refused.exit_code == 2 and "dictionary" in refused.stderr
    not_json = cli.root / "not.json"
    not_json.write_text("{")
    assert (
        "--scheme"
        in cli.steward(
            "collection", "add", "x", "--scheme", str(not_json), "--max-reports-per-client", "1", "--create"
        ).stderr
    )
    analyst = cli("collection", "add", "x", "--scheme", str(scheme), "--max-reports-per-client", "1", "--create")
    assert analyst.exit_code == 2 and "--steward" in analyst.stderr
    assert (
        cli.steward(
            "collection", "add", "c", "--scheme", str(scheme), "--max-reports-per-client", "2", "--create"
        ).exit_code
        == 0
    )
    broken = cli.root / "broken.jsonl"
    broken.write_text(reports.read_text().splitlines()[0] + "\nnot json\n")
    out = cli("collection", "ingest", "c", str(broken), "--batch-id", "b")
    assert out.exit_code == 2 and "line 2" in out.stderr
    hostile = cli.root / "hostile.jsonl"
    hostile.write_text(json.dumps({"client_id": "d1", "report": {"index": 7}}) + "\n")
    out = cli("collection", "ingest", "c", str(hostile), "--batch-id", "b")
    assert out.exit_code == 2 and "REPORTS lines 1-1" in out.stderr and "index" in out.stderr
    both = cli("collection", "estimate", "c", "--top", "2", "--candidates", str(reports))
    assert both.exit_code == 2 and "candidates or top" in both.stderr
    assert cli("collection", "show", "nope").exit_code == 2
    with Ledger.open(cli.ledger) as ledger:
        assert ledger.collection("c").batches == 0  # nothing stored by any refusal


def test_the_entry_point_knows_the_collection_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["collection", "--help"]) == 0
    assert "ingest" in capsys.readouterr().out
