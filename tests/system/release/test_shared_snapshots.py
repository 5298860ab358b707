"""``SharedSnapshots``: Sessions of many analysts and threads read one copy of the current snapshot.

On a real SQLite ledger and DuckDB: concurrent releases by Sessions on four engines (one per thread)
load the snapshot once and leave no temporary table; a new snapshot is served from the next attach,
an older one is refused (``SnapshotNotCurrent``) and dropped once no engine holds it; a failed load
leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

import dpsense as dp
from dpsense.core.errors import SnapshotNotCurrent, UsageError
from dpsense.ledger import Ledger
from dpsense.release import SharedSnapshots
from tests.system.release.support import planted, register

ANALYSTS = ("alice", "bob", "carol", "dave")


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[str, Path, SharedSnapshots]]:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    source = tmp_path / "events.parquet"
    planted().to_parquet(source, index=False)
    with dp.Session.open(url, analyst="steward", role="steward") as steward:
        register(steward, str(source))
        for name in ANALYSTS:
            steward.add_analyst(name)
    snapshots = SharedSnapshots()
    yield url, source, snapshots
    snapshots.close()


def copies(snapshots: SharedSnapshots) -> list[str]:
    """The regular (shared) tables of the process's database: one per loaded snapshot."""
    rows = snapshots._database.execute("SELECT table_name FROM duckdb_tables() WHERE NOT temporary").fetchall()
    return sorted(str(r[0]) for r in rows)


def query(session: dp.Session) -> dp.Query:
    events = session.dataset("events")
    return events.query().group_by("region").agg(n=dp.count(), hours=dp.mean("hours"), age=dp.median("age"))


def test_sessions_on_four_threads_share_one_copy_and_leave_no_temporary_table(
    setup: tuple[str, Path, SharedSnapshots],
) -> None:
    url, _, snapshots = setup

    def serve(analyst: str) -> tuple[set[int], str, list[str]]:
        engine = snapshots.engine()
        with Ledger.open(url) as ledger, dp.Session(ledger, analyst=analyst, engine=engine, snapshots=snapshots) as s:
            results = [s.release(query(s), epsilon=0.25) for _ in range(3)]
            left = engine.temporary_names()
        snapshots.close_engine(engine)
        return {r.record.release_id for r in results}, results[0].record.parameters["snapshot"], left

    with ThreadPoolExecutor(len(ANALYSTS)) as pool:
        served = list(pool.map(serve, ANALYSTS))
    assert len(set().union(*(ids for ids, _, _ in served))) == 1  # one noise draw for the one question
    assert [(snapshot, left) for _, snapshot, left in served] == [("v1", [])] * len(ANALYSTS)
    assert snapshots.loaded() == [("events", "v1")]
    assert len(copies(snapshots)) == 1  # one copy for four analysts on four engines
    with dp.Session.open(url, analyst="steward", role="steward") as steward:
        charges = steward.ledger.charges("events")
    assert len(charges) == 1  # the same question: one charge, every other answer from the store


def test_a_new_snapshot_is_served_at_once_and_the_old_one_refused_then_dropped(
    setup: tuple[str, Path, SharedSnapshots], tmp_path: Path
) -> None:
    url, _, snapshots = setup
    ledger = Ledger.open(url)
    first, second = snapshots.engine(), snapshots.engine()
    alice = dp.Session(ledger, analyst="alice", engine=first, snapshots=snapshots)
    bob = dp.Session(ledger, analyst="bob", engine=second, snapshots=snapshots)
    assert alice.dataset("events", snapshot="v1").snapshot == bob.dataset("events").snapshot == "v1"
    changed = tmp_path / "events_v2.parquet"
    planted(persons=640).to_parquet(changed, index=False)
    with dp.Session.open(url, analyst="steward", role="steward") as steward:
        register(steward, str(changed), snapshot="v2")
    with pytest.raises(SnapshotNotCurrent) as refused:
        alice.dataset("events", snapshot="v1")
    assert (refused.value.dataset, refused.value.snapshot, refused.value.current) == ("events", "v1", "v2")
    assert alice.release(query(alice), epsilon=0.5).record.parameters["snapshot"] == "v2"
    assert snapshots.loaded() == [("events", "v1"), ("events", "v2")]  # bob's engine still holds v1
    assert bob.dataset("events").snapshot == "v2"
    assert snapshots.loaded() == [("events", "v2")] and len(copies(snapshots)) == 1  # v1 dropped
    for engine in (first, second):
        snapshots.close_engine(engine)
    ledger.close()


def test_a_failed_load_leaves_nothing_and_shared_sessions_only_read(setup: tuple[str, Path, SharedSnapshots]) -> None:
    url, source, snapshots = setup
    original = pd.read_parquet(source)
    original.assign(hours=original["hours"] + 1).to_parquet(source, index=False)  # the registered file changed
    engine = snapshots.engine()
    with Ledger.open(url) as ledger:
        session = dp.Session(ledger, analyst="alice", engine=engine, snapshots=snapshots)
        with pytest.raises(UsageError, match="fingerprint differs"):
            session.dataset("events")
        assert snapshots.loaded() == [] and copies(snapshots) == []
        original.to_parquet(source, index=False)
        assert session.dataset("events").snapshot == "v1"
        with pytest.raises(UsageError, match="reads the source the steward registered"):
            session.dataset("events", source=original)
        steward = dp.Session(ledger, analyst="steward", role="steward", engine=engine, snapshots=snapshots)
        with pytest.raises(UsageError, match="only reads registered snapshots"):
            register(steward, original, name="other")
        with pytest.raises(UsageError, match=r"engine=snapshots\.engine"):
            dp.Session(ledger, analyst="alice", snapshots=snapshots)
    snapshots.close_engine(engine)


def test_the_shared_copy_is_stored_compressed_for_every_cursor(setup: tuple[str, Path, SharedSnapshots]) -> None:
    """The one copy lives in the compressed in-memory database every cursor uses, checkpointed when loaded."""
    url, _, snapshots = setup
    engine = snapshots.engine()
    with Ledger.open(url) as ledger, dp.Session(ledger, analyst="alice", engine=engine, snapshots=snapshots) as s:
        released = s.release(query(s), epsilon=0.25)
    snapshots.close_engine(engine)
    assert len(released.table) == 4
    (table,) = copies(snapshots)
    cursor = snapshots._database.cursor()
    (database,) = cursor.execute(
        "SELECT database_name FROM duckdb_tables() WHERE table_name = $t", {"t": table}
    ).fetchone()  # type: ignore[misc]
    assert database == "__dps_copies"
    stored = cursor.execute(
        f"SELECT column_name, list(DISTINCT compression) FROM pragma_storage_info('__dps_copies.main.{table}') "
        "GROUP BY column_name"
    ).fetchall()
    cursor.close()
    packed = {str(c) for c, kinds in stored if set(kinds) != {"Uncompressed"}}
    assert {"age", "__dps_pos", "__dps_n"} <= packed, stored
