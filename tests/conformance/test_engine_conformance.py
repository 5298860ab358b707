"""One conformance suite for every engine behind the seam (parametrized by the ``engine`` fixture)."""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from scipy import stats

from dpsense.core.errors import InvalidBounds, UsageError
from dpsense.engine import (
    BoundedView,
    CollectLimitExceeded,
    Engine,
    TableInfo,
    UnknownColumn,
    UnknownTable,
    clipped_sum,
    count_rows,
    count_units,
)
from dpsense.noise.entropy import random_bytes
from tests.statistical.gof import P_THRESHOLD

SECRET = "s3cr3t-value-9137"  # a data value that must never show up in an error


def people() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "person": [1, 1, 1, 2, 2, 3, 4, 4, 4, 4],
            "region": ["north", "north", "south", "south", "east", "north", "east", "east", "west", "north"],
            "hours": [1.5, 30.0, 2.25, -4.0, 8.0, 0.1, 3.0, 3.0, 7.5, 12.0],
            "note": [SECRET] * 10,
        }
    )


def bound(engine: Engine, table: str = "t", c: int = 100, **kw: object) -> BoundedView:
    return engine.bounded_rows(table, unit_column="person", max_rows_per_unit=c, salt=random_bytes(32), **kw)  # type: ignore[arg-type]


def round_half_away(q: Fraction) -> int:
    return int(math.copysign(math.floor(abs(q) + Fraction(1, 2)), q))


def expected_units(values: list[float | None], low: float, high: float, e: int) -> int:
    """Reference fixed-point sum in exact rationals."""
    grid = Fraction(2) ** e
    q_lo, q_hi = math.ceil(Fraction(low) / grid), math.floor(Fraction(high) / grid)
    total = 0
    for v in values:
        if v is None or math.isnan(v):
            continue
        clipped = Fraction(min(max(v, low), high))
        total += min(max(round_half_away(clipped / grid), q_lo), q_hi)
    return total


# -- registration ------------------------------------------------------------------------------------


def test_register_pandas_returns_public_schema_only(engine: Engine) -> None:
    info = engine.register("t", people())
    assert isinstance(info, TableInfo)
    assert info.column_names == ("person", "region", "hours", "note")
    assert [c.kind for c in info.columns] == ["integer", "string", "float", "string"]
    assert engine.table_info("t") == info
    assert SECRET not in repr(info)
    assert not any("count" in f or "rows" in f for f in vars(info))


@pytest.mark.parametrize("kind", ["csv", "parquet", "arrow", "polars"])
def test_register_other_sources_give_the_same_schema_and_rows(engine: Engine, kind: str, tmp_path: Path) -> None:
    df = people()
    source: object
    if kind == "csv":
        source = tmp_path / "people.csv"
        df.to_csv(source, index=False)
    elif kind == "parquet":
        source = tmp_path / "people.parquet"
        df.to_parquet(source, index=False)
    elif kind == "arrow":
        source = pa.Table.from_pandas(df, preserve_index=False)
    else:
        import polars as pl

        source = pl.from_pandas(df)
    info = engine.register("t", source)
    assert info.column_names == ("person", "region", "hours", "note")
    assert info.column("hours") is not None and info.column("hours").is_numeric  # type: ignore[union-attr]
    view = bound(engine)
    got = engine.collect(view, columns=["person", "hours"])
    want = df.sort_values(["person", "hours"])
    np.testing.assert_array_equal(got["person"], want["person"].to_numpy())
    np.testing.assert_array_equal(got["hours"], want["hours"].to_numpy())


def test_register_snapshot_ignores_later_edits(engine: Engine) -> None:
    df = people()
    engine.register("t", df)
    df.loc[0, "hours"] = 999.0
    got = engine.collect(bound(engine), columns=["hours"])["hours"]
    assert 999.0 not in got


# -- errors ------------------------------------------------------------------------------------------


def test_errors_are_usage_errors_naming_the_fix_without_data(engine: Engine) -> None:
    engine.register("t", people())
    salt = random_bytes(32)
    with pytest.raises(UnknownTable, match="register it first"):
        engine.bounded_rows("nope", unit_column="person", max_rows_per_unit=1, salt=salt)
    with pytest.raises(UnknownColumn, match="Fix: use one of its columns") as err:
        engine.bounded_rows("t", unit_column="persn", max_rows_per_unit=1, salt=salt)
    assert isinstance(err.value, UsageError)
    view = bound(engine)
    calls = [
        lambda: engine.group_aggregates(view, group_column="regoin", keys=None, aggregates=[count_rows()]),
        lambda: engine.group_aggregates(
            view, group_column=None, keys=None, aggregates=[clipped_sum("hourz", low=0, high=1, grid_exponent=-8)]
        ),
        lambda: engine.order_statistics_window(view, column="hourz", low=0, high=1, rank=1, width=0),
        lambda: engine.collect(view, columns=["x"]),
        lambda: engine.bounded_rows("t", unit_column="person", max_rows_per_unit=1, salt=salt, group_column="g"),
    ]
    for call in calls:
        with pytest.raises(UnknownColumn) as err:
            call()
        assert SECRET not in str(err.value) and "Fix:" in str(err.value)
    with pytest.raises(UsageError, match="random_bytes"):
        engine.bounded_rows("t", unit_column="person", max_rows_per_unit=1, salt=b"short")
    with pytest.raises(UsageError, match="positive integer"):
        engine.bounded_rows("t", unit_column="person", max_rows_per_unit=0, salt=salt)
    with pytest.raises(InvalidBounds):
        clipped_sum("hours", low=2, high=1, grid_exponent=-8)
    with pytest.raises(InvalidBounds, match="too coarse"):
        clipped_sum("hours", low=0.1, high=0.2, grid_exponent=0)
    with pytest.raises(UsageError, match="numeric") as err:
        engine.order_statistics_window(view, column="note", low=0, high=1, rank=1, width=0)
    assert SECRET not in str(err.value)
    with pytest.raises(UsageError, match="group column's type"):
        engine.group_aggregates(view, group_column="region", keys=[1, 2], aggregates=[count_rows()])
    with pytest.raises(UsageError, match="distinct"):
        engine.group_aggregates(view, group_column="region", keys=["a", "a"], aggregates=[count_rows()])
    with pytest.raises(UsageError, match="already registered"):
        engine.register("t", people())
    engine.drop(view)
    with pytest.raises(UnknownTable, match="dropped"):
        engine.collect(view, columns=["hours"])


# -- contribution bounding ---------------------------------------------------------------------------


def grid_table(units: int, rows_per_unit: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "person": np.repeat(np.arange(units), rows_per_unit),
            "label": np.tile(np.arange(rows_per_unit), units),
            "region": np.tile(np.array(["a", "b", "c", "d", "e"])[np.arange(rows_per_unit) % 5], units),
        }
    )


def selections(engine: Engine, view: BoundedView) -> dict[int, tuple[int, ...]]:
    got = engine.collect(view, columns=["person", "label"])
    out: dict[int, list[int]] = {}
    for p, lab in zip(got["person"].tolist(), got["label"].tolist(), strict=True):
        out.setdefault(p, []).append(lab)
    return {p: tuple(sorted(v)) for p, v in out.items()}


def test_bounded_rows_keep_at_most_c_per_unit_and_drop_null_units(engine: Engine) -> None:
    df = people()
    df["person"] = df["person"].astype("Int64")
    df.loc[9, "person"] = pd.NA
    engine.register("t", df)
    for c in (1, 2, 3):
        got = engine.collect(bound(engine, c=c), columns=["person"])["person"]
        counts = Counter(got.tolist())
        assert all(n <= c for n in counts.values())
        assert counts == {p: min(c, n) for p, n in Counter([1, 1, 1, 2, 2, 3, 4, 4, 4]).items()}


def test_bounded_rows_deterministic_given_salt_independent_of_row_order(engine: Engine) -> None:
    df = grid_table(50, 6)
    engine.register("t", df)
    engine.register("shuffled", df.sample(frac=1.0, random_state=3).reset_index(drop=True))
    salt = random_bytes(32)
    views = [
        engine.bounded_rows(name, unit_column="person", max_rows_per_unit=2, salt=salt)
        for name in ("t", "t", "shuffled")
    ]
    first = selections(engine, views[0])
    assert selections(engine, views[1]) == first == selections(engine, views[2])
    other = bound(engine, c=2)
    assert selections(engine, other) != first  # a new salt, a new choice


def test_bounded_rows_keep_identical_rows_as_a_multiset(engine: Engine) -> None:
    engine.register("t", pd.DataFrame({"person": [7] * 5, "hours": [1.0] * 5}))
    got = engine.collect(bound(engine, c=3), columns=["hours"])["hours"]
    assert got.tolist() == [1.0, 1.0, 1.0]


def chi_square_uniform(counts: Counter[tuple[int, ...]], categories: list[tuple[int, ...]]) -> float:
    observed = np.array([counts.get(cat, 0) for cat in categories], dtype=float)
    return float(stats.chisquare(observed).pvalue)


@pytest.mark.statistical
def test_bounded_rows_choose_a_uniform_subset_per_unit_across_salts(engine: Engine) -> None:
    units, m, c, salts = 400, 5, 2, 25
    engine.register("t", grid_table(units, m))
    subsets = list(combinations(range(m), c))
    counts: Counter[tuple[int, ...]] = Counter()
    per_unit_first: list[tuple[int, ...]] = []
    for _ in range(salts):
        with engine.release_scope():
            sel = selections(
                engine, engine.bounded_rows("t", unit_column="person", max_rows_per_unit=c, salt=random_bytes(32))
            )
        assert len(sel) == units and all(len(s) == c for s in sel.values())
        counts.update(sel.values())
        per_unit_first.append(sel[0])
    n = units * salts
    assert chi_square_uniform(counts, subsets) > P_THRESHOLD
    assert len(set(per_unit_first)) > 1  # the same unit gets different rows under different salts
    # Power: the same test rejects a selector that is uniform 95 % of the time and "first C rows" 5 %.
    biased = Counter({s: round(0.95 * n / len(subsets)) for s in subsets})
    biased[subsets[0]] += round(0.05 * n)
    assert chi_square_uniform(biased, subsets) < P_THRESHOLD


def test_group_cap_keeps_at_most_g_groups_and_c_rows_per_unit(engine: Engine) -> None:
    engine.register("t", grid_table(60, 10))
    view = bound(engine, c=3, group_column="region", max_groups_per_unit=2)
    got = engine.collect(view, columns=["person", "region"])
    by_unit: dict[int, list[str]] = {}
    for p, r in zip(got["person"].tolist(), got["region"].tolist(), strict=True):
        by_unit.setdefault(p, []).append(r)
    assert len(by_unit) == 60
    assert all(len(rs) == 3 and len(set(rs)) <= 2 for rs in by_unit.values())
    chosen = Counter(frozenset(rs) for rs in by_unit.values())
    assert len(chosen) > 1  # group choice varies across units


# -- exact fixed-point sums --------------------------------------------------------------------------


def test_exact_sum_of_a_million_tenths(engine: Engine) -> None:
    n = 1_000_000
    engine.register("t", pd.DataFrame({"person": np.arange(n), "hours": np.full(n, 0.1)}))
    view = bound(engine, c=1)
    spec = clipped_sum("hours", low=0, high=1, grid_exponent=-40)
    (row,) = engine.group_aggregates(view, group_column=None, keys=None, aggregates=[spec, count_rows()])
    assert row.counts["count_rows"] == n
    assert row.sums["sum_hours"].units == n * round_half_away(Fraction(0.1) * 2**40)
    assert row.sums["sum_hours"].value == n * Fraction(round_half_away(Fraction(0.1) * 2**40), 2**40)
    assert float(np.sum(np.full(n, 0.1))) != float(row.sums["sum_hours"].value)  # float summation drifts


def test_exact_sums_of_awkward_floats_match_fractions(engine: Engine) -> None:
    rng = np.random.default_rng(11)
    n = 20_000
    values = (rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)).tolist()
    values[:8] = [0.375, -0.375, 0.125, -0.625, float("inf"), float("-inf"), float("nan"), None]
    df = pd.DataFrame({"person": np.arange(n) // 3, "hours": values, "region": rng.choice(["x", "y"], n)})
    engine.register("t", df)
    view = bound(engine, c=3)
    for low, high, e in [(-5.0, 7.3, -2), (-1e6, 1e6, -20), (0.1, 0.7, -30), (-3.3, 1e12, 4)]:
        spec = clipped_sum("hours", low=low, high=high, grid_exponent=e)
        rows = engine.group_aggregates(view, group_column="region", keys=["x", "y"], aggregates=[spec])
        for row in rows:
            sub = df[df["region"] == row.key]["hours"].tolist()
            assert row.sums["sum_hours"].units == expected_units(sub, low, high, e), (low, high, e)
            assert spec.grid_low * 0 == 0 and low <= spec.grid_low <= spec.grid_high <= high


# -- group aggregates over public keys ---------------------------------------------------------------


def test_public_keys_appear_with_zero_counts_and_others_never(engine: Engine) -> None:
    engine.register("t", people())
    view = bound(engine)
    aggs = [count_rows(), count_units(), clipped_sum("hours", low=0, high=10, grid_exponent=-4)]
    rows = engine.group_aggregates(view, group_column="region", keys=["west", "nowhere", "north"], aggregates=aggs)
    assert [r.key for r in rows] == ["west", "nowhere", "north"]
    west, nowhere, north = rows
    assert west.counts == {"count_rows": 1, "count_units": 1}
    assert nowhere.counts == {"count_rows": 0, "count_units": 0} and nowhere.sums["sum_hours"].units == 0
    assert north.counts == {"count_rows": 4, "count_units": 3}
    assert north.sums["sum_hours"].value == Fraction(1.5) + 10 + Fraction(1, 16) * round(0.1 * 16) + 10
    assert engine.group_aggregates(view, group_column="region", keys=[], aggregates=[count_rows()]) == []
    every = engine.group_aggregates(view, group_column="region", keys=None, aggregates=[count_rows()])
    assert [r.key for r in every] == ["east", "north", "south", "west"]


# -- order statistics --------------------------------------------------------------------------------


def test_order_statistics_window_matches_numpy_with_padding(engine: Engine) -> None:
    rng = np.random.default_rng(5)
    data = [*rng.normal(0.0, 3.0, 101).tolist(), float("nan"), None]
    engine.register("t", pd.DataFrame({"person": np.arange(103), "hours": data}))
    view = bound(engine, c=1)
    low, high = -2.5, 4.0
    clipped = np.sort(np.clip(np.array([v for v in data if v is not None and not math.isnan(v)]), low, high))
    n = clipped.size
    for rank, width in [(51, 3), (1, 4), (n, 4), (n + 3, 2), (-2, 1), (30, 0)]:
        window = engine.order_statistics_window(view, column="hours", low=low, high=high, rank=rank, width=width)
        ranks = np.arange(rank - width, rank + width + 1)
        want = [low if i <= 0 else high if i > n else clipped[i - 1] for i in ranks]
        np.testing.assert_array_equal(window.ranks, ranks)
        np.testing.assert_array_equal(window.values, np.array(want))
        assert not hasattr(window, "n")


# -- collect -----------------------------------------------------------------------------------------


def test_collect_returns_sorted_points_as_numpy(engine: Engine) -> None:
    edges = pd.DataFrame({"person": [3, 1, 2, 1, 2], "src": [5, 1, 2, 1, 4], "dst": [6, 2, 3, 3, None]})
    engine.register("t", edges)
    got = engine.collect(bound(engine), columns=["src", "dst"])
    assert isinstance(got["src"], np.ndarray)
    assert list(zip(got["src"].tolist(), got["dst"].tolist(), strict=True)) == [(1, 2), (1, 3), (2, 3), (5, 6)]


def test_collect_stops_at_a_public_bound(engine: Engine) -> None:
    engine.register("t", people())
    view = bound(engine)
    assert engine.collect(view, columns=["hours"], max_rows=10)["hours"].size == 10
    with pytest.raises(CollectLimitExceeded) as err:
        engine.collect(view, columns=["hours", "region"], max_rows=9)
    assert err.value.max_rows == 9 and "10" not in str(err.value)  # the public bound only, never the count
    assert not isinstance(err.value, UsageError)  # it depends on the data: the caller charges it
    with pytest.raises(UsageError, match="positive integer"):
        engine.collect(view, columns=["hours"], max_rows=0)


# -- temporary relations -----------------------------------------------------------------------------


def test_temporary_relations_are_removed(engine: Engine) -> None:
    engine.register("t", people())
    assert engine.temporary_names() == []
    with engine.release_scope():
        bound(engine)
        bound(engine, c=1)
        assert len(engine.temporary_names()) == 2
    assert engine.temporary_names() == []
    with pytest.raises(RuntimeError), engine.release_scope():
        bound(engine)
        raise RuntimeError("release failed")
    assert engine.temporary_names() == []
    view = bound(engine)
    engine.drop(view)
    engine.drop(view)
    assert engine.temporary_names() == []
