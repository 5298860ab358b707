"""Stored group counts (``index_units(group_columns=)``): a group cap windows only the units above it.

Issue 18: a release capping groups per unit used to window every unit and build a temporary table
each time; with each unit's number of distinct values of the declared group columns stored at
registration, the units within the cap take the window-free path and only the others are windowed.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from dpsense.core.errors import InvalidData
from dpsense.engine import BoundedView, DuckDBEngine, count_units, predicate
from dpsense.engine.sql import _index_query
from dpsense.noise.entropy import random_bytes


def visits() -> pd.DataFrame:
    """Units 0-39 in one region (1-6 rows), units 40-59 in two or three regions, a NULL region in unit 60."""
    rows: list[tuple[int, str | None, int, float]] = []
    for unit in range(40):
        rows += [(unit, "nesw"[unit % 4], (unit + i) % 2, float(i)) for i in range(1 + unit % 6)]
    for unit in range(40, 60):
        regions = "ne" if unit % 2 else "nes"
        rows += [(unit, regions[i % len(regions)], i % 2, float(i)) for i in range(6)]
    rows += [(60, None, 0, 1.0), (60, "n", 0, 2.0), (60, "n", 1, 3.0)]
    return pd.DataFrame(rows, columns=["person", "region", "ward", "hours"])


def kept(engine: DuckDBEngine, **kw: object) -> dict[int, list[tuple[str | None, int]]]:
    view = engine.bounded_rows("t", unit_column="person", salt=random_bytes(32), **kw)  # type: ignore[arg-type]
    relation, params = engine._check_view(view)  # read the view directly: collect would drop the NULL region
    raw = engine._con.execute(f"SELECT person, region, ward FROM {relation}", params)
    out: dict[int, list[tuple[str | None, int]]] = {}
    for person, region, ward in raw.fetchall():
        out.setdefault(int(person), []).append((region, int(ward)))
    return out


@pytest.fixture
def engine() -> DuckDBEngine:
    e = DuckDBEngine()
    e.register("t", visits())
    e.index_units("t", unit_column="person", key=random_bytes(32), group_columns=["ward", "region"])
    return e


def test_counts_are_hidden_and_count_null_as_a_group(engine: DuckDBEngine) -> None:
    assert engine.table_info("t").column_names == ("person", "region", "ward", "hours")
    assert engine._group_counts["t"] == {"region": "__dps_d0", "ward": "__dps_d1"}
    relation = engine._tables["t"][0]
    counts = dict(engine._con.execute(f"SELECT person, max(__dps_d0) FROM {relation} GROUP BY person").fetchall())
    assert counts[0] == 1 and counts[41] == 2 and counts[40] == 3 and counts[60] == 2  # NULL and 'n'


@pytest.mark.parametrize("where", [(), (predicate("hours", ">=", 1.0),)])
def test_the_cap_holds_and_units_within_it_lose_no_row_to_it(engine: DuckDBEngine, where: tuple[object, ...]) -> None:
    frame = visits()
    passing = frame if not where else frame[frame["hours"] >= 1.0]
    sizes = Counter(passing["person"].tolist())
    for _ in range(5):
        got = kept(engine, max_rows_per_unit=4, group_column="region", max_groups_per_unit=1, where=list(where))
        for unit, rows in got.items():
            assert len(rows) <= 4 and len({r for r, _ in rows}) <= 1
            if unit < 40:  # one region: within the cap, the rows bound alone decides
                assert len(rows) == min(4, sizes[unit])
        assert set(got) == set(sizes)  # every unit with a passing row keeps some


def test_two_columns_use_the_product_of_their_counts(engine: DuckDBEngine) -> None:
    for _ in range(5):
        got = kept(engine, max_rows_per_unit=6, group_column=("region", "ward"), max_groups_per_unit=2)
        for unit, rows in got.items():
            assert len(set(rows)) <= 2
            if unit < 40 and 1 + unit % 6 >= 2:  # one region x two wards = 2 pairs: within a cap of 2, all kept
                assert len(rows) == min(6, 1 + unit % 6)


def region_capped(engine: DuckDBEngine, table: str) -> BoundedView:
    return engine.bounded_rows(
        table,
        unit_column="person",
        max_rows_per_unit=3,
        salt=random_bytes(32),
        group_column="region",
        max_groups_per_unit=1,
    )


def test_a_grouping_without_stored_counts_is_windowed_as_before(engine: DuckDBEngine) -> None:
    engine.register("u", visits())
    engine.index_units("u", unit_column="person", key=random_bytes(32))
    assert region_capped(engine, "u").name not in engine._selections  # the windowed path: a temporary table
    capped = region_capped(engine, "t")
    assert capped.name in engine._selections and capped.max_groups_per_unit == 1
    rows = engine.group_aggregates(capped, group_column="region", keys=None, aggregates=[count_units()])
    assert sum(r.counts["count_units"] for r in rows) == 61  # every unit in exactly one region


def test_the_store_keeps_the_counts_and_refuses_a_file_without_them(engine: DuckDBEngine, tmp_path: Path) -> None:
    path = tmp_path / "snapshot.duckdb"
    engine.save_snapshot("t", path)
    info = engine.table_info("t")
    with DuckDBEngine() as again:
        again.load_snapshot("t", path, info=info, unit_column="person", group_columns=["region", "ward"])
        assert again._group_counts["t"] == {"region": "__dps_d0", "ward": "__dps_d1"}
        got = kept(again, max_rows_per_unit=4, group_column="region", max_groups_per_unit=1)
        assert all(len({r for r, _ in rows}) <= 1 for rows in got.values())
        with pytest.raises(InvalidData, match="registered schema"):
            again.load_snapshot("t2", path, info=info, unit_column="person", group_columns=["region"])


def test_the_condition_is_exact_for_large_products() -> None:
    condition = _index_query.within_cap_condition(["__dps_d0", "__dps_d1"])
    with DuckDBEngine() as e:
        for a, b, cap, within in [(1, 1, 1, True), (3, 2, 6, True), (3, 2, 5, False), (2**31, 2**31, 2**31, False)]:
            (value,) = e._con.execute(
                f"SELECT {condition} FROM (SELECT CAST($a AS UINTEGER) AS __dps_d0, CAST($b AS UINTEGER) AS __dps_d1)",
                {"a": min(a, 2**32 - 1), "b": min(b, 2**32 - 1), "max_groups": cap},
            ).fetchone()  # type: ignore[misc]
            assert bool(value) is within


def test_units_above_the_cap_keep_a_uniform_group_then_uniform_rows() -> None:
    """Per unit across salts and keys: the kept region is uniform over its 3, the kept row over that region's 2."""
    from scipy import stats

    from tests.statistical.gof import P_THRESHOLD

    units, salts = 20, 90
    frame = pd.DataFrame(
        [(u, region, i) for u in range(units) for region in "abc" for i in range(2)], columns=["person", "region", "i"]
    )
    with DuckDBEngine() as e:
        e.register("t", frame)
        picks: dict[int, Counter[tuple[str, int]]] = {u: Counter() for u in range(units)}
        for _ in range(salts):  # the group is the salt's choice, the row within it the registration key's
            e.index_units("t", unit_column="person", key=random_bytes(32), group_columns=["region"])
            view = e.bounded_rows(
                "t",
                unit_column="person",
                max_rows_per_unit=1,
                salt=random_bytes(32),
                group_column="region",
                max_groups_per_unit=1,
            )
            got = e.collect(view, columns=["person", "region", "i"])
            assert sorted(got["person"].tolist()) == list(range(units))  # one row each
            for p, region, i in zip(got["person"].tolist(), got["region"].tolist(), got["i"].tolist(), strict=True):
                picks[p][(region, i)] += 1
            e.drop(view)
    cells = [(region, i) for region in "abc" for i in range(2)]
    statistic = sum(
        sum((c[k] - salts / 6) ** 2 / (salts / 6) for k in cells) for c in picks.values()
    )  # 6 equally likely (region, row) picks per unit
    assert stats.chi2.sf(statistic, units * 5) > P_THRESHOLD
