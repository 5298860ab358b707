"""DuckDB's memory: a limit from the caller or the environment, spills into a private directory removed on close."""

from __future__ import annotations

import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsense.core.errors import UsageError
from dpsense.engine import DuckDBEngine, count_rows
from dpsense.engine.duckdb._engine import MEMORY_LIMIT_ENV
from dpsense.noise.entropy import random_bytes


def _setting(engine: DuckDBEngine, name: str) -> str:
    (value,) = engine._con.execute(f"SELECT current_setting('{name}')").fetchone()  # type: ignore[misc]
    return str(value)


def test_the_spill_directory_is_private_and_removed_on_close() -> None:
    engine = DuckDBEngine()
    spill = Path(_setting(engine, "temp_directory"))
    assert spill.is_dir() and stat.S_IMODE(spill.stat().st_mode) == 0o700
    assert spill.resolve() != (Path.cwd() / ".tmp").resolve()
    engine.close()
    assert not spill.exists()


def test_a_limit_from_the_argument_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with DuckDBEngine(memory_limit="64MB") as engine:
        assert _setting(engine, "memory_limit") in ("61.0 MiB", "64.0 MB", "61.0MiB", "64.0MB")
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "1GiB")
    with DuckDBEngine() as engine:
        assert _setting(engine, "memory_limit") in ("1.0 GiB", "1.0GiB", "1024.0 MiB")


@pytest.mark.parametrize("value", ["lots", "64", "-1GB", "1e9MB", "64MB; SELECT 1"])
def test_a_malformed_limit_names_where_it_came_from(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    with pytest.raises(UsageError, match="memory_limit is a memory size"):
        DuckDBEngine(memory_limit=value)
    monkeypatch.setenv(MEMORY_LIMIT_ENV, value)
    with pytest.raises(UsageError, match=MEMORY_LIMIT_ENV):
        DuckDBEngine()


def test_an_index_and_a_bound_larger_than_the_limit_spill_and_agree_with_an_unlimited_engine() -> None:
    rng = np.random.default_rng(3)  # the test's own data
    n = 1_500_000
    frame = pd.DataFrame({"unit": rng.integers(0, 200_000, n), "g": rng.integers(0, 50, n), "x": rng.random(n)})
    counts = []
    for limit in ("40MB", None):
        with DuckDBEngine(memory_limit=limit) as engine:
            engine.register("t", frame)
            engine.index_units("t", unit_column="unit", key=random_bytes(32))
            view = engine.bounded_rows("t", unit_column="unit", max_rows_per_unit=3, salt=random_bytes(32))
            rows = engine.group_aggregates(view, group_column="g", keys=None, aggregates=[count_rows()])
            counts.append(sum(r.counts["count_rows"] for r in rows))
    assert counts[0] == counts[1] == int(np.minimum(np.bincount(frame["unit"]), 3).sum())


def _stored_compressions(engine: DuckDBEngine, relation: str) -> dict[str, set[str]]:
    """The compression of each column's segments, from DuckDB's storage information of ``relation``."""
    rows = engine._con.execute(
        f"SELECT column_name, compression FROM pragma_storage_info('{relation.strip(chr(34))}')"
    ).fetchall()
    out: dict[str, set[str]] = {}
    for column, compression in rows:
        out.setdefault(str(column), set()).add(str(compression))
    return out


def test_an_engines_own_copies_are_stored_compressed_and_release_the_same_counts() -> None:
    """The copies of an engine with its own in-memory database live in a COMPRESS database, checkpointed.

    Control: the same registration on an engine given a connection keeps its copies as temporary
    tables, stored uncompressed; both release the same exact counts.
    """
    rng = np.random.default_rng(4)  # the test's own data
    n = 300_000
    frame = pd.DataFrame({"unit": rng.integers(0, 50_000, n), "g": rng.integers(0, 20, n), "x": rng.random(n)})
    import duckdb

    given = duckdb.connect()
    totals = []
    for engine, compressed in ((DuckDBEngine(), True), (DuckDBEngine(connection=given), False)):
        with engine:
            engine.register("t", frame)
            engine.index_units("t", unit_column="unit", key=random_bytes(32))
            relation, _ = engine._table("t")
            database = engine._con.execute(
                "SELECT database_name FROM duckdb_tables() WHERE table_name = $t", {"t": relation.strip('"')}
            ).fetchone()
            assert database is not None and (database[0] == "__dps_copies") is compressed
            stored = _stored_compressions(engine, relation)
            plain = {c: s for c, s in stored.items() if s == {"Uncompressed"}}
            if compressed:  # the unit, the group, the positions and counts are integers DuckDB packs
                assert not {"unit", "g", "__dps_pos", "__dps_n"} & set(plain), stored
            else:
                assert {"unit", "g", "__dps_pos", "__dps_n"} <= set(plain), stored
            view = engine.bounded_rows("t", unit_column="unit", max_rows_per_unit=2, salt=random_bytes(32))
            rows = engine.group_aggregates(view, group_column="g", keys=None, aggregates=[count_rows()])
            totals.append(sum(r.counts["count_rows"] for r in rows))
    given.close()
    assert totals[0] == totals[1] == int(np.minimum(np.bincount(frame["unit"]), 2).sum())


def test_a_table_of_the_engines_own_file_database_is_registered_by_name(tmp_path: Path) -> None:
    """On a file database the copies stay temporary tables and the file's own tables resolve by name."""
    import duckdb

    path = tmp_path / "data.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE events AS SELECT range % 7 AS unit, range % 3 AS g FROM range(100)")
    with DuckDBEngine(str(path)) as engine:
        engine.register("events", "events")
        engine.index_units("events", unit_column="unit", key=random_bytes(32))
        view = engine.bounded_rows("events", unit_column="unit", max_rows_per_unit=100, salt=random_bytes(32))
        rows = engine.group_aggregates(view, group_column="g", keys=None, aggregates=[count_rows()])
        assert sum(r.counts["count_rows"] for r in rows) == 100
        names = {str(r[0]) for r in engine._con.execute("SELECT database_name FROM duckdb_databases()").fetchall()}
        assert "__dps_copies" not in names


def test_a_checkpoint_refused_beside_another_writer_leaves_the_copy_uncompressed_not_failed() -> None:
    """A shared engine's loader beside another connection's open write: the copy is made, compressed later."""
    import duckdb

    database = duckdb.connect()
    database.execute(f"ATTACH ':memory:' AS {DuckDBEngine.COPIES_DATABASE} (COMPRESS)")
    cursors = [database.cursor() for _ in range(2)]
    for cursor in cursors:
        cursor.execute(f"USE {DuckDBEngine.COPIES_DATABASE}")
    frame = pd.DataFrame({"unit": np.arange(200_000) % 5_000, "g": np.arange(200_000) % 7})
    other = cursors[1]
    other.execute("BEGIN")
    other.execute("CREATE TABLE writing AS SELECT 1 AS x")  # a write transaction left open on the database
    loader = DuckDBEngine(connection=cursors[0], shared=True)
    loader.register("t", frame)
    relation, _ = loader._table("t")
    assert _stored_compressions(loader, relation)["unit"] == {"Uncompressed"}  # the checkpoint was refused
    other.execute("COMMIT")
    loader.register("u", frame)  # the next copy's checkpoint compresses every table of the database
    assert _stored_compressions(loader, relation)["unit"] != {"Uncompressed"}
    loader.close()
    database.close()
