"""``python -m dpsense.service token ...``: the first steward token is made on the host, printed once."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpsense.ledger import Ledger
from dpsense.service.cli import main


def test_token_create_list_and_revoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert main(["token", "create", "root", "--role", "steward", "--ledger", url]) == 0
    token = capsys.readouterr().out.strip()
    with Ledger.open(url) as ledger:
        identity = ledger.verify_token(token)
    assert identity is not None and (identity.analyst, identity.role) == ("root", "steward")
    assert main(["token", "list", "--ledger", url]) == 0
    listed = capsys.readouterr().out
    token_id = token.split("_")[1]
    assert token_id in listed and "active" in listed and token.split("_", 2)[2] not in listed
    assert main(["token", "revoke", token_id, "--ledger", url]) == 0
    assert main(["token", "revoke", token_id, "--ledger", url]) == 2
    with Ledger.open(url) as ledger:
        assert ledger.verify_token(token) is None


def test_a_bad_ledger_url_is_a_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["token", "list", "--ledger", "mysql://nope"]) == 2
    assert "error:" in capsys.readouterr().err


def test_token_create_with_an_expiry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert main(["token", "create", "dave", "--expires-in-s", "3600", "--ledger", url]) == 0
    token = capsys.readouterr().out.strip()
    with Ledger.open(url) as ledger:
        assert ledger.verify_token(token) is not None
        (info,) = ledger.tokens("dave")
        assert info.expires_at is not None
        expires_at = info.expires_at
    with Ledger.open(url, clock=lambda: expires_at) as later:
        assert later.verify_token(token) is None
    assert main(["token", "list", "--ledger", url]) == 0
    assert "\tactive\texpires 20" in capsys.readouterr().out
    for bad in ("0", "-1", "nan", "inf", "1e10"):
        assert main(["token", "create", "dave", "--expires-in-s", bad, "--ledger", url]) == 2
        assert "error:" in capsys.readouterr().err
