"""Conformance: public filters before bounding, and the bound's semantics with identical rows."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from scipy import stats

from dpsense.core.errors import UnsupportedRequest, UsageError
from dpsense.engine import Engine, Predicate, UnknownColumn, count_rows, predicate
from dpsense.noise.entropy import random_bytes
from tests.conformance.test_engine_conformance import SECRET, bound, grid_table, people, selections
from tests.statistical.gof import P_THRESHOLD


def kept(engine: Engine, *where: Predicate, column: str = "hours", c: int = 100) -> list[object]:
    view = engine.bounded_rows("t", unit_column="person", max_rows_per_unit=c, salt=random_bytes(32), where=where)
    assert view.where == tuple(where)
    got = engine.collect(view, columns=[column])[column].tolist()
    return sorted(got)


def test_each_operator_on_numbers_strings_and_booleans(engine: Engine) -> None:
    df = people()
    df["flag"] = [True, False] * 5
    engine.register("t", df)
    hours = sorted(df["hours"].tolist())
    cases = {
        ("==", 3.0): [3.0, 3.0],
        ("!=", 3.0): [h for h in hours if h != 3.0],
        ("<", 2.25): [h for h in hours if h < 2.25],
        ("<=", 2.25): [h for h in hours if h <= 2.25],
        (">", 8.0): [h for h in hours if h > 8.0],
        (">=", 8.0): [h for h in hours if h >= 8.0],
        ("<", 3): [h for h in hours if h < 3],  # an int compared with a float column
    }
    for (op, value), want in cases.items():
        assert kept(engine, predicate("hours", op, value)) == want, op
    assert kept(engine, predicate("hours", "in", [0.1, 7.5, 99.0])) == [0.1, 7.5]
    assert kept(engine, predicate("region", "in", ("west", "south"))) == [-4.0, 2.25, 7.5]
    assert kept(engine, predicate("region", "==", "east")) == [3.0, 3.0, 8.0]
    assert kept(engine, predicate("flag", "==", True)) == sorted(df["hours"][df["flag"]].tolist())
    assert kept(engine, predicate("person", ">=", 4)) == [3.0, 3.0, 7.5, 12.0]


def test_all_predicates_must_hold(engine: Engine) -> None:
    engine.register("t", people())
    both = kept(engine, predicate("region", "==", "north"), predicate("hours", ">", 1.0))
    assert both == [1.5, 12.0, 30.0]
    assert kept(engine, predicate("region", "==", "north"), predicate("region", "==", "south")) == []


def test_null_and_nan_fail_every_predicate(engine: Engine) -> None:
    table = pa.table(
        {
            "person": [1, 2, 3, 4, 5],
            "x": pa.array([1.0, None, float("nan"), float("inf"), -2.0]),  # a NULL and a NaN
            "s": ["a", None, "b", "a", None],
            "label": [10, 20, 30, 40, 50],
        }
    )
    engine.register("t", table)
    assert kept(engine, predicate("x", "!=", 1.0), column="label") == [40, 50]
    assert kept(engine, predicate("x", ">", 0.0), column="label") == [10, 40]  # NaN is not "large"
    assert kept(engine, predicate("x", "<=", math.inf), column="label") == [10, 40, 50]
    assert kept(engine, predicate("x", "in", [1.0, -2.0]), column="label") == [10, 50]
    assert kept(engine, predicate("s", "!=", "a"), column="label") == [30]
    assert kept(engine, predicate("s", "in", ["a", "b"]), column="label") == [10, 30, 40]
    assert kept(engine, predicate("s", "==", "a"), column="label") == [10, 40]


def test_values_are_parameters_not_sql(engine: Engine) -> None:
    odd = "O'Brien\"; DROP TABLE t; --"
    engine.register("t", pd.DataFrame({"person": [1, 2, 3], "name": [odd, "x", "it's"], "label": [1, 2, 3]}))
    assert kept(engine, predicate("name", "==", odd), column="label") == [1]
    assert kept(engine, predicate("name", "in", ["it's", odd]), column="label") == [1, 3]
    assert engine.table_info("t").column_names == ("person", "name", "label")


def test_filters_apply_before_the_bound(engine: Engine) -> None:
    # Each unit has labels 0..9; the filter keeps 3 and 7 only. Filtering first keeps both for every
    # unit with C = 2; bounding first would keep both for about 1 unit in 45.
    engine.register("t", grid_table(40, 10))
    for _ in range(3):
        view = engine.bounded_rows(
            "t",
            unit_column="person",
            max_rows_per_unit=2,
            salt=random_bytes(32),
            where=[predicate("label", "in", [3, 7])],
        )
        assert set(selections(engine, view).values()) == {(3, 7)}
        assert len(selections(engine, view)) == 40


def test_bound_holds_among_filtered_rows_and_with_a_group_cap(engine: Engine) -> None:
    engine.register("t", grid_table(60, 20))  # two rows per region among labels 10..19
    where = [predicate("label", ">=", 10)]
    view = bound(engine, c=3, group_column="region", max_groups_per_unit=2, where=where)
    got = engine.collect(view, columns=["person", "region", "label"])
    by_unit: dict[int, list[tuple[str, int]]] = {}
    for p, r, lab in zip(got["person"].tolist(), got["region"].tolist(), got["label"].tolist(), strict=True):
        by_unit.setdefault(p, []).append((r, lab))
    assert len(by_unit) == 60
    assert all(len(rows) == 3 and len({r for r, _ in rows}) <= 2 for rows in by_unit.values())
    assert all(lab >= 10 for rows in by_unit.values() for _, lab in rows)
    (row,) = engine.group_aggregates(view, group_column=None, keys=None, aggregates=[count_rows()])
    assert row.counts["count_rows"] == 180


def test_filter_errors_name_the_column_and_the_fix(engine: Engine) -> None:
    engine.register("t", people())
    salt = random_bytes(32)

    def run(*where: object) -> None:
        engine.bounded_rows("t", unit_column="person", max_rows_per_unit=1, salt=salt, where=where)  # type: ignore[arg-type]

    with pytest.raises(UnknownColumn, match="hourz"):
        run(predicate("hourz", "==", 1.0))
    with pytest.raises(UsageError, match="needs a numeric column") as err:
        run(predicate("note", "<", 3))
    assert SECRET not in str(err.value)
    with pytest.raises(UsageError, match="kind of its column"):
        run(predicate("hours", "==", "3.0"))
    with pytest.raises(UsageError, match="kind of its column"):
        run(predicate("region", "in", ["north", 3]))
    with pytest.raises(UsageError, match="kind of its column"):
        run(predicate("hours", "==", True))
    with pytest.raises(UsageError, match="list of predicates"):
        engine.bounded_rows(
            "t", unit_column="person", max_rows_per_unit=1, salt=salt, where=predicate("hours", "==", 1.0)
        )  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="every filter is a Predicate"):
        run(("hours", "==", 1.0))
    assert engine.temporary_names() == []


def test_filters_on_unsupported_column_kinds_are_refused(engine: Engine) -> None:
    engine.register("t", pd.DataFrame({"person": [1], "blob": [b"\x00"]}))
    with pytest.raises(UnsupportedRequest, match="filters apply to"):
        engine.bounded_rows(
            "t", unit_column="person", max_rows_per_unit=1, salt=random_bytes(32), where=[predicate("blob", "==", 1)]
        )


# -- identical rows ----------------------------------------------------------------------------------


def test_identical_rows_keep_order_independence_and_the_bound(engine: Engine) -> None:
    rng = np.random.default_rng(2)
    units = np.repeat(np.arange(80), 7)
    df = pd.DataFrame({"person": units, "label": rng.integers(0, 3, units.size)})  # many identical rows
    engine.register("t", df)
    engine.register("shuffled", df.sample(frac=1.0, random_state=9).reset_index(drop=True))
    salt = random_bytes(32)
    for c in (1, 2, 4):
        picks = []
        for name in ("t", "shuffled"):
            view = engine.bounded_rows(name, unit_column="person", max_rows_per_unit=c, salt=salt)
            picks.append(selections(engine, view))
        assert picks[0] == picks[1]
        assert all(len(labels) == c for labels in picks[0].values())
        for p, labels in picks[0].items():
            available = Counter(df["label"][df["person"] == p].tolist())
            assert not Counter(labels) - available


@pytest.mark.statistical
def test_each_copy_of_an_identical_row_is_an_independent_draw(engine: Engine) -> None:
    # Unit rows {A, A, B} with C = 1: a uniform draw over rows keeps A with probability 2/3; keeping
    # identical rows as one block would keep A with probability 1/2.
    units = 1500
    df = pd.DataFrame({"person": np.repeat(np.arange(units), 3), "label": np.tile([0, 0, 1], units)})
    engine.register("t", df)
    a = n = 0
    for _ in range(4):
        with engine.release_scope():
            view = engine.bounded_rows("t", unit_column="person", max_rows_per_unit=1, salt=random_bytes(32))
            labels = engine.collect(view, columns=["label"])["label"]
        n += labels.size
        a += int((labels == 0).sum())
    assert n == 4 * units
    assert stats.binomtest(a, n, 2 / 3).pvalue > P_THRESHOLD
    assert stats.binomtest(a, n, 1 / 2).pvalue < P_THRESHOLD  # power against the block rule


@pytest.mark.statistical
def test_subsets_with_identical_rows_follow_the_uniform_draw_over_rows(engine: Engine) -> None:
    # Unit rows {A, A, B, C} with C = 2: a uniform pair of rows is {A, A} 1/6, {A, B} 2/6, {A, C} 2/6,
    # {B, C} 1/6 of the time. Re-ranking only some of the candidates would skew this.
    units = 1500
    df = pd.DataFrame({"person": np.repeat(np.arange(units), 4), "label": np.tile([0, 0, 1, 2], units)})
    engine.register("t", df)
    outcomes: Counter[tuple[int, ...]] = Counter()
    for _ in range(4):
        with engine.release_scope():
            view = engine.bounded_rows("t", unit_column="person", max_rows_per_unit=2, salt=random_bytes(32))
            outcomes.update(selections(engine, view).values())
    assert sum(outcomes.values()) == 4 * units
    pairs, probabilities = [(0, 0), (0, 1), (0, 2), (1, 2)], np.array([1, 2, 2, 1]) / 6
    observed = np.array([outcomes[p] for p in pairs])
    assert stats.chisquare(observed, probabilities * observed.sum()).pvalue > P_THRESHOLD
