"""Order-statistic sensitivities against brute force over small multiset domains.

The oracle enumerates every multiset of n values from {0..V} (bounds [0, V]), links neighbours
(replace one value; add or remove one; replace/add/remove the records of one unit), gets exact
graph distances by breadth-first search and computes LS, A^(k) = max_{d(x,y)<=k} LS(y),
S* = max_y LS(y) e^{-beta d(x,y)} and the distance to instability by definition. On the integer grid
these equal their continuous-domain values: the extreme replacements of an order statistic are L, U
or other data points, all on the grid.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from dpsense.core import Adjacency, InvalidBounds, InvalidData, InvalidPrivacyParameter, UsageError
from dpsense.sensitivity import Bounds
from dpsense.sensitivity import order_statistics as osm
from dpsense.sensitivity.order_statistics import (
    OrderStatisticFamily,
    median_rank,
    median_smooth_sensitivity,
    order_statistic_distance,
    order_statistic_local_sensitivity,
    order_statistic_smooth_sensitivity,
    order_statistic_smooth_sensitivity_dc,
    resize_to_public_n,
    smooth_order_statistic,
)
from dpsense.sensitivity.smooth import PersonLevel, smooth_upper_bound

Multiset = tuple[int, ...]
BETAS = (0.1, 0.7, 2.0)


# ---------------------------------------------------------------------------------------------- oracle


def multisets(n: int, V: int) -> list[Multiset]:
    return list(itertools.combinations_with_replacement(range(V + 1), n))


def replace_neighbours(doms: Sequence[Multiset], V: int, records: int = 1) -> list[set[int]]:
    """Neighbours by replacing up to ``records`` values (records=2: one unit owning two records)."""
    index = {y: i for i, y in enumerate(doms)}
    out: list[set[int]] = [set() for _ in doms]
    for i, y in enumerate(doms):
        for drop in itertools.combinations(range(len(y)), records):
            rest = tuple(v for t, v in enumerate(y) if t not in drop)
            for new in itertools.product(range(V + 1), repeat=records):
                z = tuple(sorted(rest + new))
                if z != y:
                    out[i].add(index[z])
    return out


def distances(nbrs: Sequence[set[int]]) -> np.ndarray:
    rows = [i for i, s in enumerate(nbrs) for _ in s]
    cols = [j for s in nbrs for j in s]
    graph = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(nbrs), len(nbrs)))
    return shortest_path(graph, method="D", unweighted=True).astype(np.int64)


def local_sensitivities(values: Sequence[float], nbrs: Sequence[set[int]]) -> np.ndarray:
    return np.array([max((abs(values[i] - values[j]) for j in s), default=0.0) for i, s in enumerate(nbrs)])


def brute_A(ls: np.ndarray, dist: np.ndarray, k: int) -> np.ndarray:
    return np.where(dist <= k, ls[None, :], 0.0).max(axis=1)


def brute_S(ls: np.ndarray, dist: np.ndarray, beta: float) -> np.ndarray:
    weights = np.array([math.exp(-d * beta) for d in range(int(dist.max()) + 1)])
    return (ls[None, :] * weights[dist]).max(axis=1)


def order_stat(rank: int) -> Callable[[Multiset], float]:
    return lambda y: float(y[rank - 1])


def arr(y: Sequence[int]) -> np.ndarray:
    return np.array(y, dtype=np.float64)


CONFIGS = [(5, 6), (6, 4)]


@pytest.fixture(scope="module", params=CONFIGS, ids=lambda c: f"n{c[0]}-V{c[1]}")
def replace_domain(request: pytest.FixtureRequest) -> tuple[int, int, list[Multiset], list[set[int]], np.ndarray]:
    n, V = request.param
    doms = multisets(n, V)
    nbrs = replace_neighbours(doms, V)
    return n, V, doms, nbrs, distances(nbrs)


# ------------------------------------------------------------------------------- replace adjacency


def test_local_sensitivity_and_family_equal_brute_force(replace_domain):
    n, V, doms, nbrs, dist = replace_domain
    for rank in range(1, n + 1):
        ls = local_sensitivities([order_stat(rank)(y) for y in doms], nbrs)
        for k in range(n + 2):
            expected = brute_A(ls, dist, k)
            got = [OrderStatisticFamily(arr(y), rank, (0, V)).upper(k) for y in doms]
            assert got == expected.tolist()
        assert [order_statistic_local_sensitivity(arr(y), rank, (0, V)) for y in doms] == ls.tolist()


def test_family_is_monotone_under_replace(replace_domain):
    n, V, doms, nbrs, _ = replace_domain
    rank = median_rank(n)
    U = np.array([[OrderStatisticFamily(arr(y), rank, (0, V)).upper(k) for k in range(n + 2)] for y in doms])
    for i, s in enumerate(nbrs):
        for j in s:
            assert np.all(U[i, :-1] <= U[j, 1:])


@pytest.mark.parametrize("beta", BETAS)
def test_loop_dc_and_fast_path_equal_brute_force_smooth_sensitivity(replace_domain, beta):
    n, V, doms, nbrs, dist = replace_domain
    for rank in range(1, n + 1):
        ls = local_sensitivities([order_stat(rank)(y) for y in doms], nbrs)
        expected = brute_S(ls, dist, beta)
        loop = np.array([order_statistic_smooth_sensitivity(arr(y), rank, (0, V), beta) for y in doms])
        dc = np.array([order_statistic_smooth_sensitivity_dc(arr(y), rank, (0, V), beta) for y in doms])
        fast = np.array([median_smooth_sensitivity(arr(y)[::-1], bounds=(0, V), beta=beta, rank=rank) for y in doms])
        np.testing.assert_allclose(loop, expected, rtol=1e-12, atol=0)
        np.testing.assert_allclose(dc, expected, rtol=1e-12, atol=0)
        assert np.array_equal(fast, loop)
        # the defining properties, checked directly: S >= LS and S(x) <= e^beta S(x') for neighbours
        assert np.all(loop >= ls)
        for i, s in enumerate(nbrs):
            assert all(loop[i] <= math.exp(beta) * loop[j] * (1 + 1e-12) for j in s)


def test_ptr_distance_is_the_exact_distance_to_instability(replace_domain):
    n, V, doms, nbrs, dist = replace_domain
    rank = median_rank(n)
    ls = local_sensitivities([order_stat(rank)(y) for y in doms], nbrs)
    for b in (0.5, 1.0, 2.5):
        unstable = ls > b
        exact = dist[:, unstable].min(axis=1) if unstable.any() else np.full(len(doms), 10**9)
        for cap in (1, 2, 50):
            gamma = np.array([order_statistic_distance(arr(y), rank, (0, V), b, cap) for y in doms])
            assert np.array_equal(gamma, np.minimum(exact, cap))
            assert np.all(ls[gamma >= 1] <= b)  # gamma >= 1 certifies LS <= b
            for i, s in enumerate(nbrs):  # 1-Lipschitz
                assert all(abs(int(gamma[i]) - int(gamma[j])) <= 1 for j in s)


# ------------------------------------------------------------------------- add/remove via public n


def _add_remove_domain(V: int, max_size: int, step: int) -> tuple[list[Multiset], list[set[int]]]:
    """Multisets of sizes 0..max_size; neighbours add or remove between 1 and ``step`` records."""
    doms = [y for m in range(max_size + 1) for y in multisets(m, V)]
    index = {y: i for i, y in enumerate(doms)}
    nbrs: list[set[int]] = [set() for _ in doms]
    for y in doms:
        for added in range(1, step + 1):
            if len(y) + added > max_size:
                break
            for new in itertools.combinations_with_replacement(range(V + 1), added):
                z = tuple(sorted(y + new))
                nbrs[index[y]].add(index[z])
                nbrs[index[z]].add(index[y])
    return doms, nbrs


def _multiset_distance(a: Sequence[float], b: Sequence[float]) -> int:
    return len(a) - sum((Counter(a) & Counter(b)).values())


def test_resize_maps_add_remove_neighbours_to_replace_neighbours():
    V = 4
    doms, nbrs = _add_remove_domain(V, 7, 1)
    for public_n in (1, 3, 4, 5):
        resized = [tuple(resize_to_public_n(arr(y), public_n=public_n, bounds=(0, V))) for y in doms]
        assert all(len(t) == public_n for t in resized)
        worst = max(_multiset_distance(resized[i], resized[j]) for i, s in enumerate(nbrs) for j in s)
        assert worst == 1


@pytest.mark.parametrize("public_n", [3, 4, 5])
def test_add_remove_family_through_public_n_is_valid_and_smooth(public_n):
    V, beta = 4, 0.5
    doms, nbrs = _add_remove_domain(V, 7, 1)
    rank = median_rank(public_n)
    resized = [resize_to_public_n(arr(y), public_n=public_n, bounds=(0, V)) for y in doms]
    f = [float(t[rank - 1]) for t in resized]
    ls = local_sensitivities(f, nbrs)  # LS of f(resize(x)) under add/remove
    U = np.array([[OrderStatisticFamily(t, rank, (0, V)).upper(k) for k in range(public_n + 2)] for t in resized])
    assert np.all(U[:, 0] >= ls)
    S = np.array([order_statistic_smooth_sensitivity(t, rank, (0, V), beta) for t in resized])
    for i, s in enumerate(nbrs):
        for j in s:
            assert np.all(U[i, :-1] <= U[j, 1:])
            assert S[i] <= math.exp(beta) * S[j] * (1 + 1e-12)
    # the fast path resizes the same way without materialising the resized data
    for y, t, s_ in zip(doms[::7], resized[::7], S[::7], strict=True):
        res = smooth_order_statistic(arr(y), bounds=(0, V), beta=beta, adjacency="add_remove", public_n=public_n)
        assert res.smooth_sensitivity == s_ and res.value == t[rank - 1] and res.n == public_n


def test_add_remove_requires_a_declared_public_n():
    with pytest.raises(UsageError, match="public_n"):
        median_smooth_sensitivity([1.0, 2.0], bounds=(0, 4), beta=0.1, adjacency=Adjacency.ADD_REMOVE)
    with pytest.raises(UsageError):
        median_smooth_sensitivity([1.0, 2.0], bounds=(0, 4), beta=0.1, public_n=3)  # replace: n is len(values)
    # empty data are fine under add/remove: refusing them would reveal that the data are empty
    res = smooth_order_statistic([], bounds=(0, 4), beta=0.1, adjacency="add_remove", public_n=3)
    assert res.value == 0.0 and res.smooth_sensitivity == 4.0


# ------------------------------------------------------------------------------------ person level


def test_person_level_replace_two_records_per_unit():
    """Units own exactly 2 records; a unit change replaces 2 records.

    Replacing *any* 2 records over-approximates the unit neighbours, so the wrapped family passing
    here passes for every assignment of records to units; the failures of the unwrapped family are
    realised by putting the two changed records in one unit.
    """
    n, V, C = 6, 4, 2
    doms = multisets(n, V)
    nbrs = replace_neighbours(doms, V, records=C)
    rank = median_rank(n)
    ls = local_sensitivities([order_stat(rank)(y) for y in doms], nbrs)
    families = [OrderStatisticFamily(arr(y), rank, (0, V)) for y in doms]
    wrapped = np.array([[PersonLevel(f, C, direct=True).upper(k) for k in range(4)] for f in families])
    plain = np.array([[f.upper(k) for k in range(4)] for f in families])
    assert np.all(wrapped[:, 0] >= ls)
    assert all(np.all(wrapped[i, :-1] <= wrapped[j, 1:]) for i, s in enumerate(nbrs) for j in s)
    assert np.any(plain[:, 0] < ls)  # unwrapped: U_0 is not an upper bound on the unit-level LS
    assert any(np.any(plain[i, :-1] > plain[j, 1:]) for i, s in enumerate(nbrs) for j in s)
    beta = 0.3
    for y, f in zip(doms[::11], families[::11], strict=True):
        expected = smooth_upper_bound(PersonLevel(f, C, direct=True), beta=beta)
        assert median_smooth_sensitivity(arr(y), bounds=(0, V), beta=beta, max_records_per_unit=C) == expected


def test_person_level_add_remove_up_to_two_records_through_public_n():
    V, C, public_n = 3, 2, 4
    doms, nbrs = _add_remove_domain(V, 7, C)
    rank = median_rank(public_n)
    resized = [resize_to_public_n(arr(y), public_n=public_n, bounds=(0, V)) for y in doms]
    ls = local_sensitivities([float(t[rank - 1]) for t in resized], nbrs)
    families = [OrderStatisticFamily(t, rank, (0, V)) for t in resized]
    wrapped = np.array([[PersonLevel(f, C, direct=True).upper(k) for k in range(4)] for f in families])
    plain = np.array([[f.upper(k) for k in range(4)] for f in families])
    assert np.all(wrapped[:, 0] >= ls)
    assert all(np.all(wrapped[i, :-1] <= wrapped[j, 1:]) for i, s in enumerate(nbrs) for j in s)
    assert np.any(plain[:, 0] < ls)


# ------------------------------------------------------------------- continuous data and fast path


@settings(max_examples=150, deadline=None)
@given(
    data=st.lists(st.floats(-50, 50, allow_nan=False), min_size=1, max_size=40),
    rank_frac=st.floats(0, 1),
    beta=st.sampled_from([0.02, 0.3, 1.5]),
    ties=st.booleans(),
)
def test_paths_agree_on_random_floats(data, rank_frac, beta, ties):
    x = np.round(np.array(data)) if ties else np.array(data)
    n = x.size
    rank = min(n, 1 + int(rank_frac * n))
    bounds = (-40.0, 45.5)
    xs = np.sort(np.clip(x, *bounds))
    loop = order_statistic_smooth_sensitivity(xs, rank, bounds, beta)
    assert median_smooth_sensitivity(x, bounds=bounds, beta=beta, rank=rank) == loop
    assert order_statistic_smooth_sensitivity_dc(xs, rank, bounds, beta) == pytest.approx(loop, rel=1e-12, abs=0)
    assert loop >= order_statistic_local_sensitivity(xs, rank, bounds)


@settings(max_examples=200, deadline=None)
@given(
    v=st.floats(-1e6, 1e6, allow_nan=False),
    lo=st.floats(-1e6, 0, allow_nan=False),
    hi=st.floats(0, 1e6, allow_nan=False),
)
def test_differences_round_upward_exactly(v, lo, hi):
    # n = 1, rank 1: LS = max(v - L, U - v) with v clipped; must be the smallest double >= the exact value
    c = min(max(v, lo), hi)
    exact = max(Fraction(c) - Fraction(lo), Fraction(hi) - Fraction(c))
    got = order_statistic_local_sensitivity([v], 1, (lo, hi))
    assert Fraction(got) >= exact
    assert got == 0 or Fraction(math.nextafter(got, -math.inf)) < exact


def test_fast_path_window_growth_is_exact(monkeypatch):
    rng = np.random.default_rng(7)
    monkeypatch.setattr(osm, "_WINDOW_LOG_RATIO", 0.01)  # start with a window of one rank: grow many times
    cases = [
        rng.standard_normal(3001),
        np.zeros(2000),  # all ties: LS = 0 until the pads, the loop runs until e^{-k beta} G underflows
        np.concatenate([np.zeros(1500), np.full(1501, 3.0)]),
        rng.integers(0, 5, 4000).astype(float),
    ]
    for x in cases:
        for beta, rank in [(0.05, None), (0.5, 1), (1.0, x.size)]:
            r = median_rank(x.size) if rank is None else rank
            expected = order_statistic_smooth_sensitivity(np.sort(np.clip(x, -1e3, 1e3)), r, (-1e3, 1e3), beta)
            got = smooth_order_statistic(x, bounds=(-1e3, 1e3), beta=beta, rank=rank)
            assert got.smooth_sensitivity == expected
            assert got.value == np.sort(x)[r - 1]


def test_fast_path_matches_loop_on_large_data():
    rng = np.random.default_rng(11)
    x = rng.standard_normal(200_001)
    original = x.copy()
    xs = np.sort(x)
    for beta in (0.05, 0.5):
        res = smooth_order_statistic(x, bounds=(-1e6, 1e6), beta=beta)
        assert res.value == xs[100_000]
        assert res.smooth_sensitivity == order_statistic_smooth_sensitivity(xs, 100_001, (-1e6, 1e6), beta)
    assert np.array_equal(x, original)  # the caller's array is never partitioned in place


def test_constant_work_is_public_work_and_an_upper_bound():
    rng = np.random.default_rng(3)
    x = rng.standard_normal(5000)
    xs = np.sort(x)
    exact = order_statistic_smooth_sensitivity(xs, 2500, (-10, 10), 0.05)
    for K in (1, 10, 1000):
        loop = order_statistic_smooth_sensitivity(xs, 2500, (-10, 10), 0.05, constant_work=K)
        fast = median_smooth_sensitivity(x, bounds=(-10, 10), beta=0.05, constant_work=K)
        assert fast == loop >= exact


def test_median_convention_lower_middle_never_the_average():
    assert [median_rank(n) for n in (1, 2, 3, 4, 5)] == [1, 1, 2, 2, 3]
    res = smooth_order_statistic([4.0, 1.0, 3.0, 2.0], bounds=(0, 5), beta=0.1)
    assert res.rank == 2 and res.value == 2.0
    upper = smooth_order_statistic([4.0, 1.0, 3.0, 2.0], bounds=(0, 5), beta=0.1, rank=3)
    assert upper.value == 3.0


def test_dc_on_a_long_sorted_array_matches_loop():
    rng = np.random.default_rng(5)
    xs = np.sort(rng.exponential(size=20_000))
    # beta = 0.5: e^{-k beta} underflows to 0 far from the rank; the pruning must not follow the zeros
    for rank, beta in itertools.product((1, 137, 10_000, 20_000), (0.02, 0.5)):
        loop = order_statistic_smooth_sensitivity(xs, rank, (0, 30), beta)
        assert loop > 0
        assert order_statistic_smooth_sensitivity_dc(xs, rank, (0, 30), beta) == pytest.approx(loop, rel=1e-12)


def test_bounds_as_list_or_bounds_object_are_accepted():
    assert order_statistic_local_sensitivity([1.0], 1, [0, 4]) == 3.0
    assert order_statistic_local_sensitivity([0.5], 1, Bounds("0.1", 1)) == order_statistic_local_sensitivity(
        [0.5], 1, (math.nextafter(0.1, 1), 1.0)
    )


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: OrderStatisticFamily([1.0, 2.0], 3, (0, 4)), UsageError),
        (lambda: OrderStatisticFamily([1.0, 2.0], 0, (0, 4)), UsageError),
        (lambda: OrderStatisticFamily([2.0, 1.0], 1, (0, 4)), InvalidData),
        (lambda: OrderStatisticFamily([], 1, (0, 4)), UsageError),
        (lambda: OrderStatisticFamily([1.0], 1, (4, 0)), InvalidBounds),
        (lambda: OrderStatisticFamily([1.0], 1, (0, math.inf)), InvalidBounds),
        (lambda: OrderStatisticFamily([1.0], 1, (-1.7e308, 1.7e308)), InvalidBounds),
        (lambda: OrderStatisticFamily([1.0], 1, (0, 1, 2)), InvalidBounds),
        (lambda: OrderStatisticFamily([1.0], 1, 5), InvalidBounds),
        (lambda: OrderStatisticFamily(["a"], 1, (0, 4)), InvalidData),
        (lambda: median_smooth_sensitivity([1.0], bounds=(0, 4), beta="x"), InvalidPrivacyParameter),
        (lambda: median_smooth_sensitivity([1.0, math.nan], bounds=(0, 4), beta=0.1), InvalidData),
        (lambda: median_smooth_sensitivity([1.0], bounds=(0, 4), beta=0.0), InvalidPrivacyParameter),
        (lambda: order_statistic_smooth_sensitivity_dc([1.0], 1, (0, 4), math.inf), InvalidPrivacyParameter),
        (lambda: order_statistic_distance([1.0], 1, (0, 4), 0.0, 5), UsageError),
        (lambda: order_statistic_distance([1.0], 1, (0, 4), 1.0, 0), UsageError),
        (lambda: median_smooth_sensitivity([1.0], bounds=(0, 4), beta=0.1, max_records_per_unit=0), UsageError),
        (lambda: resize_to_public_n([1.0], public_n=0, bounds=(0, 4)), UsageError),
    ],
)
def test_refusals(call, error):
    with pytest.raises(error):
        call()
