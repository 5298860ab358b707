"""Grouping by several columns, on every engine: keys are tuples, caps count value combinations."""

from __future__ import annotations

from collections import Counter
from itertools import product

import numpy as np
import pandas as pd
import pytest

from dpsense.core.errors import UnsupportedRequest, UsageError
from dpsense.engine import BoundedView, Engine, clipped_sum, count_rows, count_units
from dpsense.noise.entropy import random_bytes


def visits(units: int = 80, seed: int = 5) -> pd.DataFrame:
    """Units with 1..8 rows over regions x diagnoses x an integer ward, a few NULL diagnoses."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 9, units)
    person = np.repeat(np.arange(units), sizes)
    n = person.size
    diagnosis = rng.choice(["flu", "cold", "asthma"], n).astype(object)
    diagnosis[rng.random(n) < 0.05] = None
    return pd.DataFrame(
        {
            "person": person,
            "region": rng.choice(["north", "south", "east"], n),
            "diagnosis": diagnosis,
            "ward": rng.integers(1, 4, n),
            "hours": np.round(rng.uniform(0.0, 20.0, n), 2),
        }
    )


def bound(engine: Engine, c: int = 100, **kw: object) -> BoundedView:
    return engine.bounded_rows("t", unit_column="person", max_rows_per_unit=c, salt=random_bytes(32), **kw)  # type: ignore[arg-type]


def test_private_keys_are_every_present_combination_as_tuples(engine: Engine) -> None:
    df = visits()
    engine.register("t", df)
    rows = engine.group_aggregates(
        bound(engine), group_column=("region", "diagnosis"), keys=None, aggregates=[count_rows(), count_units()]
    )
    expected = df.groupby(["region", "diagnosis"], dropna=False).agg(n=("person", "size"), u=("person", "nunique"))
    got = {r.key: (r.counts["count_rows"], r.counts["count_units"]) for r in rows}
    want = {
        (region, None if pd.isna(diagnosis) else diagnosis): (int(n), int(u))
        for (region, diagnosis), n, u in zip(expected.index, expected["n"], expected["u"], strict=True)
    }
    assert got == want
    assert all(isinstance(r.key, tuple) and len(r.key) == 2 for r in rows)


def test_public_tuple_keys_appear_in_order_and_unlisted_never(engine: Engine) -> None:
    df = visits()
    engine.register("t", df)
    keys = [("south", 2), ("north", 1), ("nowhere", 3), ("east", 3)]
    spec = clipped_sum("hours", low=0.0, high=24.0, grid_exponent=-10)
    rows = engine.group_aggregates(bound(engine), group_column=("region", "ward"), keys=keys, aggregates=[spec])
    assert [r.key for r in rows] == keys
    for row in rows:
        sub = df[(df["region"] == row.key[0]) & (df["ward"] == row.key[1])]["hours"]
        assert row.sums["sum_hours"].units == int(np.round(sub.to_numpy() * 2**10).astype(np.int64).sum())
    assert rows[2].sums["sum_hours"].units == 0


def test_a_cross_product_of_keys_with_three_columns(engine: Engine) -> None:
    df = visits()
    engine.register("t", df)
    keys = list(product(["east", "north"], ["cold", "flu"], [1, 2, 3]))
    rows = engine.group_aggregates(
        bound(engine), group_column=("region", "diagnosis", "ward"), keys=keys, aggregates=[count_rows()]
    )
    counts = Counter(zip(df["region"], df["diagnosis"], df["ward"].tolist(), strict=True))
    assert [(r.key, r.counts["count_rows"]) for r in rows] == [(k, counts[k]) for k in keys]


def test_a_group_cap_on_two_columns_counts_value_combinations(engine: Engine) -> None:
    engine.register("t", visits(units=120))
    view = bound(engine, c=4, group_column=("region", "ward"), max_groups_per_unit=2)
    got = engine.collect(view, columns=["person", "region", "ward"])
    by_unit: dict[int, list[tuple[str, int]]] = {}
    for p, r, w in zip(got["person"].tolist(), got["region"].tolist(), got["ward"].tolist(), strict=True):
        by_unit.setdefault(p, []).append((r, w))
    assert all(len(v) <= 4 and len(set(v)) <= 2 for v in by_unit.values())
    # a unit with two rows in one region but different wards keeps both combinations (cap 2), while a
    # cap on the region alone would have counted them as one group
    assert any(len({r for r, _ in v}) < len(set(v)) for v in by_unit.values())
    rows = engine.group_aggregates(view, group_column=("region", "ward"), keys=None, aggregates=[count_rows()])
    assert sum(r.counts["count_rows"] for r in rows) == sum(len(v) for v in by_unit.values())
    with pytest.raises(UnsupportedRequest, match="another grouping"):
        engine.group_aggregates(view, group_column="region", keys=None, aggregates=[count_rows()])
    with pytest.raises(UnsupportedRequest, match="another grouping"):
        engine.group_aggregates(view, group_column=("ward", "region"), keys=None, aggregates=[count_rows()])


@pytest.mark.parametrize(
    ("group_column", "keys", "message"),
    [
        (("region", "ward"), ["north"], "tuple of 2 values"),
        (("region", "ward"), [("north", 1, 2)], "tuple of 2 values"),
        (("region", "ward"), [("north", 1), ("north", 1)], "distinct"),
        (("region", "ward"), [("north", "1")], "type"),
        (("region", "region"), None, "once"),
        ((), None, "non-empty tuple"),
        (["region", "ward"], None, "non-empty tuple"),
    ],
)
def test_bad_groupings_are_usage_errors(engine: Engine, group_column: object, keys: object, message: str) -> None:
    engine.register("t", visits())
    with pytest.raises(UsageError, match=message):
        engine.group_aggregates(bound(engine), group_column=group_column, keys=keys, aggregates=[count_rows()])  # type: ignore[arg-type]
