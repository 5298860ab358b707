"""``dpsense verify-log`` and ``dpsense checkpoint``: exit codes, anchors, MAC-signed checkpoints (issue 14)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.system.cli.support import Cli


def _edit(cli: Cli, sql: str) -> None:
    with closing(sqlite3.connect(cli.ledger.removeprefix("sqlite:///"))) as db, db:
        db.execute(sql)


def test_exit_codes_are_ok_tampered_and_unreadable(registered: Cli, tmp_path: Path) -> None:
    ok = registered("verify-log", "--json")
    assert ok.exit_code == 0, ok.stderr
    assert json.loads(ok.stdout)["tables_checked"] is True
    _edit(registered, "UPDATE budgets SET cap_a = '1000/1'")
    tampered = registered("verify-log")
    assert tampered.exit_code == 1 and tampered.stdout == ""
    assert "its cap or accounting mode differs from the chain" in tampered.stderr
    document = json.loads(registered("verify-log", "--json").stdout)
    assert document["ok"] is False and document["problems"]
    for name, content in {"empty": b"", "garbage": b"x" * 4096}.items():
        path = tmp_path / f"{name}.db"
        path.write_bytes(content)
        result = registered("verify-log", "--ledger", f"sqlite:///{path}")
        assert result.exit_code == 5 and result.stderr.startswith("error: ") and "Traceback" not in result.stderr
        assert path.read_bytes() == content  # never turned into an empty ledger
    missing = tmp_path / "missing.db"
    result = registered("verify-log", "--ledger", f"sqlite:///{missing}")
    assert result.exit_code == 5 and "does not exist" in result.stderr and not missing.exists()


def test_a_checkpoint_catches_a_cut_history(registered: Cli, tmp_path: Path) -> None:
    checkpoint = tmp_path / "head.json"
    written = registered("checkpoint", "--out", str(checkpoint))
    assert written.exit_code == 0, written.stderr
    doc = json.loads(checkpoint.read_text())
    assert doc["format"] == "dpsense-audit-checkpoint/1" and "mac" not in doc
    assert registered("verify-log", "--checkpoint", str(checkpoint)).exit_code == 0
    assert registered("verify-log", "--expected-head", f"{doc['seq']}:{doc['head']}").exit_code == 0
    _edit(registered, f"DELETE FROM audit_log WHERE seq = {doc['seq']}")
    _edit(registered, f"UPDATE audit_head SET seq = {doc['seq'] - 1}")
    cut = registered("verify-log", "--checkpoint", str(checkpoint))
    assert cut.exit_code == 1 and "ledger tampered" in cut.stderr


def test_a_signed_checkpoint_needs_its_key_and_refuses_a_forgery(registered: Cli, tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_bytes(bytes(range(32)))
    checkpoint = tmp_path / "head.json"
    assert registered("checkpoint", "--out", str(checkpoint), "--key-file", str(key)).exit_code == 0
    assert "mac" in json.loads(checkpoint.read_text())
    assert registered("verify-log", "--checkpoint", str(checkpoint), "--key-file", str(key)).exit_code == 0
    no_key = registered("verify-log", "--checkpoint", str(checkpoint))
    assert no_key.exit_code == 2 and "--key-file" in no_key.stderr
    forged = json.loads(checkpoint.read_text()) | {"seq": 1}
    checkpoint.write_text(json.dumps(forged))
    refused = registered("verify-log", "--checkpoint", str(checkpoint), "--key-file", str(key))
    assert refused.exit_code == 2 and "MAC does not match" in refused.stderr


@pytest.mark.parametrize(
    ("args", "rule"),
    [
        (["--expected-head", "nothex"], "SEQ:HASH or HASH"),
        (["--expected-head", "1:" + "a" * 63], "SEQ:HASH or HASH"),
        (["--key-file", "k"], "--key-file checks a checkpoint"),
        (["--checkpoint", "nope.json"], "--checkpoint cannot be read"),
    ],
)
def test_bad_options_exit_2_with_one_line(registered: Cli, args: list[str], rule: str) -> None:
    result = registered("verify-log", *args)
    assert result.exit_code == 2 and rule in result.stderr
    assert result.stderr.strip().count("\n") == 0 and "Traceback" not in result.stderr


def test_a_tampered_ledger_gets_no_checkpoint(registered: Cli, tmp_path: Path) -> None:
    _edit(registered, "UPDATE budgets SET cap_a = '1000/1'")
    result = registered("checkpoint", "--out", str(tmp_path / "head.json"))
    assert result.exit_code == 1 and not (tmp_path / "head.json").exists()
