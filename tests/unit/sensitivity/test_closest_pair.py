"""Closest pair (docs/math/closest-pair.md): brute force on small grids, exactness of M and W, the seed's errors.

Brute force: every multiset of n = 4 points of a grid (1-D {0..8}; 2-D 3x3 with L2), the replace
graph and the add/remove graph (sizes 0..6), LS and A^(k) by exhaustive relaxation, then the two
conditions of the monotone-family lemma (docs/math/smooth-sensitivity.md §3.2) for the library's families.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from functools import cache

import numpy as np
import pytest

from dpsense.core import InvalidBounds, InvalidData, InvalidPrivacyParameter, InvalidSensitivity, UsageError
from dpsense.core.errors import UnsupportedRequest
from dpsense.sensitivity._closest_pair_engine import DeletionValues1D, NeighbourDistances, pair_distances
from dpsense.sensitivity.closest_pair import (
    DeletionValueFamily1D,
    NeighbourRankFamily,
    Variant,
    closest_pair_distance_to_instability,
    closest_pair_family,
    closest_pair_global_sensitivity,
    closest_pair_inputs,
    closest_pair_local_sensitivity,
    closest_pair_smooth_bound,
    min_pairwise_distance,
)
from dpsense.sensitivity.smooth import MonotoneFamily, PersonLevel, smooth_upper_bound

# ---------------------------------------------------------------------------------------------
# Exhaustive grid graphs.

LINE = np.arange(9.0).reshape(-1, 1)  # 1-D grid {0..8}
SQUARE = np.array([(a, b) for a in range(3) for b in range(3)], dtype=float)  # 3x3 grid, L2


class GridGraph:
    """All multisets of grid sites of the given sizes, with replace or add/remove neighbours."""

    def __init__(self, coords: np.ndarray, sizes: range, adjacency: str, small_f: float) -> None:
        self.coords = coords
        sites = coords.shape[0]
        self.nodes = [y for s in sizes for y in itertools.combinations_with_replacement(range(sites), s)]
        index = {y: i for i, y in enumerate(self.nodes)}
        self.nbrs: list[list[int]] = []
        for y in self.nodes:
            found: set[int] = set()
            for i in range(len(y)):
                rest = y[:i] + y[i + 1 :]
                if adjacency == "replace":
                    found.update(index[tuple(sorted((*rest, v)))] for v in range(sites))
                elif rest in index:
                    found.add(index[rest])
            if adjacency == "add_remove":
                found.update(index[z] for v in range(sites) if (z := tuple(sorted((*y, v)))) in index)
            found.discard(index[y])
            self.nbrs.append(sorted(found))
        self.f = [min_pairwise_distance(self.points(y)) if len(y) >= 2 else small_f for y in self.nodes]
        self.ls = [max(abs(self.f[i] - self.f[j]) for j in nb) for i, nb in enumerate(self.nbrs)]

    def points(self, y: tuple[int, ...]) -> np.ndarray:
        return self.coords[list(y)].reshape(len(y), self.coords.shape[1])

    def relax(self, values: list[float], steps: int) -> list[list[float]]:
        """out[k][i] = max of values over the nodes within k steps of node i."""
        out = [list(values)]
        for _ in range(steps):
            prev = out[-1]
            out.append([max(prev[i], *(prev[j] for j in nb)) for i, nb in enumerate(self.nbrs)])
        return out

    def family_table(self, make: Callable[[np.ndarray], MonotoneFamily], kmax: int) -> list[list[float]]:
        return [[make(self.points(y)).upper(k) for k in range(kmax + 2)] for y in self.nodes]


@cache
def graph(kind: str, adjacency: str) -> GridGraph:
    coords = LINE if kind == "line" else SQUARE
    diameter = closest_pair_global_sensitivity(adjacency="add_remove", dim=coords.shape[1], low=0, high=coords.max())
    sizes = range(4, 5) if adjacency == "replace" else range(7)
    return GridGraph(coords, sizes, adjacency, small_f=diameter)


def product_cap(kind: str, adjacency: str) -> float:
    coords = LINE if kind == "line" else SQUARE
    n = 4 if adjacency == "replace" else None
    return closest_pair_global_sensitivity(adjacency=adjacency, dim=coords.shape[1], low=0, high=coords.max(), n=n)


CASES: list[tuple[str, Variant]] = [
    ("line", "exact_1d"),
    ("line", "W"),
    ("square", "W"),
]


def exact_zone(g: GridGraph, i: int, k: int, adjacency: str) -> bool:
    """A^(k) on the truncated add/remove graph is exact when sizes up to |y| + k + 1 are present."""
    return adjacency == "replace" or len(g.nodes[i]) + k + 1 <= 6


@pytest.mark.parametrize("adjacency", ["replace", "add_remove"])
@pytest.mark.parametrize(("kind", "variant"), CASES)
@pytest.mark.parametrize("cap_kind", ["product", "brute"])
def test_family_bounds_A_k_and_is_monotone_on_grids(kind: str, variant: Variant, adjacency: str, cap_kind: str) -> None:
    g = graph(kind, adjacency)
    G = product_cap(kind, adjacency) if cap_kind == "product" else max(g.ls)
    assert product_cap(kind, adjacency) >= max(g.ls)  # the product G is >= the grid's GS
    kmax = 3
    A = g.relax(g.ls, kmax)
    U = g.family_table(lambda p: closest_pair_family(p, G=G, variant=variant), kmax)
    for i in range(len(g.nodes)):
        for k in range(kmax + 1):
            if exact_zone(g, i, k, adjacency):
                assert A[k][i] <= U[i][k], (g.nodes[i], k)
            assert all(U[i][k] <= U[j][k + 1] for j in g.nbrs[i]), (g.nodes[i], k)


@pytest.mark.parametrize("adjacency", ["replace", "add_remove"])
@pytest.mark.parametrize(("kind", "variant"), CASES)
def test_person_level_family_on_grids(kind: str, variant: Variant, adjacency: str) -> None:
    """C = 2 points per unit: U'_k = U_{2k+1} (no factor C) bounds the unit-level A^(k) and is unit-monotone.

    Two record steps cover every unit step (and, under add/remove, also add-then-remove).
    """
    g = graph(kind, adjacency)
    G = product_cap(kind, adjacency)
    two = [sorted(set(nb).union(*(g.nbrs[j] for j in nb)) - {i}) for i, nb in enumerate(g.nbrs)]
    ls_unit = [max(abs(g.f[i] - g.f[j]) for j in nb) for i, nb in enumerate(two)]
    a1 = [max(ls_unit[i], *(ls_unit[j] for j in nb)) for i, nb in enumerate(two)]
    U = [
        [PersonLevel(closest_pair_family(g.points(y), G=G, variant=variant), 2, direct=True).upper(k) for k in range(3)]
        for y in g.nodes
    ]
    for i, y in enumerate(g.nodes):
        if adjacency == "replace" or len(y) + 2 <= 6:
            assert ls_unit[i] <= U[i][0], y
        if adjacency == "replace" or len(y) + 4 <= 6:
            assert a1[i] <= U[i][1], y
        assert all(U[i][k] <= U[j][k + 1] for j in two[i] for k in range(2)), y


@pytest.mark.parametrize("adjacency", ["replace", "add_remove"])
@pytest.mark.parametrize(("kind", "variant"), CASES)
def test_ptr_distance_is_1_lipschitz_and_certifies_ls(kind: str, variant: Variant, adjacency: str) -> None:
    g = graph(kind, adjacency)
    G = product_cap(kind, adjacency)
    for b in (0.5, 1.0, 1.5, 2.5):
        gam = [
            closest_pair_distance_to_instability(g.points(y), proposed_bound=b, G=G, cap=6, variant=variant)
            for y in g.nodes
        ]
        for i, nb in enumerate(g.nbrs):
            assert all(abs(gam[i] - gam[j]) <= 1 for j in nb)
            if gam[i] >= 1:
                assert g.ls[i] <= b


def test_grid_local_sensitivity_matches_the_exact_formula() -> None:
    """LS = max(f, max_i min(f_-i, R_i) - f) with R_i over the grid domain (docs/math/closest-pair.md §6.2)."""
    g = graph("square", "replace")
    D = pair_distances(SQUARE[:, None, :], SQUARE[None, :, :])
    for i, y in enumerate(g.nodes):
        terms = []
        for t in range(4):
            rest = list(y[:t] + y[t + 1 :])
            radius = max(min(D[s, r] for r in rest) for s in range(9))
            terms.append(min(min_pairwise_distance(SQUARE[rest]), radius))
        assert g.ls[i] == pytest.approx(max(g.f[i], max(terms) - g.f[i]), abs=1e-12)


# ---------------------------------------------------------------------------------------------
# Exactness of M and W, and the distance routine.


def brute_M(x: np.ndarray, m: int) -> float:
    n = x.size
    if n - m < 2:
        return math.inf
    return max(
        min(abs(float(a) - float(b)) for a, b in itertools.combinations(x[list(T)], 2))
        for T in itertools.combinations(range(n), n - m)
    )


def sorted_neighbour_distances(P: np.ndarray) -> np.ndarray:
    D = pair_distances(P[:, None, :], P[None, :, :])
    np.fill_diagonal(D, np.inf)
    return np.sort(D, axis=1)


def brute_W(P: np.ndarray, m: int, rows: np.ndarray | None = None) -> float:
    if m >= P.shape[0] - 1:
        return math.inf
    R = sorted_neighbour_distances(P) if rows is None else rows
    return float(np.sort(R[:, m])[m])


def test_exact_deletion_values_match_subset_enumeration() -> None:
    rng = np.random.default_rng(7)
    awkward = np.array([0.1, 0.2, 0.3, 0.7, 1e-300, 3e-300, 1.0, 1.0 + 2**-52, 5.0])
    for trial in range(60):
        n = int(rng.integers(2, 9))
        x = awkward[rng.choice(awkward.size, n)] if trial % 3 == 0 else np.round(rng.random(n), int(trial % 4) + 1)
        dv = DeletionValues1D(x)
        for m in range(n + 1):
            assert dv.value(m) == brute_M(x, m), (x, m)


def test_W_is_an_upper_bound_on_M_and_non_decreasing() -> None:
    rng = np.random.default_rng(3)
    for _ in range(40):
        x = rng.random(int(rng.integers(3, 9)))
        fam = NeighbourRankFamily(x, G=1.0)
        w = [fam.deletion_value(m) for m in range(x.size)]
        assert all(brute_M(x, m) <= w[m] for m in range(x.size))
        assert w == sorted(w)


@pytest.mark.parametrize("data", ["uniform", "lattice", "duplicates", "pile"])
def test_kdtree_path_equals_full_matrix(data: str) -> None:
    rng = np.random.default_rng(11)
    if data == "uniform":
        P = rng.random((1500, 2))
    elif data == "lattice":  # massive exact ties
        P = np.array([(a, b) for a in range(30) for b in range(30)], dtype=float) * 0.1
    elif data == "duplicates":
        P = np.repeat(rng.random((300, 3)), rng.integers(1, 6, 300), axis=0)
    else:  # a pile of identical points, e.g. outliers clipped to a corner
        P = np.vstack([rng.random((600, 2)), np.ones((150, 2))])
    tree = NeighbourDistances(P, brute_force_max=1)
    rows = sorted_neighbour_distances(P)
    for m in [*range(0, 12), 40, 148, 149, 150, 200]:
        assert tree.order_statistic(m) == brute_W(P, m, rows), m


def test_one_dimensional_W_uses_the_same_distances_as_M() -> None:
    x = np.random.default_rng(5).random(400)
    tree = NeighbourDistances(x.reshape(-1, 1), brute_force_max=1)
    assert tree.order_statistic(0) == min_pairwise_distance(x) == DeletionValues1D(x).value(0)


def test_distance_routine_is_per_pair_and_never_the_blas_expansion() -> None:
    a, b = np.array([1e8, 1e8]), np.array([1e8 + 2.0**-26, 1e8])
    assert pair_distances(a, b) == 2.0**-26 == pair_distances(b, a)
    expansion = a @ a + b @ b - 2 * (a @ b)  # cancels: nowhere near 2^-52
    assert not math.isclose(expansion, 2.0**-52, rel_tol=0.5)
    assert min_pairwise_distance(np.vstack([a, b, [0.0, 0.0]])) == 2.0**-26
    P = np.random.default_rng(2).random((50, 2))
    whole = pair_distances(P[:, None, :], P[None, :, :])
    assert all(whole[i, j] == pair_distances(P[i], P[j]) == whole[j, i] for i in range(50) for j in range(50))


def test_min_pairwise_distance_basics() -> None:
    assert min_pairwise_distance([3.0, 1.0, 7.0]) == 2.0
    assert min_pairwise_distance([[0, 0], [3, 4], [0, 0]]) == 0.0
    assert min_pairwise_distance([[0, 0], [3, 4]]) == 5.0
    assert min_pairwise_distance([1.0]) == math.inf
    assert min_pairwise_distance([-0.0, 0.0]) == 0.0
    P = np.random.default_rng(9).random((3000, 2))
    assert min_pairwise_distance(P) == brute_W(P, 0)


# ---------------------------------------------------------------------------------------------
# Global and local sensitivity.


def test_global_sensitivity_bounds() -> None:
    g1 = closest_pair_global_sensitivity(adjacency="replace", dim=1, low=0, high=6, n=4)
    assert 2.0 <= g1 <= 2.0 * (1 + 1e-11)
    assert min_pairwise_distance(np.linspace(0, 6, 4)) <= g1
    g2 = closest_pair_global_sensitivity(adjacency="replace", dim=2, low=0, high=1, n=5)
    assert math.sqrt(2) / 2 <= g2 <= math.sqrt(2) / 2 * (1 + 1e-11)  # corners + centre attain it
    assert min_pairwise_distance(np.array([[0, 0], [0, 1], [1, 0], [1, 1], [0.5, 0.5]])) <= g2
    assert closest_pair_global_sensitivity(adjacency="replace", dim=2, low=0, high=1, n=4) >= math.sqrt(2)
    big = closest_pair_global_sensitivity(adjacency="replace", dim=2, low=0, high=1, n=10**6)
    assert big == pytest.approx(math.sqrt(2) / 999)
    assert closest_pair_global_sensitivity(adjacency="add_remove", dim=3, low=-1, high=1) >= 2 * math.sqrt(3)
    with pytest.raises(UsageError):
        closest_pair_global_sensitivity(adjacency="replace", dim=2, low=0, high=1)
    with pytest.raises(InvalidBounds):
        closest_pair_global_sensitivity(adjacency="replace", dim=2, low=1, high=1, n=3)


def test_local_sensitivity_1d_matches_dense_replacement_search() -> None:
    rng = np.random.default_rng(4)
    grid = np.linspace(0.0, 1.0, 4001)
    for _ in range(25):
        x = np.round(rng.random(int(rng.integers(2, 7))), 3)
        f = min_pairwise_distance(x)
        brute = 0.0
        for i in range(x.size):
            rest = np.delete(x, i)
            moved = np.minimum(np.abs(grid[:, None] - rest[None, :]).min(axis=1), min_pairwise_distance(rest))
            brute = max(brute, float(np.abs(moved - f).max()))
        exact = closest_pair_local_sensitivity(x, low=0, high=1, adjacency="replace")
        assert brute - 1e-12 <= exact <= brute + 1.5 / 4000
        added = np.minimum(np.abs(grid[:, None] - x[None, :]).min(axis=1), f)
        removed = [min_pairwise_distance(np.delete(x, i)) if x.size > 2 else 1.0 for i in range(x.size)]
        expected = max(float(np.abs(added - f).max()), *(abs(r - f) for r in removed))
        assert closest_pair_local_sensitivity(x, low=0, high=1, adjacency="add_remove") == pytest.approx(expected)


def test_local_sensitivity_2d_box_matches_dense_grid() -> None:
    rng = np.random.default_rng(8)
    axis = np.linspace(0.0, 1.0, 201)
    cand = np.array([(a, b) for a in axis for b in axis])
    for _ in range(6):
        x = rng.random((int(rng.integers(2, 6)), 2))
        f = min_pairwise_distance(x)
        brute = 0.0
        for i in range(x.shape[0]):
            rest = np.delete(x, i, axis=0)
            nearest = pair_distances(cand[:, None, :], rest[None, :, :]).min(axis=1)
            f_minus = min_pairwise_distance(rest) if rest.shape[0] >= 2 else math.inf
            brute = max(brute, f, float(np.minimum(nearest, f_minus).max()) - f)
        exact = closest_pair_local_sensitivity(x, low=0, high=1, adjacency="replace")
        assert brute - 1e-12 <= exact <= brute + math.sqrt(2) / 200


def test_local_sensitivity_refusals() -> None:
    with pytest.raises(UnsupportedRequest):
        closest_pair_local_sensitivity(np.zeros((5, 3)), low=0, high=1, adjacency="replace")
    with pytest.raises(UnsupportedRequest):
        closest_pair_local_sensitivity(np.zeros((200, 2)), low=0, high=1, adjacency="replace")
    with pytest.raises(InvalidData):
        closest_pair_local_sensitivity([0.5, 2.0], low=0, high=1, adjacency="replace")


# ---------------------------------------------------------------------------------------------
# The seed's errors (docs/math/index.md sections 6.7 and 5.5 (iii)).


def seed_formula(x: np.ndarray, beta: float, reading: str) -> float:
    """The seed: max_k e^{-beta k} (distance to the (k+1)-th nearest neighbour), under three readings."""
    P = x.reshape(len(x), -1)
    D = pair_distances(P[:, None, :], P[None, :, :])
    np.fill_diagonal(D, np.inf)
    R = np.sort(D, axis=1)[:, :-1]
    if reading.startswith("endpoint"):
        i, j = np.unravel_index(np.argmin(D), D.shape)
        column = R[int(i) if reading == "endpoint_a" else int(j)]
    else:
        column = R.min(axis=0) if reading == "min" else R.max(axis=0)
    return max(math.exp(-beta * k) * float(column[k]) for k in range(column.size))


def test_seed_formula_is_not_an_upper_bound_on_local_sensitivity() -> None:
    x = np.array([0.0, 1.0, 1.01, 2.0])
    ls = closest_pair_local_sensitivity(x, low=0, high=6, adjacency="replace")
    assert ls == pytest.approx(0.99)
    values = {r: seed_formula(x, 0.1, r) for r in ("endpoint_a", "endpoint_b", "min")}
    assert values["endpoint_a"] == pytest.approx(0.905, abs=1e-3)
    assert values["endpoint_b"] == pytest.approx(0.896, abs=1e-3) == values["min"]
    assert all(v < ls for v in values.values())
    G = closest_pair_global_sensitivity(adjacency="replace", dim=1, low=0, high=6, n=4)
    for variant in ("exact_1d", "W"):
        assert closest_pair_smooth_bound(x, beta=0.1, G=G, variant=variant) >= ls


def test_seed_formula_max_over_points_is_not_smooth() -> None:
    x = np.array([0.0, 0.1, 0.2, 0.3, 10.0])
    x2 = np.array([0.0, 0.05, 0.1, 0.2, 0.3])  # one point replaced
    beta = 0.1
    assert seed_formula(x, beta, "max") >= 9.7 and seed_formula(x2, beta, "max") <= 0.3
    assert seed_formula(x, beta, "max") > 32 * seed_formula(x2, beta, "max") > math.exp(beta) * 0.3
    G = closest_pair_global_sensitivity(adjacency="replace", dim=1, low=0, high=10, n=5)
    for variant in ("exact_1d", "W"):
        s, s2 = (closest_pair_smooth_bound(v, beta=beta, G=G, variant=variant) for v in (x, x2))
        assert s <= math.exp(beta) * s2 and s2 <= math.exp(beta) * s


def test_removal_count_misses_collapse_but_ptr_distance_does_not() -> None:
    """docs/math/ptr.md §5.5 (iii): x = (0,100,200,300) has no 'sensitive record' but LS = 100."""
    x = np.array([0.0, 100.0, 200.0, 300.0])
    f = min_pairwise_distance(x)
    sensitive = sum(abs(min_pairwise_distance(np.delete(x, i)) - f) > 1 for i in range(4))
    assert sensitive == 0
    for adjacency in ("add_remove", "replace"):
        assert closest_pair_local_sensitivity(x, low=0, high=300, adjacency=adjacency) == 100.0
    assert min_pairwise_distance(np.append(x, 0.0)) == 0.0  # the neighbour the count cannot see
    G = closest_pair_global_sensitivity(adjacency="add_remove", dim=1, low=0, high=300)
    assert closest_pair_distance_to_instability(x, proposed_bound=1.0, G=G, cap=30) == 0  # PTR refuses


def seed_datasets() -> dict[str, np.ndarray]:
    """The seed's datasets (test fixture, not product code), reproduced with its own legacy RNG."""
    legacy = np.random.RandomState(42)  # the seed's np.random.seed(42), to reproduce its printout
    a = legacy.uniform(0, 1, (20, 2))
    b = np.vstack([legacy.normal(0, 0.01, (19, 2)), [[10.0, 10.0]]])
    return {"A": a, "B": b, "B_diagram": np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [10.0, 10.0]])}


def seed_removal_ls(P: np.ndarray) -> float:
    f = min_pairwise_distance(P)
    return max(abs(f - min_pairwise_distance(np.delete(P, i, axis=0))) for i in range(len(P)))


def test_seed_datasets_recomputed() -> None:
    """docs/math/closest-pair.md §6.7: B's minimum is 0 (not 14.14) and B's local sensitivity is far *smaller*."""
    data = seed_datasets()
    diagram = data["B_diagram"]
    assert min_pairwise_distance(diagram) == 0.0
    for adjacency in ("replace", "add_remove"):
        assert closest_pair_local_sensitivity(diagram, low=0, high=10, adjacency=adjacency) == 0.0
    assert seed_removal_ls(data["B"]) < seed_removal_ls(data["A"]) / 10
    box = {"low": -1.0, "high": 11.0}
    for seed in range(5):
        rng = np.random.default_rng(seed)
        a = rng.uniform(0, 1, (20, 2))
        b = np.vstack([np.clip(rng.normal(0, 0.01, (19, 2)), -1, 11), [[10.0, 10.0]]])
        ls_a = closest_pair_local_sensitivity(a, adjacency="replace", **box)
        ls_b = closest_pair_local_sensitivity(b, adjacency="replace", **box)
        assert ls_b < ls_a / 5


# ---------------------------------------------------------------------------------------------
# The smooth bound.


def manual_smooth(values: Callable[[int], float], G: float, beta: float) -> float:
    return max(math.exp(-k * beta) * min(G, values(k + 1)) for k in range(200))


@pytest.mark.parametrize("variant", ["exact_1d", "W"])
def test_smooth_bound_equals_the_untruncated_maximum(variant: Variant) -> None:
    rng = np.random.default_rng(12)
    for _ in range(20):
        x = rng.random(int(rng.integers(3, 40)))
        G = closest_pair_global_sensitivity(adjacency="replace", dim=1, low=0, high=1, n=x.size)
        fam = DeletionValueFamily1D(x, G=G) if variant == "exact_1d" else NeighbourRankFamily(x, G=G)
        s = closest_pair_smooth_bound(x, beta=0.3, G=G, variant=variant)
        assert s == pytest.approx(manual_smooth(fam.deletion_value, G, 0.3), rel=1e-12)
        assert s >= closest_pair_local_sensitivity(x, low=0, high=1, adjacency="replace")
        tail = closest_pair_smooth_bound(x, beta=0.3, G=G, variant=variant, constant_work=1)
        assert tail == max(min(G, fam.deletion_value(1)), math.exp(-0.3) * G)


def test_exact_1d_is_tighter_than_W_and_auto_picks_it() -> None:
    x = np.random.default_rng(1).random(2000)
    G = closest_pair_global_sensitivity(adjacency="replace", dim=1, low=0, high=1, n=x.size)
    exact = closest_pair_smooth_bound(x, beta=0.2, G=G, variant="exact_1d")
    assert closest_pair_smooth_bound(x, beta=0.2, G=G) == exact
    assert exact <= closest_pair_smooth_bound(x, beta=0.2, G=G, variant="W")
    with pytest.raises(UnsupportedRequest):
        closest_pair_smooth_bound(np.zeros((4, 2)), beta=0.2, G=1.0, variant="exact_1d")


@pytest.mark.parametrize("dim", [1, 2])
def test_smooth_bound_is_smooth_on_random_neighbours(dim: int) -> None:
    rng = np.random.default_rng(20 + dim)
    beta = 0.4
    for trial in range(150):
        n = int(rng.integers(3, 12))
        x = np.round(rng.random((n, dim)), 2)  # rounding creates ties and coincident points
        new = np.round(rng.random((1, dim)), 2)
        i = int(rng.integers(n))
        if trial % 2:
            neighbours, adjacency = [np.vstack([np.delete(x, i, axis=0), new])], "replace"
        else:
            neighbours, adjacency = [np.vstack([x, new]), np.delete(x, i, axis=0)], "add_remove"
        G = closest_pair_global_sensitivity(adjacency=adjacency, dim=dim, low=0, high=1, n=n)
        for variant in ("exact_1d", "W") if dim == 1 else ("W",):
            s = closest_pair_smooth_bound(x, beta=beta, G=G, variant=variant)
            if dim == 1 or adjacency == "add_remove" or n <= 128:
                assert s >= closest_pair_local_sensitivity(x, low=0, high=1, adjacency=adjacency)
            for y in neighbours:
                s2 = closest_pair_smooth_bound(y, beta=beta, G=G, variant=variant)
                assert s <= math.exp(beta) * s2 * (1 + 1e-12) and s2 <= math.exp(beta) * s * (1 + 1e-12)


def test_person_level_uses_U_C_k_plus_1_minus_1() -> None:
    x = np.random.default_rng(6).random(60)
    G = closest_pair_global_sensitivity(adjacency="replace", dim=1, low=0, high=1, n=60)
    fam = DeletionValueFamily1D(x, G=G)
    s3 = closest_pair_smooth_bound(x, beta=0.5, G=G, max_records_per_unit=3)
    assert s3 == smooth_upper_bound(PersonLevel(fam, 3, direct=True), beta=0.5)
    assert s3 == pytest.approx(max(math.exp(-0.5 * k) * min(G, fam.deletion_value(3 * (k + 1))) for k in range(40)))
    assert s3 >= closest_pair_smooth_bound(x, beta=0.5, G=G)


def test_tiny_inputs_give_the_cap() -> None:
    assert closest_pair_smooth_bound([0.3], beta=0.5, G=2.0) == 2.0
    assert closest_pair_smooth_bound(np.zeros((1, 2)), beta=0.5, G=2.0) == 2.0
    assert closest_pair_smooth_bound([0.3, 0.4], beta=0.5, G=2.0) == 2.0  # M_1 = inf for n = 2


def test_large_2d_input_runs_on_the_kdtree_path() -> None:
    P = np.random.default_rng(0).random((20000, 2))
    G = closest_pair_global_sensitivity(adjacency="replace", dim=2, low=0, high=1, n=P.shape[0])
    s = closest_pair_smooth_bound(P, beta=0.5, G=G, variant="W")
    fam = NeighbourRankFamily(P, G=G)
    assert 0 < s < G
    assert s == pytest.approx(manual_smooth(fam.deletion_value, G, 0.5) if s > 0 else 0.0, rel=1e-12)


def test_input_validation() -> None:
    with pytest.raises(InvalidData):
        closest_pair_smooth_bound([0.0, math.nan, 1.0], beta=0.5, G=1.0)
    with pytest.raises(InvalidData):
        closest_pair_smooth_bound([0.0, 1e300], beta=0.5, G=1.0)
    with pytest.raises(InvalidData):
        closest_pair_smooth_bound(np.zeros((2, 2, 2)), beta=0.5, G=1.0)
    with pytest.raises(InvalidData):
        closest_pair_smooth_bound(["a", "b"], beta=0.5, G=1.0)
    with pytest.raises(InvalidSensitivity):
        closest_pair_smooth_bound([0.0, 1.0], beta=0.5, G=0.0)
    with pytest.raises(InvalidSensitivity):
        closest_pair_smooth_bound([0.0, 1.0], beta=0.5, G=math.inf)
    with pytest.raises(InvalidPrivacyParameter):
        closest_pair_smooth_bound([0.0, 1.0, 2.0], beta=0.0, G=1.0)
    with pytest.raises(UsageError):
        closest_pair_smooth_bound([0.0, 1.0], beta=0.5, G=1.0, variant="B")  # type: ignore[arg-type]  # refused on purpose
    with pytest.raises(UsageError):
        closest_pair_smooth_bound([0.0, 1.0], beta=0.5, G=1.0, max_records_per_unit=0)
    with pytest.raises(UsageError):
        closest_pair_smooth_bound([0.0, 1.0], beta=0.5, G=1.0, constant_work=0)
    with pytest.raises(InvalidSensitivity):
        closest_pair_distance_to_instability([0.0, 1.0], proposed_bound=-1.0, G=1.0, cap=5)
    with pytest.raises(UsageError):
        closest_pair_distance_to_instability([0.0, 1.0], proposed_bound=1.0, G=1.0, cap=0)
    with pytest.raises(UsageError):
        NeighbourRankFamily([0.0, 1.0], G=1.0).deletion_value(-1)
    message = ""
    try:
        closest_pair_smooth_bound([0.123456789, math.inf], beta=0.5, G=1.0)
    except InvalidData as exc:
        message = str(exc)
    assert "0.123456789" not in message  # errors never carry data values


def test_piled_up_points_never_give_a_zero_noise_scale() -> None:
    """Thousands of coincident points (e.g. outliers clipped to a corner) make e^{-k beta} underflow."""
    rng = np.random.default_rng(13)
    x = np.concatenate([np.zeros(2000), rng.random(3000)])
    G = closest_pair_global_sensitivity(adjacency="replace", dim=1, low=0, high=1, n=x.size)
    assert smooth_upper_bound(DeletionValueFamily1D(x, G=G), beta=0.5) == 0.0  # the raw loop underflows
    assert closest_pair_smooth_bound(x, beta=0.5, G=G) == G * 2.0**-900 > 2.0**-1022
    P = np.vstack([np.zeros((2000, 2)), rng.random((3000, 2))])
    G2 = closest_pair_global_sensitivity(adjacency="replace", dim=2, low=0, high=1, n=P.shape[0])
    assert closest_pair_smooth_bound(P, beta=0.5, G=G2, variant="W") == G2 * 2.0**-900


@pytest.mark.parametrize("shape", [(0,), (0, 1), (0, 2), (0, 3), (1,), (1, 2)])
def test_closest_pair_inputs_are_total_below_two_points(shape: tuple[int, ...]) -> None:
    """No point or one point: the public p stays, f := G, and every family value is G (add/remove)."""
    dim = shape[1] if len(shape) > 1 else 1
    points = np.full(shape, 0.25)
    pts, value, cap, top = closest_pair_inputs(points, low=0, high=1, adjacency="add_remove")
    assert pts.shape == (shape[0], dim)
    assert cap == closest_pair_global_sensitivity(adjacency="add_remove", dim=dim, low=0, high=1)
    assert value == cap and top <= cap
    for variant in ("auto", "W"):
        family = closest_pair_family(pts, G=cap, variant=variant)
        assert [family.upper(k) for k in range(5)] == [cap] * 5
        assert closest_pair_smooth_bound(pts, beta=0.3, G=cap, variant=variant) == cap
        assert closest_pair_distance_to_instability(pts, proposed_bound=cap / 2, G=cap, cap=10, variant=variant) == 0


@pytest.mark.parametrize("dim", [1, 2])
def test_smooth_bound_of_no_point_is_smooth_and_an_upper_bound(dim: int) -> None:
    """S(empty) >= LS(empty) and S(empty) <= e^beta S(x') for the neighbours x' (one point), one step on."""
    beta = 0.4
    rng = np.random.default_rng(7 + dim)
    empty = np.zeros((0, dim))
    _, f_empty, cap, _ = closest_pair_inputs(empty, low=0, high=1, adjacency="add_remove")
    s_empty = closest_pair_smooth_bound(empty, beta=beta, G=cap)
    for _ in range(20):
        one = rng.random((1, dim))
        two = np.vstack([one, rng.random((1, dim))])
        _, f_one, _, _ = closest_pair_inputs(one, low=0, high=1, adjacency="add_remove")
        _, f_two, _, _ = closest_pair_inputs(two, low=0, high=1, adjacency="add_remove")
        s_one = closest_pair_smooth_bound(one, beta=beta, G=cap)
        s_two = closest_pair_smooth_bound(two, beta=beta, G=cap)
        assert s_empty >= abs(f_empty - f_one)  # LS at the empty set: its neighbours have one point
        assert s_one >= max(abs(f_one - f_empty), abs(f_one - f_two))
        assert s_empty <= math.exp(beta) * s_one and s_one <= math.exp(beta) * s_empty
        assert s_one <= math.exp(beta) * s_two and s_two <= math.exp(beta) * s_one
