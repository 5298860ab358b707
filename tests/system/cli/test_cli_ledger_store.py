"""A missing ledger is an error unless ``--create``; ``--store``; ``dpsense dataset verify`` (issue 17).

A mistyped ``--ledger sqlite:///typo.db`` used to start an empty ledger silently; now every command
refuses a SQLite file that does not exist (exit 5, one line naming the flag, nothing created) unless
``dataset add`` or ``analyst add`` is given ``--create``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from dpsense.cli._app import app
from dpsense.cli._errors import EXIT_REFUSED, EXIT_TAMPERED, EXIT_UNREADABLE
from dpsense.ledger import Ledger
from dpsense.release._store import SnapshotStore, declarations_digest
from tests.system.cli.support import POLICY, SPEC, Cli, write_csv, write_yaml


def _typo(tmp_path: Path) -> Cli:
    return Cli(tmp_path, f"sqlite:///{tmp_path / 'typo.db'}")


def _nothing_created(tmp_path: Path) -> None:
    assert not (tmp_path / "typo.db").exists() and not (tmp_path / "typo.db.store").exists()


def _one_line(result: Result) -> str:
    line = result.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line and "Traceback" not in line, result.stderr
    return line


def _add_args(root: Path) -> list[str]:
    source = write_csv(root / "events.csv", persons=40)
    policy = write_yaml(root / "policy.yaml", POLICY)
    return [
        "dataset", "add", "events", "--source", str(source), "--unit", "person_id", "--bound", "hours=0:24",
        "--max-rows-per-unit", "3", "--budget-epsilon", "10", "--privacy-policy", str(policy),
    ]  # fmt: skip


def _stored_file(ledger_db: Path, snapshot: str = "v1") -> Path:
    with Ledger.open(f"sqlite:///{ledger_db}") as ledger:
        key, profile = ledger.fingerprint_key(), ledger.profile("events", snapshot).profile
    data, _ = SnapshotStore(Path(f"{ledger_db}.store")).files("events", snapshot, key, declarations_digest(profile))
    return data


def _flip_a_byte(path: Path) -> None:
    with path.open("r+b") as handle:
        handle.seek(path.stat().st_size // 2)
        byte = handle.read(1)
        handle.seek(-1, 1)
        handle.write(bytes([byte[0] ^ 0xFF]))


COMMANDS: dict[str, list[str]] = {
    "budget": ["budget", "events"],
    "history": ["history", "events", "--json"],
    "sql": ["sql", "SELECT COUNT(*) FROM events", "--epsilon", "0.5"],
    "resolve-stale": ["resolve-stale", "--steward"],
    "analyst add": ["analyst", "add", "bob", "--steward"],
    "dataset verify": ["dataset", "verify", "events", "--steward"],
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_missing_ledger_is_refused_and_nothing_is_created(tmp_path: Path, name: str) -> None:
    cli = _typo(tmp_path)
    result = cli(*COMMANDS[name])
    assert result.exit_code == EXIT_UNREADABLE == 5, (result.stdout, result.stderr)
    line = _one_line(result)
    assert "the ledger file does not exist" in line and "typo.db" in line and "--ledger" in line
    _nothing_created(tmp_path)


@pytest.mark.parametrize("command", ["release", "preview"])
def test_a_release_or_preview_on_a_missing_ledger_is_refused_too(tmp_path: Path, command: str) -> None:
    cli = _typo(tmp_path)
    result = cli(command, cli.spec("spec", SPEC))
    assert result.exit_code == EXIT_UNREADABLE, (result.stdout, result.stderr)
    assert "the ledger file does not exist" in _one_line(result)
    _nothing_created(tmp_path)


def test_dataset_add_on_a_missing_ledger_names_create_and_creates_nothing(tmp_path: Path) -> None:
    cli = _typo(tmp_path)
    result = cli.steward(*_add_args(tmp_path))
    assert result.exit_code == EXIT_UNREADABLE, (result.stdout, result.stderr)
    line = _one_line(result)
    assert "--ledger" in line and "pass --create to start a new ledger" in line
    _nothing_created(tmp_path)
    added = cli.steward("analyst", "add", "alice")
    assert added.exit_code == EXIT_UNREADABLE and "--create" in added.stderr
    _nothing_created(tmp_path)


def test_create_starts_a_new_ledger(tmp_path: Path) -> None:
    cli = _typo(tmp_path)
    added = cli.steward(*_add_args(tmp_path), "--create")
    assert added.exit_code == 0, added.stderr
    assert "'events' snapshot 'v1': registered" in added.stdout
    assert _stored_file(tmp_path / "typo.db").is_file()  # the default store beside the ledger
    again = cli.steward("analyst", "add", "alice", "--create")  # an existing ledger: --create changes nothing
    assert again.exit_code == 0, again.stderr
    with Ledger.open(cli.ledger) as ledger:
        assert ledger.dataset_names() == ["events"] and ledger.verify().ok
    assert cli("budget", "events").exit_code == 0  # now it exists: no --create needed
    other = Cli(tmp_path, f"sqlite:///{tmp_path / 'team.db'}")
    assert other.steward("analyst", "add", "alice", "--create").exit_code == 0
    assert (tmp_path / "team.db").is_file()


def test_create_needs_an_existing_folder(tmp_path: Path) -> None:
    cli = Cli(tmp_path, f"sqlite:///{tmp_path / 'nosuch' / 'ledger.db'}")
    result = cli.steward("analyst", "add", "alice", "--create")
    assert result.exit_code == EXIT_REFUSED and "folder must exist" in _one_line(result)
    assert not (tmp_path / "nosuch").exists()


def test_dataset_verify_exits_0_for_the_stored_snapshot_and_1_once_a_byte_changed(registered: Cli) -> None:
    ok = registered.steward("dataset", "verify", "events")
    assert ok.exit_code == 0, ok.stderr
    assert "the stored snapshot 'v1' of 'events' is the registered one (checked in full)" in ok.stdout
    assert registered.steward("dataset", "verify", "events", "--snapshot", "v1").exit_code == 0
    _flip_a_byte(_stored_file(registered.root / "ledger.db"))
    bad = registered.steward("dataset", "verify", "events")
    assert bad.exit_code == EXIT_TAMPERED == 1, (bad.stdout, bad.stderr)
    line = _one_line(bad)
    assert "missing or fails its check" in line and "the next attach reads the source again" in line
    assert bad.stdout == ""


def test_dataset_verify_refuses_an_analyst_and_an_unknown_dataset(registered: Cli) -> None:
    analyst = registered("dataset", "verify", "events")
    assert analyst.exit_code == EXIT_REFUSED and "--steward" in _one_line(analyst)
    unknown = registered.steward("dataset", "verify", "nosuch")
    assert unknown.exit_code == EXIT_REFUSED and "nosuch" in _one_line(unknown)
    missing = registered.steward("dataset", "verify", "events", "--store", str(registered.root / "empty"))
    assert missing.exit_code == EXIT_TAMPERED and "missing or fails its check" in missing.stderr


def test_store_names_the_snapshot_directory_of_every_session(tmp_path: Path) -> None:
    cli = Cli(tmp_path, f"sqlite:///{tmp_path / 'ledger.db'}")
    shared = tmp_path / "shared"
    added = cli.steward(*_add_args(tmp_path), "--create", "--store", str(shared))
    assert added.exit_code == 0, added.stderr
    assert not (tmp_path / "ledger.db.store").exists()  # not the default beside the ledger
    with Ledger.open(cli.ledger) as ledger:
        key, digest = ledger.fingerprint_key(), declarations_digest(ledger.profile("events").profile)
    assert SnapshotStore(shared).files("events", "v1", key, digest)[0].is_file()
    assert cli.steward("dataset", "verify", "events", "--store", str(shared)).exit_code == 0
    assert cli.steward("dataset", "verify", "events").exit_code == EXIT_TAMPERED  # nothing beside the ledger
    env = {"DPSENSE_LEDGER": cli.ledger, "DPSENSE_ANALYST": "steward", "DPSENSE_STORE": str(shared)}
    from_env = CliRunner().invoke(app, ["dataset", "verify", "events", "--steward"], env=env, catch_exceptions=False)
    assert from_env.exit_code == 0, from_env.stderr
    _flip_a_byte(SnapshotStore(shared).files("events", "v1", key, digest)[0])
    assert cli.steward("dataset", "verify", "events", "--store", str(shared)).exit_code == EXIT_TAMPERED


def test_a_postgres_ledger_has_no_default_store_to_verify(tmp_path: Path) -> None:
    cli = Cli(tmp_path, "postgresql://nobody@127.0.0.1:1/none")
    result = cli.steward("dataset", "verify", "events")
    assert result.exit_code == EXIT_REFUSED and "--store" in _one_line(result)
