"""The checked snapshot store (``dpsense.release._store``): registered once, attached without the source.

What a steward and an attacker would try: the source gone after registration, a DataFrame source, a
tampered manifest, a stored file modified in place with its size and times put back, a file moved
to another snapshot's place, a copied (restored) store, the full re-check on demand, no store at
all, and a store that cannot be written.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pandas as pd
import pytest

import dpsense as dp
from dpsense.core.errors import InvalidData, UsageError
from dpsense.ledger import Ledger
from dpsense.release._store import SnapshotStore, declarations_digest
from tests.system.release.support import planted, register


def _ledger(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def _source(tmp_path: Path, frame: pd.DataFrame | None = None) -> Path:
    path = tmp_path / "events.parquet"
    (planted() if frame is None else frame).to_parquet(path)
    return path


def _register(tmp_path: Path, source: object, name: str = "events", snapshot: str = "v1") -> None:
    with dp.Session.open(_ledger(tmp_path), analyst="steward", role="steward") as steward:
        register(steward, planted(), name, source=source, snapshot=snapshot)


def _count(tmp_path: Path, *, epsilon: float = 1.0, snapshot: str | None = None) -> int:
    with dp.Session.open(_ledger(tmp_path), analyst="steward") as session:
        events = session.dataset("events", snapshot=snapshot)
        release = session.release(events.query().agg(n=dp.count()), epsilon=epsilon)
        return int(release.table["n"][0])


def _files(tmp_path: Path, name: str = "events", snapshot: str = "v1") -> tuple[Path, Path]:
    with Ledger.open(_ledger(tmp_path)) as ledger:
        key, profile = ledger.fingerprint_key(), ledger.profile(name, snapshot).profile
    return SnapshotStore(tmp_path / "ledger.db.store").files(name, snapshot, key, declarations_digest(profile))


def test_registration_stores_an_owner_only_snapshot_that_attaches_without_its_source(tmp_path: Path) -> None:
    source = _source(tmp_path)
    _register(tmp_path, source)
    data, manifest = _files(tmp_path)
    assert stat.S_IMODE((tmp_path / "ledger.db.store").stat().st_mode) == 0o700
    assert stat.S_IMODE(data.stat().st_mode) == stat.S_IMODE(manifest.stat().st_mode) == 0o600
    source.unlink()  # an attach that read the source would now fail
    assert abs(_count(tmp_path, epsilon=2.0) - 1800) < 200


def test_a_dataframe_registration_attaches_without_passing_the_frame_again(tmp_path: Path) -> None:
    _register(tmp_path, planted())
    assert abs(_count(tmp_path, epsilon=2.0) - 1800) < 200


def test_a_tampered_manifest_falls_back_to_the_source_and_its_fingerprint(tmp_path: Path) -> None:
    source = _source(tmp_path)
    _register(tmp_path, source)
    _, manifest = _files(tmp_path)
    body = json.loads(manifest.read_text())
    body["columns"] = [c for c in body["columns"] if c[0] != "age"]  # a forged schema: the MAC no longer holds
    manifest.write_text(json.dumps(body))
    assert abs(_count(tmp_path, epsilon=2.0) - 1800) < 200  # read from the source, fingerprint checked
    with dp.Session.open(_ledger(tmp_path), analyst="steward") as session:
        assert session.verify_snapshot("events")  # the fallback stored a checked file again
    source.unlink()
    manifest.write_text(json.dumps(body))
    with pytest.raises(InvalidData, match="does not exist"):
        _count(tmp_path)


def test_a_file_modified_in_place_with_its_size_and_times_put_back_is_not_used(tmp_path: Path) -> None:
    source = _source(tmp_path)
    _register(tmp_path, source)
    data, _ = _files(tmp_path)
    before = data.stat()
    with data.open("r+b") as handle:  # one byte of the file, same size
        handle.seek(before.st_size // 2)
        byte = handle.read(1)
        handle.seek(before.st_size // 2)
        handle.write(bytes([byte[0] ^ 0xFF]))
    os.utime(data, ns=(before.st_atime_ns, before.st_mtime_ns))
    with dp.Session.open(_ledger(tmp_path), analyst="steward") as session:
        assert not session.verify_snapshot("events")
    source.unlink()
    with pytest.raises(InvalidData, match="does not exist"):  # the changed ctime forced the checksum: refused
        _count(tmp_path)


def test_a_file_moved_into_another_snapshots_place_is_not_used(tmp_path: Path) -> None:
    source = _source(tmp_path)
    _register(tmp_path, source)
    other = tmp_path / "other.parquet"
    planted(persons=100).to_parquet(other)
    _register(tmp_path, other, snapshot="v2")
    first, first_manifest = _files(tmp_path, snapshot="v1")
    second, second_manifest = _files(tmp_path, snapshot="v2")
    shutil.copyfile(second, first)
    shutil.copyfile(second_manifest, first_manifest)  # names v2: refused for v1
    source.unlink()
    with pytest.raises(InvalidData, match="does not exist"):
        _count(tmp_path, snapshot="v1")
    assert abs(_count(tmp_path, epsilon=2.0, snapshot="v2") - 300) < 200


def test_a_copied_store_is_checked_once_by_its_checksum_and_then_trusted_again(tmp_path: Path) -> None:
    source = _source(tmp_path)
    _register(tmp_path, source)
    data, manifest = _files(tmp_path)
    shutil.copyfile(data, data.with_suffix(".copy"))
    os.replace(data.with_suffix(".copy"), data)  # a restore: new inode, new times, same bytes
    source.unlink()
    assert abs(_count(tmp_path, epsilon=2.0) - 1800) < 200
    identity = json.loads(manifest.read_text())["identity"]
    st = data.stat()
    assert identity == [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]  # resealed with the new identity


def test_no_store_when_asked_and_none_beside_an_in_memory_or_postgres_ledger(tmp_path: Path) -> None:
    source = _source(tmp_path)
    with dp.Session.open(_ledger(tmp_path), analyst="steward", role="steward", store=False) as steward:
        register(steward, planted(), source=source)
    assert not (tmp_path / "ledger.db.store").exists()
    with dp.Session.open(_ledger(tmp_path), analyst="steward", store=False) as session:
        assert not session.verify_snapshot("events")
    assert SnapshotStore.beside("sqlite:///:memory:") is None
    assert SnapshotStore.beside("postgresql://postgres@127.0.0.1/test") is None
    assert SnapshotStore.beside("sqlite:////x/l.db") == SnapshotStore(Path("/x/l.db.store"))
    with pytest.raises(UsageError, match="store is a directory path"):
        dp.Session.open(_ledger(tmp_path), analyst="steward", store=3)  # type: ignore[arg-type]


def test_a_named_store_directory_serves_a_later_session(tmp_path: Path) -> None:
    source = _source(tmp_path)
    shared = tmp_path / "shared-store"
    with dp.Session.open(_ledger(tmp_path), analyst="steward", role="steward", store=shared) as steward:
        register(steward, planted(), source=source)
    source.unlink()
    with dp.Session.open(_ledger(tmp_path), analyst="steward", store=str(shared)) as session:
        assert session.verify_snapshot("events")
        events = session.dataset("events")
        assert abs(int(session.release(events.query().agg(n=dp.count()), epsilon=2).table["n"][0]) - 1800) < 200


def test_an_unwritable_store_refuses_the_registration_before_the_ledger_records_it(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the store directory would go")
    with dp.Session.open(_ledger(tmp_path), analyst="steward", role="steward", store=blocked) as steward:
        with pytest.raises(UsageError, match="snapshot store beside the ledger could not be written"):
            register(steward, planted(), source=_source(tmp_path))
        assert steward.datasets() == []


def test_two_ledgers_sharing_a_store_directory_keep_their_own_files(tmp_path: Path) -> None:
    """Names are keyed per ledger: the same dataset and snapshot in two ledgers are two files, never one."""
    shared = tmp_path / "shared"
    sources = {}
    for name, persons in (("a", 600), ("b", 300)):
        sources[name] = tmp_path / f"{name}.parquet"
        planted(persons=persons).to_parquet(sources[name])
        url = f"sqlite:///{tmp_path / name}.db"
        with dp.Session.open(url, analyst="steward", role="steward", store=shared) as steward:
            register(steward, planted(), source=sources[name])
    assert len(list(shared.glob("*.duckdb"))) == 2
    assert not any("events" in f.name for f in shared.iterdir())  # names do not show the datasets
    for name, persons in (("a", 600), ("b", 300)):
        sources[name].unlink()
        with dp.Session.open(f"sqlite:///{tmp_path / name}.db", analyst="steward", store=shared) as session:
            events = session.dataset("events")
            released = session.release(events.query().agg(n=dp.count()), epsilon=2)
            assert abs(int(released.table["n"][0]) - 3 * persons) < 200


def test_a_write_ahead_log_beside_a_stored_file_refuses_it(tmp_path: Path) -> None:
    """DuckDB replays ``<file>.wal`` even on a read-only attach: data the checksum never saw (a review's attack)."""
    source = _source(tmp_path)
    _register(tmp_path, source)
    data, _ = _files(tmp_path)
    with dp.Session.open(_ledger(tmp_path), analyst="steward") as session:
        assert session.verify_snapshot("events")
    Path(f"{data}.wal").write_bytes(b"not the registered data")
    with dp.Session.open(_ledger(tmp_path), analyst="steward") as session:
        assert not session.verify_snapshot("events")
    source.unlink()
    with pytest.raises(InvalidData, match="does not exist"):  # not attached from the store: the source is needed
        _count(tmp_path)


def test_a_file_prepared_under_other_declarations_is_never_attached(tmp_path: Path) -> None:
    """A copied ledger (same secret) registering the same data under other bounds into a shared store."""
    shared = tmp_path / "shared"
    source = _source(tmp_path)
    prod = f"sqlite:///{tmp_path / 'prod.db'}"
    with dp.Session.open(prod, analyst="steward", role="steward", store=shared) as steward:
        bounds = {"hours": (0, 16), "age": (0, 120)}
        register(steward, planted(), source=source, bounds=bounds, policies={"hours": "clamp"})
    shutil.copyfile(tmp_path / "prod.db", tmp_path / "staging.db")
    staging = f"sqlite:///{tmp_path / 'staging.db'}"
    with dp.Session.open(staging, analyst="steward", role="steward", store=shared) as steward:
        steward.amend_dataset("events", bounds={"hours": (0, 24)}, policies={"hours": "refuse"}, snapshot="v1b")
    assert len(list(shared.glob("*.duckdb"))) == 2  # one file per declarations
    source.unlink()
    for url, snapshot in ((prod, "v1"), (staging, "v1b")):
        with dp.Session.open(url, analyst="steward", store=shared) as session:
            assert session.verify_snapshot("events", snapshot=snapshot)
            assert session.dataset("events", snapshot=snapshot).snapshot == snapshot
