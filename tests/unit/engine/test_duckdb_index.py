"""DuckDB specifics of the unit index: secrets stay out of SQL text, the catalog and views; storage."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

from dpsense.core.errors import InvalidData, UsageError
from dpsense.engine import DuckDBEngine, count_rows
from dpsense.engine.sql import _index_query, _query
from dpsense.noise.entropy import random_bytes

MASK = (1 << 64) - 1


def frame() -> pd.DataFrame:
    return pd.DataFrame({"person": [3, 1, 2, 1, 3, 3, 2], "hours": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]})


def murmur_finaliser(x: int) -> int:
    for _ in range(2):
        x ^= x >> 32
        x = (x * 0xD6E8FEB86659FD93) & MASK
    return x ^ (x >> 32)


def test_duckdb_hash_of_an_integer_is_the_bijective_murmur_finaliser() -> None:
    """The rotation's uniformity argument needs the mixer to be a bijection of 64-bit integers."""
    con = duckdb.connect()
    for value in (0, 1, 2, 12345, 2**63 + 5, MASK):
        assert con.execute("SELECT hash(CAST($v AS UBIGINT))", {"v": value}).fetchone() == (murmur_finaliser(value),)


def secrets_of(salt: bytes, key: bytes) -> list[str]:
    derived = [
        *_query.derived_keys(key, "index", _index_query.INDEX_KEYS).values(),
        *_query.derived_keys(salt, "rows", _query.ROW_KEYS).values(),
    ]
    return [salt.hex(), key.hex(), *(str(v) for v in derived), *(format(v, "x") for v in derived)]


def test_no_secret_reaches_sql_text_the_catalog_or_the_view() -> None:
    salt, key = random_bytes(32), random_bytes(32)
    con = duckdb.connect()
    with DuckDBEngine(connection=con) as e:
        e.register("t", frame())
        e.index_units("t", unit_column="person", key=key)
        view = e.bounded_rows("t", unit_column="person", max_rows_per_unit=1, salt=salt)
        selection = e._selections[view.name]
        secrets = secrets_of(salt, key)
        catalog = con.execute("SELECT coalesce(sql, '') FROM duckdb_tables() UNION ALL SELECT sql FROM duckdb_views()")
        text = " ".join(str(r[0]) for r in catalog.fetchall()) + selection.sql + repr(view)
        assert "$max_rows" in selection.sql and "__dps_pos" in selection.sql
        assert not any(s in text for s in secrets)
        # Only the derived key is held, never the salt, and only until the view goes.
        assert salt not in selection.params.values() and salt.hex() not in repr(selection.params)
        assert set(selection.params) == {_index_query.MAX_ROWS}
        e.drop(view)
        assert e._selections == {}


def test_the_indexed_path_makes_no_table_and_the_windowed_path_does() -> None:
    con = duckdb.connect()
    with DuckDBEngine(connection=con) as e:
        e.register("t", frame())
        tables = "SELECT count(*) FROM duckdb_tables() WHERE starts_with(table_name, '__dps_tmp_')"
        e.bounded_rows("t", unit_column="person", max_rows_per_unit=1, salt=random_bytes(32))
        assert con.execute(tables).fetchone() == (1,)
        e.index_units("t", unit_column="person", key=random_bytes(32))
        assert e._indexes == {"t": "person"}
        view = e.bounded_rows("t", unit_column="person", max_rows_per_unit=1, salt=random_bytes(32))
        assert con.execute(tables).fetchone() == (1,) and view.name in e._selections
        e.apply_policies("t", drop_missing=["hours"])
        assert e._indexes == {}
        view = e.bounded_rows("t", unit_column="person", max_rows_per_unit=1, salt=random_bytes(32))
        assert view.name not in e._selections and con.execute(tables).fetchone() == (2,)


def test_index_snapshot_is_stored_by_position_and_leaves_a_table_registered_by_name() -> None:
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE events AS SELECT * FROM (VALUES (3, 1.0), (1, 2.0), (NULL, 9.0), (3, 5.0), (2, 3.0)) v(p, x)"
    )
    before = con.execute("SELECT * FROM events").fetchall()
    with DuckDBEngine(connection=con) as e:
        e.register("ev", "events")
        e.index_units("ev", unit_column="p", key=random_bytes(16))
        relation = e._tables["ev"][0]
        stored = con.execute(f"SELECT p, __dps_pos, __dps_n FROM {relation}").fetchall()
        assert [r[0] for r in stored] == [1, 2, 3, 3, None]  # every unit's first row, then the second ...
        assert stored[-1] == (None, None, None)
        assert [r[1] for r in stored] == [0, 0, 0, 1, None] and {r[2] for r in stored if r[0] == 3} == {2}
        assert con.execute("SELECT * FROM events").fetchall() == before
        e.forget("ev")
        copies = con.execute("SELECT count(*) FROM duckdb_tables() WHERE starts_with(table_name, '__dps_src_')")
        assert copies.fetchone() == (0,)
    assert con.execute("SELECT * FROM events").fetchall() == before


def test_index_sql_carries_keys_as_parameters_only() -> None:
    sql = _index_query.unit_index_query('"t"', ["person", "x"], unit_column="person")
    assert "$ik1" in sql and "$ik2" in sql and "ORDER BY" in sql
    assert _index_query.first_rows_condition() == "__dps_pos < $max_rows"
    assert "ORDER BY __dps_pos NULLS LAST" in _index_query.position_order_query('"t"', "person")


def test_checked_public_keys_are_remembered_but_never_wrongly() -> None:
    with DuckDBEngine() as e:
        e.register("t", pd.DataFrame({"person": range(6), "g": [1, 2, 3, 1, 2, 3]}))
        view = e.bounded_rows("t", unit_column="person", max_rows_per_unit=1, salt=random_bytes(32))
        for _ in range(2):
            rows = e.group_aggregates(view, group_column="g", keys=[1, 2, 3], aggregates=[count_rows()])
            assert [r.counts["count_rows"] for r in rows] == [2, 2, 2]
        assert len(e._checked_keys) == 1
        for bad in ([1.0, 2.0, 3.0], [True, 2, 3], [1, 1, 3]):
            with pytest.raises(UsageError):
                e.group_aggregates(view, group_column="g", keys=bad, aggregates=[count_rows()])


def test_a_unit_above_the_rotation_limit_is_refused_at_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 32-bit rotation cannot overflow in a release: indexing refuses a larger unit (the limit lowered here)."""
    rows = frame()
    largest = int(rows["person"].value_counts().max())
    monkeypatch.setattr(_index_query, "MAX_UNIT_ROWS", largest - 1)
    con = duckdb.connect()
    with DuckDBEngine(connection=con) as e:
        e.register("t", rows)
        tables = "SELECT count(*) FROM duckdb_tables() WHERE starts_with(table_name, '__dps_')"
        before = con.execute(tables).fetchone()
        with pytest.raises(InvalidData, match="more than"):
            e.index_units("t", unit_column="person", key=random_bytes(32))
        assert e._indexes == {}
        assert con.execute(tables).fetchone() == before  # the refused copy is gone
    monkeypatch.setattr(_index_query, "MAX_UNIT_ROWS", largest)
    with DuckDBEngine() as e:
        e.register("t", rows)
        e.index_units("t", unit_column="person", key=random_bytes(32))  # at the limit: indexed
        assert e._indexes == {"t": "person"}


def test_the_kept_rows_are_a_prefix_the_release_reads_alone() -> None:
    """The rows with position < C come first in the stored table, so a bound by C reads a prefix."""
    with DuckDBEngine() as e:
        e.register(
            "t", pd.DataFrame({"person": [i % 50 for i in range(1000)], "hours": [float(i) for i in range(1000)]})
        )
        e.index_units("t", unit_column="person", key=random_bytes(32))
        relation = e._tables["t"][0]
        positions = [r[0] for r in e._con.execute(f"SELECT __dps_pos FROM {relation}").fetchall()]
        assert positions == sorted(positions) and positions[:50] == [0] * 50 and positions[-1] == 19


def test_a_snapshot_file_of_the_earlier_layout_still_attaches_and_keeps_the_same_rows(tmp_path: object) -> None:
    """A file stored before the position order (with the unit-hash column, sorted by unit) is read as is."""
    from pathlib import Path

    path = Path(str(tmp_path)) / "snapshot.duckdb"
    data = pd.DataFrame({"person": [i % 40 for i in range(400)], "hours": [float(i % 17) for i in range(400)]})
    with DuckDBEngine() as e:
        e.register("t", data)
        e.index_units("t", unit_column="person", key=random_bytes(32))
        info = e.table_info("t")
        want = e.collect(
            e.bounded_rows("t", unit_column="person", max_rows_per_unit=3, salt=random_bytes(32)),
            columns=["person", "hours"],
        )
        e.save_snapshot("t", path)
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE legacy AS SELECT person, hours, __dps_pos, __dps_n, hash(person) AS __dps_uh FROM snapshot "
        "ORDER BY person, __dps_pos"
    )
    con.execute("DROP TABLE snapshot")
    con.execute("ALTER TABLE legacy RENAME TO snapshot")
    con.close()
    with DuckDBEngine() as again:
        again.load_snapshot("t", path, info=info, unit_column="person")
        got = again.collect(
            again.bounded_rows("t", unit_column="person", max_rows_per_unit=3, salt=random_bytes(32)),
            columns=["person", "hours"],
        )
        assert sorted(zip(got["person"], got["hours"], strict=True)) == sorted(
            zip(want["person"], want["hours"], strict=True)
        )


def test_a_key_tuple_is_bound_once_as_a_table_and_answers_as_the_list_does() -> None:
    """``group_aggregates`` with a tuple of keys makes one temporary key table per tuple object and
    reuses it; the counts (absent keys 0, unlisted groups never) equal those of the same keys as a list."""
    with DuckDBEngine() as e:
        e.register("t", pd.DataFrame({"person": range(60), "g": [i % 7 for i in range(60)]}))
        view = e.bounded_rows("t", unit_column="person", max_rows_per_unit=1, salt=random_bytes(32))
        declared = (0, 3, 5, 99)  # 99 absent; groups 1, 2, 4 and 6 unlisted

        def counts(keys: object) -> list[tuple[object, int]]:
            rows = e.group_aggregates(view, group_column="g", keys=keys, aggregates=[count_rows()])  # type: ignore[arg-type]
            return [(r.key, r.counts["count_rows"]) for r in rows]

        want = [(0, 9), (3, 9), (5, 8), (99, 0)]
        assert counts(list(declared)) == want and e._key_tables == {}
        assert counts(declared) == want and counts(declared) == want
        assert len(e._key_tables) == 1
        assert counts(tuple(list(declared))) == want and len(e._key_tables) == 2  # another tuple object
        for i in range(20):  # at most _KEY_TABLES are kept; the oldest are dropped from the catalog
            counts((i, 1000 + i))
        tables = e._con.execute("SELECT count(*) FROM duckdb_tables() WHERE starts_with(table_name, '__dps_keys_')")
        assert len(e._key_tables) == 16 and tables.fetchone() == (16,)
