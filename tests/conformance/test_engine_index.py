"""Conformance: the unit index (``index_units``) and the window-free bounding it enables.

On an indexed table, ``bounded_rows`` without a group cap keeps, per unit, at most C rows chosen by a
secret registration order: on DuckDB's own rules the first C (passing) rows of that order, the same in
every release; on the portable rules (and Spark) C cyclically consecutive positions rotated by a
salt-keyed offset per unit and release. The tests check what the protocol promises: exactly
min(C, n_u) rows per unit (min(C, k) of k passing rows under a filter), each row kept with probability
C / n_u over the secret that chooses (the registration's key on DuckDB's rules, the release's salt on
the portable ones; with power against a rule that ignores it), uniform C-subsets, independence from
physical row order, hidden columns that never show, and an index that ``apply_policies`` and
``forget`` drop.
"""

from __future__ import annotations

from collections import Counter
from itertools import combinations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from scipy import stats

from dpsense.core.errors import UsageError
from dpsense.engine import (
    BoundedView,
    ColumnQuality,
    DuckDBEngine,
    Engine,
    UnknownColumn,
    UnknownTable,
    clipped_sum,
    count_rows,
    predicate,
)
from dpsense.noise.entropy import random_bytes
from tests.conformance.test_engine_conformance import SECRET, bound, people, selections
from tests.statistical.gof import P_THRESHOLD, chi_square_pvalue

KEY = bytes(range(100, 132))
HIDDEN = ("__dps_pos", "__dps_n", "__dps_uh")  # the last on the portable rules only


def sized_units(sizes: dict[int, int]) -> pd.DataFrame:
    """``sizes[n]`` units of n rows each; rows are told apart by ``label`` (0..n-1 within the unit)."""
    persons: list[int] = []
    labels: list[int] = []
    unit_sizes: list[int] = []
    for n, count in sorted(sizes.items()):
        for _ in range(count):
            unit = len(set(persons))
            persons += [unit] * n
            labels += list(range(n))
            unit_sizes += [n] * n
    return pd.DataFrame({"person": persons, "label": labels, "size": unit_sizes})


def indexed(engine: Engine, frame: object, table: str = "t", key: bytes = KEY) -> None:
    engine.register(table, frame)
    engine.index_units(table, unit_column="person", key=key)


def kept_per_unit(engine: Engine, view: BoundedView) -> Counter[int]:
    return Counter(engine.collect(view, columns=["person"])["person"].tolist())


# -- the bound ---------------------------------------------------------------------------------------


def test_indexed_bound_keeps_exactly_min_c_n_rows_and_drops_null_units(engine: Engine) -> None:
    df = sized_units({1: 5, 2: 5, 3: 5, 7: 5, 20: 3})
    df["person"] = df["person"].astype("Int64")
    df = pd.concat([df, pd.DataFrame({"person": [pd.NA] * 4, "label": [0, 1, 2, 3], "size": [4] * 4})])
    df["person"] = df["person"].astype("Int64")
    indexed(engine, df.sample(frac=1.0, random_state=2).reset_index(drop=True))
    sizes = Counter(df["person"].dropna().astype(int).tolist())
    for c in (1, 2, 3, 7, 25):
        got = kept_per_unit(engine, bound(engine, c=c))
        assert got == {p: min(c, n) for p, n in sizes.items()}, c


def test_indexed_bound_is_deterministic_given_salt_and_independent_of_row_order(engine: Engine) -> None:
    df = sized_units({4: 30, 9: 30})
    dup = pd.DataFrame({"person": [999] * 6, "label": [1, 1, 1, 2, 2, 3], "size": [6] * 6})  # identical rows
    df = pd.concat([df, dup], ignore_index=True)
    indexed(engine, df, "t")
    indexed(engine, df.sample(frac=1.0, random_state=9).reset_index(drop=True), "shuffled")
    indexed(engine, pa.Table.from_pandas(df.iloc[::-1], preserve_index=False), "reversed")
    salt = random_bytes(32)
    views = [
        engine.bounded_rows(name, unit_column="person", max_rows_per_unit=2, salt=salt)
        for name in ("t", "t", "shuffled", "reversed")
    ]
    first = selections(engine, views[0])
    assert all(selections(engine, v) == first for v in views[1:])
    assert len(first[999]) == 2
    if chosen_at_registration(engine):
        # DuckDB's rule: the snapshot's choice, the same under every salt; a new registration key, a
        # new choice (60 units of 4 or 9 rows keeping the same pairs under ten keys: never)
        assert all(selections(engine, bound(engine, c=2)) == first for _ in range(5))
        fresh = []
        for _ in range(10):
            engine.index_units("t", unit_column="person", key=random_bytes(32))
            fresh.append(selections(engine, bound(engine, c=2)))
        assert any(f != first for f in fresh)
    else:
        # a new salt, a new choice (one salt in 36 repeats it for the unit sizes 4, 6, 9)
        assert any(selections(engine, bound(engine, c=2)) != first for _ in range(10))


def test_indexed_bound_keeps_cyclic_windows_of_one_order(engine: Engine) -> None:
    """Portable rules: C cyclically consecutive positions; DuckDB's: one subset, the snapshot's."""
    n, c = 6, 2
    indexed(engine, sized_units({n: 40}))
    windows: dict[int, set[tuple[int, ...]]] = {}
    for _ in range(60):
        with engine.release_scope():
            for person, labels in selections(engine, bound(engine, c=c)).items():
                windows.setdefault(person, set()).add(labels)
    for person, seen in windows.items():
        # n windows of C consecutive positions at most (not all C(n, C) = 15 subsets); every row in C of them.
        assert len(seen) == 1 if chosen_at_registration(engine) else len(seen) <= n, person
        assert all(sum(label in w for w in seen) <= c for label in range(n)), person


def inclusion_counts(
    engine: Engine, sizes: dict[int, int], c: int, secrets: list[bytes], *, by_key: bool
) -> dict[int, np.ndarray]:
    """Per unit size n: for each unit of that size, how often its row with label 0 was kept.

    Each secret is a release's salt (``by_key=False``) or a fresh registration key, the table indexed
    again under it (``by_key=True``).
    """
    counts: Counter[int] = Counter()
    for secret in secrets:
        if by_key:
            engine.index_units("t", unit_column="person", key=secret)
        with engine.release_scope():
            salt = random_bytes(32) if by_key else secret
            view = engine.bounded_rows("t", unit_column="person", max_rows_per_unit=c, salt=salt)
            got = engine.collect(view, columns=["person", "label"])
        counts.update(p for p, lab in zip(got["person"].tolist(), got["label"].tolist(), strict=True) if lab == 0)
    frame = sized_units(sizes)
    size_of = frame.groupby("person")["size"].first()
    out: dict[int, list[int]] = {}
    for person, n in size_of.items():
        out.setdefault(int(n), []).append(counts.get(int(person), 0))
    return {n: np.array(v, dtype=np.int64) for n, v in out.items()}


def binomial_pvalue(samples: np.ndarray, trials: int, p: float) -> float:
    return chi_square_pvalue(samples, lambda k: stats.binom.pmf(k, trials, p), 0, trials)


def chosen_at_registration(engine: Engine) -> bool:
    """DuckDB's default rule: the first C rows of the registration order (portable engines: a rotation per release)."""
    return isinstance(engine, DuckDBEngine) and not engine.portable


@pytest.mark.statistical
def test_each_row_is_kept_with_probability_c_over_n_over_the_choosing_secret(engine: Engine) -> None:
    """Per unit, one designated row's inclusion count over S fresh secrets is Binomial(S, C / n_u).

    The secret is the registration key on DuckDB's rules and the release's salt on the portable ones.
    Units are independent, so the counts of one size form a sample of that binomial: a chi-square
    goodness-of-fit test with bins of >= 20 expected draws and the 1e-10 threshold. Power: the same
    test rejects a rule that keeps a fixed subset per unit whatever the secret ("the first C rows" of
    a fixed order), here the engine itself run with one secret repeated, and a marginal 30 % off.
    """
    sizes, c, trials = {3: 150, 4: 150, 7: 150, 12: 150}, 2, 48
    by_key = chosen_at_registration(engine)
    indexed(engine, sized_units(sizes).sample(frac=1.0, random_state=4))
    fresh = inclusion_counts(engine, sizes, c, [random_bytes(32) for _ in range(trials)], by_key=by_key)
    repeated = inclusion_counts(engine, sizes, c, [random_bytes(32)] * trials, by_key=by_key)
    for n, counts in fresh.items():
        assert binomial_pvalue(counts, trials, c / n) > P_THRESHOLD, n
        assert binomial_pvalue(repeated[n], trials, c / n) < P_THRESHOLD, n
        # A marginal off by 30 % fails too.
        assert binomial_pvalue(counts, trials, min(1.0, 1.3 * c / n)) < P_THRESHOLD, n


@pytest.mark.statistical
def test_the_registration_choice_is_a_uniform_c_subset() -> None:
    """DuckDB's rule: over fresh registration keys a unit keeps each of its C(n, C) subsets alike.

    Row-by-row uniformity is not enough (C consecutive rows of a cyclic order are uniform row by row);
    here each of the C(6, 2) = 15 pairs of a unit of 6 rows must come up about S / 15 times, for each
    of 4 units (chi-square, pooled over independent units). Power: the same test rejects the cyclic
    windows of one order per unit (6 of the 15 pairs), simulated with the test's own draws.
    """
    engine = DuckDBEngine()
    n, c, units, trials = 6, 2, 4, 450
    engine.register("t", sized_units({n: units}))
    pairs = list(combinations(range(n), c))
    per_unit: dict[int, Counter[tuple[int, ...]]] = {}
    for _ in range(trials):
        engine.index_units("t", unit_column="person", key=random_bytes(32))
        for person, labels in selections(engine, bound(engine, c=c)).items():
            per_unit.setdefault(person, Counter())[labels] += 1
    assert _pooled_chi_square(per_unit, pairs) > P_THRESHOLD
    rng = np.random.default_rng(6)  # the control's own draws
    windows: dict[int, Counter[tuple[int, ...]]] = {}
    for unit in range(units):
        order = rng.permutation(n)
        for _ in range(trials):
            start = int(rng.integers(n))
            windows.setdefault(unit, Counter())[tuple(sorted(int(order[(start + i) % n]) for i in range(c)))] += 1
    assert _pooled_chi_square(windows, pairs) < P_THRESHOLD


def test_first_c_rows_is_rejected_by_the_inclusion_test() -> None:
    """The rule "keep the C first rows of each unit" (by label) gives counts 0 or S: far from binomial."""
    trials, c, n = 48, 2, 7
    first_rows = np.array([trials] * 75 + [0] * 75, dtype=np.int64)  # label 0 is first in some units, not others
    assert binomial_pvalue(first_rows, trials, c / n) < P_THRESHOLD
    rng = np.random.default_rng(3)
    assert binomial_pvalue(rng.binomial(trials, c / n, 150), trials, c / n) > P_THRESHOLD


# -- what falls back to the windowed bound -----------------------------------------------------------


def test_filters_group_caps_and_other_unit_columns_still_bound_correctly(engine: Engine) -> None:
    df = sized_units({5: 20, 8: 20})
    df["region"] = np.where(df["label"] % 2 == 0, "even", "odd")
    df["other"] = df["person"] // 2
    indexed(engine, df)
    filtered = engine.bounded_rows(
        "t", unit_column="person", max_rows_per_unit=2, salt=random_bytes(32), where=[predicate("region", "==", "odd")]
    )
    odd = Counter(df[df["region"] == "odd"]["person"].tolist())
    assert kept_per_unit(engine, filtered) == {p: min(2, k) for p, k in odd.items()}
    capped = bound(engine, c=3, group_column="region", max_groups_per_unit=1)
    got = engine.collect(capped, columns=["person", "region"])
    by_unit: dict[int, set[str]] = {}
    for p, r in zip(got["person"].tolist(), got["region"].tolist(), strict=True):
        by_unit.setdefault(p, set()).add(r)
    assert all(len(rs) == 1 for rs in by_unit.values()) and len(by_unit) == 40
    other = engine.bounded_rows("t", unit_column="other", max_rows_per_unit=4, salt=random_bytes(32))
    assert set(Counter(engine.collect(other, columns=["other"])["other"].tolist()).values()) == {4}


# -- hidden columns ----------------------------------------------------------------------------------


def test_hidden_columns_never_show(engine: Engine) -> None:
    engine.register("t", people())
    info = engine.table_info("t")
    print_before = engine.fingerprint("t", KEY)
    quality_before = engine.data_quality("t", list(info.column_names))
    engine.index_units("t", unit_column="person", key=KEY)
    assert engine.table_info("t") == info
    assert engine.fingerprint("t", KEY) == print_before
    assert engine.data_quality("t", list(info.column_names)) == quality_before
    view = bound(engine)
    assert view.schema == info
    everything = engine.collect(view, columns=list(info.column_names))
    assert set(everything) == set(info.column_names)
    for hidden in HIDDEN:
        with pytest.raises(UnknownColumn) as err:
            engine.collect(view, columns=[hidden])
        assert SECRET not in str(err.value)
        with pytest.raises(UnknownColumn):
            engine.data_quality("t", [hidden])
        with pytest.raises(UnknownColumn):
            engine.group_aggregates(
                view, group_column=None, keys=None, aggregates=[clipped_sum(hidden, low=0, high=9, grid_exponent=0)]
            )
        with pytest.raises(UnknownColumn):
            engine.group_aggregates(view, group_column=hidden, keys=None, aggregates=[count_rows()])
        with pytest.raises(UnknownColumn):
            engine.apply_policies("t", drop_missing=[hidden])
        with pytest.raises(UnknownColumn):
            engine.bounded_rows("t", unit_column=hidden, max_rows_per_unit=1, salt=random_bytes(32))


def test_index_units_argument_errors(engine: Engine) -> None:
    engine.register("t", people())
    with pytest.raises(UnknownTable):
        engine.index_units("nope", unit_column="person", key=KEY)
    with pytest.raises(UnknownColumn):
        engine.index_units("t", unit_column="persn", key=KEY)
    for key in (b"short", "0123456789abcdef0123", None):
        with pytest.raises(UsageError, match="at least 16 secret bytes"):
            engine.index_units("t", unit_column="person", key=key)  # type: ignore[arg-type]


# -- index lifetime ----------------------------------------------------------------------------------


def test_policies_drop_the_index_and_the_bound_stays_exact(engine: Engine) -> None:
    df = sized_units({4: 10, 6: 10})
    df["x"] = np.where(df["label"] == 0, np.nan, 1.0)  # every unit loses one row to the policy
    indexed(engine, df)
    before = bound(engine, c=3)
    engine.apply_policies("t", drop_missing=["x"], drop_nonfinite=["x"])
    with pytest.raises(UnknownTable, match="snapshot replaced"):
        engine.collect(before, columns=["person"])  # a view never mixes two snapshots
    assert engine.table_info("t").column_names == ("person", "label", "size", "x")
    sizes = Counter(df[df["label"] != 0]["person"].tolist())
    for c in (2, 3, 5):
        assert kept_per_unit(engine, bound(engine, c=c)) == {p: min(c, n) for p, n in sizes.items()}
    engine.index_units("t", unit_column="person", key=random_bytes(32))  # the release system indexes again
    assert kept_per_unit(engine, bound(engine, c=3)) == {p: min(3, n) for p, n in sizes.items()}
    for column in HIDDEN:
        with pytest.raises(UnknownColumn):
            engine.collect(bound(engine), columns=[column])


def test_reindexing_and_forgetting(engine: Engine) -> None:
    df = sized_units({3: 10, 5: 10})
    df["pair"] = df["person"] // 2
    indexed(engine, df)
    view = bound(engine, c=1)
    engine.index_units("t", unit_column="pair", key=KEY)  # replaces the index on 'person'
    with pytest.raises(UnknownTable):
        engine.collect(view, columns=["person"])
    pairs = engine.bounded_rows("t", unit_column="pair", max_rows_per_unit=2, salt=random_bytes(32))
    assert set(Counter(engine.collect(pairs, columns=["pair"])["pair"].tolist()).values()) == {2}
    by_person = bound(engine, c=2)  # no longer indexed on 'person': still exact
    assert set(kept_per_unit(engine, by_person).values()) == {2}
    engine.forget("t")
    engine.register("t", people())  # the same name, new data, no index
    assert set(kept_per_unit(engine, bound(engine, c=1)).values()) == {1}


def test_selections_are_temporary(engine: Engine) -> None:
    indexed(engine, people())
    with engine.release_scope():
        views = [bound(engine), bound(engine, c=1)]
        assert len(engine.temporary_names()) == 2
    assert engine.temporary_names() == []
    with pytest.raises(UnknownTable):
        engine.collect(views[0], columns=["person"])
    view = bound(engine)
    engine.drop(view)
    engine.drop(view)
    assert engine.temporary_names() == []


def test_aggregates_on_an_indexed_bound_match_the_kept_rows(engine: Engine) -> None:
    rng = np.random.default_rng(8)
    n = 3000
    df = pd.DataFrame(
        {
            "person": rng.integers(0, 400, n),
            "region": rng.choice(["a", "b", "c"], n),
            "hours": np.round(rng.uniform(-5, 30, n), 2),
        }
    )
    indexed(engine, df)
    view = bound(engine, c=3)
    kept = engine.collect(view, columns=["person", "region", "hours"])
    spec = clipped_sum("hours", low=0, high=24, grid_exponent=-10)
    rows = engine.group_aggregates(
        view, group_column="region", keys=["a", "b", "c", "z"], aggregates=[count_rows(), spec]
    )
    for row in rows:
        mask = kept["region"] == row.key
        assert row.counts["count_rows"] == int(mask.sum())
        clipped = np.clip(kept["hours"][mask], 0, 24)
        assert row.sums["sum_hours"].units == int(np.sum(np.round(clipped * 1024).astype(np.int64)))
    assert engine.data_quality("t", ["hours"]) == {"hours": ColumnQuality(0, 0, 0)}


def test_a_filtered_bound_on_an_indexed_table_keeps_min_c_passing_rows_of_every_unit(engine: Engine) -> None:
    """Small units (n_u <= C) keep every passing row with no window; large ones a C-subset of theirs.

    The sums of the declared clip ride along as stored grid units on the DuckDB rules: the aggregate
    must equal clipping and rounding the kept rows again.
    """
    df = sized_units({1: 15, 2: 15, 3: 15, 6: 15, 11: 15})
    df["hours"] = (df["label"] * 3.37 + df["person"] * 0.5) % 30 - 2
    df["kind"] = ["a", "b", "a", "c"] * (len(df) // 4) + ["a", "b", "a", "c"][: len(df) % 4]
    engine.register("t", df)
    spec = clipped_sum("hours", low=0, high=24, grid_exponent=-10)
    engine.index_units("t", unit_column="person", key=KEY, sums=[spec])
    where = [predicate("kind", "in", ["a", "c"]), predicate("hours", ">=", 1.5)]
    passing = df[df["kind"].isin(["a", "c"]) & (df["hours"] >= 1.5)]
    expected = {p: min(3, k) for p, k in Counter(passing["person"].tolist()).items()}
    for _ in range(3 if isinstance(engine, DuckDBEngine) else 1):  # Spark: one salt (each pass takes seconds)
        view = engine.bounded_rows("t", unit_column="person", max_rows_per_unit=3, salt=random_bytes(32), where=where)
        kept = engine.collect(view, columns=["person", "label", "hours"])
        assert Counter(kept["person"].tolist()) == expected
        small = passing[passing["size"] <= 3]
        got_small = set(zip(kept["person"].tolist(), kept["label"].tolist(), strict=True))
        assert set(zip(small["person"].tolist(), small["label"].tolist(), strict=True)) <= got_small
        rows = engine.group_aggregates(view, group_column=None, keys=None, aggregates=[count_rows(), spec])
        clipped = np.clip(kept["hours"], 0, 24)
        assert rows[0].counts["count_rows"] == len(kept["person"])
        assert rows[0].sums["sum_hours"].units == int(np.sum(np.round(clipped * 1024).astype(np.int64)))
        engine.drop(view)


def test_a_filtered_bound_on_an_indexed_table_draws_uniform_subsets_of_the_large_units() -> None:
    """Each passing row of a unit with more rows than C stays with probability C / k over registration keys.

    On DuckDB's own rules, the only ones with the split selection (``_index_query.filtered_query``);
    the portable rules and Spark window every unit, as the tests of the windowed bound check.
    """
    engine = DuckDBEngine()
    df = sized_units({10: 1})
    engine.register("t", df)
    where = [predicate("label", "<", 8)]  # 8 of the unit's 10 rows pass; C = 2 of them stay
    trials = 400
    kept: Counter[int] = Counter()
    for _ in range(trials):
        engine.index_units("t", unit_column="person", key=random_bytes(32))
        view = engine.bounded_rows("t", unit_column="person", max_rows_per_unit=2, salt=random_bytes(32), where=where)
        kept.update(engine.collect(view, columns=["label"])["label"].tolist())
        engine.drop(view)
    assert set(kept) <= set(range(8))
    assert stats.chisquare([kept[i] for i in range(8)]).pvalue > P_THRESHOLD


def _pooled_chi_square(per_unit: dict[int, Counter[tuple[int, ...]]], pairs: list[tuple[int, ...]]) -> float:
    """p-value of the per-unit chi-square statistics of the pair counts, summed over units (independent)."""
    statistic, df = 0.0, 0
    for counts in per_unit.values():
        total = sum(counts.values())
        expected = total / len(pairs)
        statistic += sum((counts[p] - expected) ** 2 / expected for p in pairs)
        df += len(pairs) - 1
    return float(stats.chi2.sf(statistic, df))


def test_a_filtered_bound_on_an_indexed_table_draws_uniform_c_subsets_not_only_uniform_rows() -> None:
    """Each large unit's kept pair is uniform over all C-subsets of its passing rows, over registration keys.

    Per unit, not pooled: a rule that keeps C consecutive passing rows of a cyclic order is uniform
    row by row, yet each unit then only ever keeps 8 of the 28 pairs. Power: the same test rejects that
    rule, simulated with one fixed order per unit.
    """
    engine = DuckDBEngine()
    units, keys, c = 20, 120, 2
    engine.register("t", sized_units({10: units}))
    where = [predicate("label", "<", 8)]
    pairs = list(combinations(range(8), c))
    per_unit: dict[int, Counter[tuple[int, ...]]] = {}
    for _ in range(keys):
        engine.index_units("t", unit_column="person", key=random_bytes(32))
        view = engine.bounded_rows("t", unit_column="person", max_rows_per_unit=c, salt=random_bytes(32), where=where)
        got = engine.collect(view, columns=["person", "label"])
        by_unit: dict[int, list[int]] = {}
        for p, label in zip(got["person"].tolist(), got["label"].tolist(), strict=True):
            by_unit.setdefault(p, []).append(label)
        assert len(by_unit) == units and all(len(v) == c for v in by_unit.values())
        for p, labels in by_unit.items():
            per_unit.setdefault(p, Counter())[tuple(sorted(labels))] += 1
        engine.drop(view)
    assert _pooled_chi_square(per_unit, pairs) > P_THRESHOLD
    rng = np.random.default_rng(5)  # the control's own draws
    rotated: dict[int, Counter[tuple[int, ...]]] = {}
    for unit in range(units):
        order = rng.permutation(8)  # the unit's order, fixed
        for _ in range(keys):
            start = int(rng.integers(8))
            pair = tuple(sorted(int(order[(start + i) % 8]) for i in range(c)))
            rotated.setdefault(unit, Counter())[pair] += 1
    assert _pooled_chi_square(rotated, pairs) < P_THRESHOLD


def registration_orders(engine: Engine, sizes: dict[int, int]) -> dict[int, list[int]]:
    """Each unit's labels in its secret registration order, read through the public bound alone.

    On DuckDB's rules the bound by C keeps the first C rows of that order, so the row kept at C = k
    and not at C = k - 1 is the one at position k - 1.
    """
    before: dict[int, tuple[int, ...]] = {}
    order: dict[int, list[int]] = {}
    for k in range(1, max(sizes) + 1):
        now = selections(engine, bound(engine, c=k))
        for person, labels in now.items():
            new = set(labels) - set(before.get(person, ()))
            if new:
                assert len(new) == 1
                order.setdefault(person, []).append(new.pop())
        before = now
    return order


@pytest.fixture(params=["masks", "window"])
def filter_plan(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both plans of ``filtered_query``: the masks (tables of at least ``MASKED_TABLE_ROWS`` rows) and the window."""
    from dpsense.engine.sql import _index_query

    threshold = 0 if request.param == "masks" else 1 << 62
    monkeypatch.setattr(_index_query, "MASKED_TABLE_ROWS", threshold)
    return str(request.param)


@pytest.mark.parametrize("c", [1, 3, 64, 70])
def test_a_filtered_bound_keeps_exactly_the_first_c_passing_rows_of_the_registration_order(
    c: int, filter_plan: str
) -> None:
    """Both plans of ``filtered_query``, and every part of the masks' (small units, the failing-position
    masks, the window above ``MASK_ROWS`` rows), keep in every unit exactly its first C passing rows in
    its registration order.

    Units of 1 to 100 rows cross every boundary (C, 64, 65); the filter fails on NULLs too (a NULL
    is not a pass). The order is read through the unfiltered bound, which keeps its first C rows.
    """
    from dpsense.engine.sql._index_query import MASK_ROWS

    assert MASK_ROWS == 64
    engine = DuckDBEngine()
    sizes = {1: 3, 2: 3, 3: 3, 5: 3, 63: 2, 64: 2, 65: 2, 100: 2}
    df = sized_units(sizes)
    rng = np.random.default_rng(11)  # the test's own data
    df["x"] = np.where(rng.random(len(df)) < 0.1, np.nan, rng.random(len(df)))
    engine.register("t", df)
    engine.index_units("t", unit_column="person", key=random_bytes(32))
    order = registration_orders(engine, sizes)
    for threshold in (0.2, 0.5, 0.9):
        passing = {(p, lab) for p, lab, x in zip(df["person"], df["label"], df["x"], strict=True) if x >= threshold}
        view = engine.bounded_rows(
            "t",
            unit_column="person",
            max_rows_per_unit=c,
            salt=random_bytes(32),
            where=[predicate("x", ">=", threshold)],
        )
        got = selections(engine, view)
        for person, labels in order.items():
            first = [lab for lab in labels if (person, lab) in passing][:c]
            assert got.get(person, ()) == tuple(sorted(first)), (person, threshold)
        engine.drop(view)


@pytest.mark.parametrize("c", [1, 3, 70])
def test_neighbouring_snapshots_keep_the_same_rows_of_every_other_unit(c: int, filter_plan: str) -> None:
    """Built neighbours, not a re-read plan: under one registration key, removing a unit, or replacing
    its rows, changes the kept rows of that unit alone, filtered or not, so at most C rows move.

    DuckDB's rules (the first C passing rows of the registration order; the three parts of
    ``filtered_query`` each read one unit's rows). Units of 1 to 100 rows, filters failing on NULLs.
    """
    rng = np.random.default_rng(12)  # the test's own data
    sizes = {1: 4, 2: 4, 5: 4, 40: 3, 64: 2, 65: 2, 100: 2}
    base = sized_units(sizes)
    base["x"] = np.where(rng.random(len(base)) < 0.1, np.nan, rng.random(len(base)))
    key = random_bytes(32)
    victims = [int(p) for p in base.groupby("size")["person"].first()]

    def kept_rows(frame: pd.DataFrame, where: list[object]) -> Counter[tuple[int, int]]:
        engine = DuckDBEngine()
        engine.register("t", frame)
        engine.index_units("t", unit_column="person", key=key)
        view = engine.bounded_rows("t", unit_column="person", max_rows_per_unit=c, salt=random_bytes(32), where=where)
        got = engine.collect(view, columns=["person", "label"])  # a label names a row within its unit
        engine.close()
        return Counter(zip(got["person"].tolist(), got["label"].tolist(), strict=True))

    for where in ([], [predicate("x", ">=", 0.3)]):
        full = kept_rows(base, where)  # type: ignore[arg-type]
        for victim in victims:
            removed = kept_rows(base[base["person"] != victim], where)  # type: ignore[arg-type]
            replaced_frame = base.copy()
            mask = replaced_frame["person"] == victim
            replaced_frame.loc[mask, "x"] = rng.random(int(mask.sum()))
            replaced = kept_rows(replaced_frame, where)  # type: ignore[arg-type]
            for neighbour in (removed, replaced):
                assert_only_the_victim_moved(full, neighbour, victim, c)


@pytest.mark.parametrize("c", [1, 3, 70])
def test_neighbours_under_a_stored_group_cap_move_only_the_victims_rows_when_it_changes_groups(
    c: int, filter_plan: str
) -> None:
    """The capped path (stored group counts; units above the cap choose one group per salt, then rows by
    position) on built neighbours: the victim removed, or replaced by rows in other groups (a unit
    moving between groups), filtered, unfiltered and filtered to an empty view, under one key and one
    salt. Only the victim's rows move, at most C each way; one-record data keeps its one row or none.
    """
    rng = np.random.default_rng(13)  # the test's own data
    sizes = {1: 4, 2: 4, 5: 4, 40: 3, 70: 2}
    base = sized_units(sizes)
    base["x"] = np.where(rng.random(len(base)) < 0.1, np.nan, rng.random(len(base)))
    base["g"] = (base["label"] * 7 + base["person"]) % 3
    key, salt = random_bytes(32), random_bytes(32)
    victims = [int(p) for p in base.groupby("size")["person"].first()]

    def kept_rows(frame: pd.DataFrame, where: list[object]) -> Counter[tuple[int, int]]:
        engine = DuckDBEngine()
        engine.register("t", frame)
        engine.index_units("t", unit_column="person", key=key, group_columns=["g"])
        view = engine.bounded_rows(
            "t",
            unit_column="person",
            max_rows_per_unit=c,
            salt=salt,
            where=where,  # type: ignore[arg-type]
            group_column="g",
            max_groups_per_unit=1,
        )
        got = engine.collect(view, columns=["person", "label", "g"])
        engine.close()
        assert all(len(set(gs)) <= 1 for gs in _groups_of(got).values())  # the cap holds
        return Counter(zip(got["person"].tolist(), got["label"].tolist(), strict=True))

    nothing = [predicate("x", ">=", 2.0)]  # no row passes: an empty view
    for where in ([], [predicate("x", ">=", 0.3)], nothing):
        full = kept_rows(base, where)  # type: ignore[arg-type]
        assert (full == Counter()) is (where is nothing)
        for victim in victims:
            removed = kept_rows(base[base["person"] != victim], where)  # type: ignore[arg-type]
            moved_frame = base.copy()
            mask = moved_frame["person"] == victim
            moved_frame.loc[mask, "g"] = (moved_frame.loc[mask, "g"] + 1) % 3  # the unit moves to other groups
            moved_frame.loc[mask, "x"] = rng.random(int(mask.sum()))
            moved = kept_rows(moved_frame, where)  # type: ignore[arg-type]
            for neighbour in (removed, moved):
                assert_only_the_victim_moved(full, neighbour, victim, c)
    one = base[base["person"] == victims[0]].head(1)
    assert sum(kept_rows(one, []).values()) == 1 and kept_rows(one, nothing) == Counter()  # type: ignore[arg-type]


def _groups_of(got: dict[str, np.ndarray]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for person, group in zip(got["person"].tolist(), got["g"].tolist(), strict=True):
        out.setdefault(person, []).append(group)
    return out


def assert_only_the_victim_moved(
    full: Counter[tuple[int, int]], neighbour: Counter[tuple[int, int]], victim: int, c: int
) -> None:
    """The kept (unit, row) pairs of two neighbouring snapshots differ in the victim's rows only, at most C each way."""
    changed = (full - neighbour) + (neighbour - full)
    assert all(person == victim for person, _ in changed), victim
    assert sum((full - neighbour).values()) <= c and sum((neighbour - full).values()) <= c
