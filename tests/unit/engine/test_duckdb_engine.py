from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import duckdb
import pandas as pd
import pytest

import dpsense.engine as eng
from dpsense.core.errors import InternalError, InvalidData, UnsupportedRequest, UsageError
from dpsense.engine import DuckDBEngine, Engine, UnknownTable, _sql, clipped_sum, count_rows
from dpsense.noise.entropy import random_bytes


def frame() -> pd.DataFrame:
    return pd.DataFrame({"person": [1, 1, 2], "hours": [1.0, 2.0, 3.0], 'we"ird col': ["a", "b", "c"]})


def test_exported_members() -> None:
    assert sorted(eng.__all__) == eng.__all__
    for name in eng.__all__:
        assert getattr(eng, name) is not None
    with pytest.raises(AttributeError):
        _ = eng.NoSuchThing  # type: ignore[attr-defined]


def test_duckdb_engine_satisfies_the_protocol() -> None:
    with DuckDBEngine() as e:
        assert isinstance(e, Engine)


def test_register_existing_duckdb_table_and_leave_a_shared_connection_open() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE events AS SELECT range AS person, range * 0.5 AS hours FROM range(10)")
    with DuckDBEngine(connection=con) as e:
        info = e.register("ev", "events")
        assert info.column_names == ("person", "hours")
        view = e.bounded_rows("ev", unit_column="person", max_rows_per_unit=1, salt=random_bytes(32))
        (row,) = e.group_aggregates(view, group_column=None, keys=None, aggregates=[count_rows()])
        assert row.counts["count_rows"] == 10
    assert con.execute("SELECT count(*) FROM events").fetchone() == (10,)
    leftovers = con.execute("SELECT count(*) FROM duckdb_tables() WHERE starts_with(table_name, '__dps_')")
    assert leftovers.fetchone() == (0,)


def test_salt_is_never_stored_in_the_catalog_or_the_view() -> None:
    salt = random_bytes(32)
    con = duckdb.connect()
    with DuckDBEngine(connection=con) as e:
        e.register("t", frame())
        view = e.bounded_rows("t", unit_column="person", max_rows_per_unit=1, salt=salt)
        catalog = con.execute("SELECT coalesce(sql, '') FROM duckdb_tables() UNION ALL SELECT sql FROM duckdb_views()")
        text = " ".join(str(r[0]) for r in catalog.fetchall())
        assert salt.hex() not in text
        assert salt.hex() not in repr(view) and salt not in repr(view).encode()


def test_close_removes_copies_and_views_and_refuses_further_use() -> None:
    con = duckdb.connect()
    e = DuckDBEngine(connection=con)
    e.register("t", frame())
    e.bounded_rows("t", unit_column="person", max_rows_per_unit=1, salt=random_bytes(32))
    e.close()
    e.close()
    assert con.execute("SELECT count(*) FROM duckdb_tables()").fetchone() == (0,)
    with pytest.raises(UsageError, match="closed"):
        e.register("u", frame())


def test_unsupported_and_missing_sources(tmp_path: Path) -> None:
    with DuckDBEngine() as e:
        with pytest.raises(UnsupportedRequest, match="pandas"):
            e.register("t", [1, 2, 3])
        with pytest.raises(InvalidData, match="does not exist"):
            e.register("t", tmp_path / "missing.csv")
        with pytest.raises(UnknownTable):
            e.register("t", "no_such_table")
        bad = tmp_path / "bad.parquet"
        bad.write_text("secret-row-42,not parquet")
        with pytest.raises(InvalidData) as err:
            e.register("t", bad)
        assert "secret-row-42" not in str(err.value)
        with pytest.raises(UsageError, match="__dps_"):
            e.register("__dps_x", frame())
        with pytest.raises(UsageError, match="__dps_"):
            e.register("t", pd.DataFrame({"__dps_enc": [1]}))
        assert e.temporary_names() == []


def test_quoted_identifiers_work() -> None:
    with DuckDBEngine() as e:
        e.register("t", frame())
        view = e.bounded_rows("t", unit_column="person", max_rows_per_unit=5, salt=random_bytes(32))
        got = e.collect(view, columns=['we"ird col'])
        assert got['we"ird col'].tolist() == ["a", "b", "c"]
        rows = e.group_aggregates(view, group_column='we"ird col', keys=["c", "z"], aggregates=[count_rows()])
        assert [r.counts["count_rows"] for r in rows] == [1, 0]


def test_duckdb_failures_hide_their_message() -> None:
    with DuckDBEngine() as e, pytest.raises(InternalError, match="This is a bug") as err:
        e._run("SELECT CAST('secret-value-77' AS INTEGER)", {})
    assert "secret-value-77" not in str(err.value)


def test_group_cap_requires_grouping_on_the_capped_column() -> None:
    with DuckDBEngine() as e:
        e.register("t", frame())
        salt = random_bytes(32)
        with pytest.raises(UsageError, match="group_column"):
            e.bounded_rows("t", unit_column="person", max_rows_per_unit=1, salt=salt, max_groups_per_unit=1)
        view = e.bounded_rows(
            "t", unit_column="person", max_rows_per_unit=1, salt=salt, group_column="hours", max_groups_per_unit=1
        )
        with pytest.raises(UnsupportedRequest):
            e.group_aggregates(view, group_column="person", keys=None, aggregates=[count_rows()])


def test_fixed_point_grid_bounds_are_exact() -> None:
    spec = clipped_sum("x", low=0.1, high=0.9, grid_exponent=-1)
    assert (spec.q_low, spec.q_high) == (1, 1)
    assert spec.grid_low == spec.grid_high == Fraction(1, 2)
    with pytest.raises(UsageError, match="grid_exponent"):
        clipped_sum("x", low=0, high=1, grid_exponent=2000)
    with pytest.raises(UsageError, match="2\\*\\*62"):
        clipped_sum("x", low=0, high=1e300, grid_exponent=-10)


def test_sql_helpers() -> None:
    assert _sql.quote('a"b') == '"a""b"'
    con = duckdb.connect()
    # The row encoding is injective: a NULL, an empty string and values with separators stay apart.
    encoded = [
        con.execute(f"SELECT {_sql.encode('$v')}", {"v": v}).fetchone()[0]  # type: ignore[index]
        for v in [None, "", "-", "1:a", "a,b"]
    ]
    assert len(set(encoded)) == len(encoded)
    sql = _sql.bounded_rows_query(
        '"t"', ["person", "x"], unit_column="person", group_column=None, max_groups_per_unit=None
    )
    assert "$salt" in sql and "sha256" in sql
