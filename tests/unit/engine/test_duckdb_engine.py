from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import duckdb
import pandas as pd
import pytest

import dpsense.engine as eng
from dpsense.core.errors import InternalError, InvalidData, UnsupportedRequest, UsageError
from dpsense.engine import DuckDBEngine, Engine, UnknownTable, clipped_sum, count_rows, predicate
from dpsense.engine.sql import _query
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
        assert isinstance(e, Engine) and isinstance(e, eng.ReleaseEngine) and isinstance(e, eng.StewardEngine)


def test_the_protocol_is_its_two_sides() -> None:
    def steps(protocol: type) -> set[str]:
        return {name for name in vars(protocol) if not name.startswith("_")}

    release, steward = steps(eng.ReleaseEngine), steps(eng.StewardEngine)
    assert not release & steward
    assert {"bounded_rows", "collect", "release_scope", "close"} <= release
    assert {"register", "fingerprint", "index_units", "forget"} <= steward
    assert Engine.__bases__[:2] == (eng.ReleaseEngine, eng.StewardEngine) and not steps(Engine)


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
    assert _query.quote('a"b') == '"a""b"'
    sql, params = _query.bounded_rows_query(
        '"t"', ["person", "x"], unit_column="person", group_columns=(), max_groups_per_unit=None
    )
    assert "$rk1" in sql and "$rk2" in sql and "$max_rows" in sql and params == {}


def test_filter_values_and_keys_travel_as_parameters_only() -> None:
    odd = "O'Brien-7781"
    where = [predicate("name", "in", [odd, "x"]), predicate("x", ">", 2.5)]
    sql, params = _query.bounded_rows_query(
        '"t"',
        ["person", "name", "x", "g"],
        unit_column="person",
        group_columns=("g",),
        max_groups_per_unit=2,
        where=where,
        kinds={"name": "string", "x": "float"},
    )
    assert odd not in sql and "2.5" not in sql
    assert params == {"w0_0": odd, "w0_1": "x", "w1_0": 2.5}
    assert "$gk1" in sql and "isnan" in sql  # the float filter excludes NaN explicitly
    keys = _query.derived_keys(b"k" * 32, "rows", _query.ROW_KEYS)
    assert set(keys) == {"rk1", "rk2"} and all(0 <= v < 2**64 for v in keys.values())
    assert keys != _query.derived_keys(b"j" * 32, "rows", _query.ROW_KEYS)
    assert keys != _query.derived_keys(b"k" * 32, "groups", _query.ROW_KEYS)


def test_no_secret_reaches_the_catalog_or_the_query_log(tmp_path: Path) -> None:
    salt, key = random_bytes(32), random_bytes(32)
    con = duckdb.connect()
    secrets = [salt.hex(), key.hex(), *(str(v) for v in _query.derived_keys(salt, "rows", _query.ROW_KEYS).values())]
    secrets += [str(v) for v in _query.derived_keys(salt, "groups", _query.GROUP_KEYS).values()]
    with DuckDBEngine(connection=con) as e:
        e.register("t", frame())
        e.bounded_rows(
            "t", unit_column="person", max_rows_per_unit=1, salt=salt, group_column="hours", max_groups_per_unit=1
        )
        e.bounded_rows("t", unit_column="person", max_rows_per_unit=1, salt=salt, where=[predicate("hours", "<", 3)])
        e.fingerprint("t", key)
        catalog = con.execute("SELECT coalesce(sql, '') FROM duckdb_tables() UNION ALL SELECT sql FROM duckdb_views()")
        text = " ".join(str(r[0]) for r in catalog.fetchall())
        assert text and not any(s in text for s in secrets)


def test_policies_never_modify_a_table_registered_by_name() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE events AS SELECT * FROM (VALUES (1, 'inf'::DOUBLE), (2, NULL), (3, 5.0)) v(person, x)")
    before = con.execute("SELECT * FROM events ORDER BY person").fetchall()
    with DuckDBEngine(connection=con) as e:
        e.register("ev", "events")
        e.apply_policies("ev", clamp={"x": (0.0, 1.0)})
        e.apply_policies("ev", drop_missing=["x"])
        assert con.execute("SELECT * FROM events ORDER BY person").fetchall() == before
        copies = con.execute("SELECT count(*) FROM duckdb_tables() WHERE starts_with(table_name, '__dps_src_')")
        assert copies.fetchone() == (1,)  # one engine-owned copy: the first policy's copy is gone
        view = e.bounded_rows("ev", unit_column="person", max_rows_per_unit=1, salt=random_bytes(32))
        assert e.collect(view, columns=["x"])["x"].tolist() == [1.0, 1.0]
        e.forget("ev")
        copies = con.execute("SELECT count(*) FROM duckdb_tables() WHERE starts_with(table_name, '__dps_src_')")
        assert copies.fetchone() == (0,)
    assert con.execute("SELECT * FROM events ORDER BY person").fetchall() == before


def test_forget_drops_the_engine_copy_but_not_a_table_registered_by_name() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE events AS SELECT 1 AS person")
    with DuckDBEngine(connection=con) as e:
        e.register("ev", "events")
        e.register("t", frame())
        e.forget("ev")
        e.forget("t")
        assert con.execute("SELECT table_name FROM duckdb_tables()").fetchall() == [("events",)]


def test_an_engine_table_is_never_a_source_so_forget_cannot_drop_another_snapshot() -> None:
    """Registering a copy's own name would share it, and forgetting that registration would drop it."""
    with DuckDBEngine() as e:
        e.register("a", frame())
        relation, _ = e._table("a")
        with pytest.raises(UsageError, match="must not start with '__dps_'"):
            e.register("b", relation.strip('"'))
        view = e.bounded_rows("a", unit_column="person", max_rows_per_unit=10, salt=random_bytes(32))
        assert e.collect(view, columns=["person"])["person"].size == len(frame())


def test_public_keys_are_checked_in_one_statement_and_name_the_bad_key() -> None:
    with DuckDBEngine() as e:
        e.register("t", pd.DataFrame({"person": range(3000), "g": [i % 1000 for i in range(3000)]}))
        view = e.bounded_rows("t", unit_column="person", max_rows_per_unit=1, salt=random_bytes(32))
        rows = e.group_aggregates(view, group_column="g", keys=list(range(1000)), aggregates=[count_rows()])
        assert [r.counts["count_rows"] for r in rows] == [3] * 1000
        for bad in (2**70, "7", 2.0, None):
            with pytest.raises(UsageError, match="key") as err:
                e.group_aggregates(view, group_column="g", keys=[1, 2, bad], aggregates=[count_rows()])
            assert repr(bad) in str(err.value)


def test_fingerprint_row_text_is_injective_across_tricky_values() -> None:
    tricky = pd.DataFrame({"s": [None, "", "-", "1:a", "a,b", "2:a,", "a"], "n": [1, None, 3, 4, 5, 6, 7]})
    with DuckDBEngine() as e:
        prints = set()
        for i in range(len(tricky)):
            e.register(f"t{i}", tricky.iloc[[i]])
            prints.add(e.fingerprint(f"t{i}", b"k" * 16))
        assert len(prints) == len(tricky)
        e.register("zero", pd.DataFrame({"x": [0.0]}))
        e.register("negzero", pd.DataFrame({"x": [-0.0]}))
        e.register("lists", pd.DataFrame({"a": [[1, 2], [3]]}))
        e.register("lists2", pd.DataFrame({"a": [[1], [2, 3]]}))
        assert e.fingerprint("zero", b"k" * 16) != e.fingerprint("negzero", b"k" * 16)
        assert e.fingerprint("lists", b"k" * 16) != e.fingerprint("lists2", b"k" * 16)


def test_fingerprint_of_zoned_times_ignores_the_session_time_zone() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE ev AS SELECT TIMESTAMPTZ '2024-03-01 10:00:00+00' + to_hours(range) AS t FROM range(5)")
    with DuckDBEngine(connection=con) as e:
        e.register("ev", "ev")
        con.execute("SET TimeZone = 'UTC'")
        utc = e.fingerprint("ev", b"k" * 16)
        con.execute("SET TimeZone = 'Asia/Tokyo'")
        assert e.fingerprint("ev", b"k" * 16) == utc
