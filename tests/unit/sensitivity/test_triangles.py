"""Triangle counts under edge adjacency (docs/math/triangles.md): formula, sparse evaluation, smoothness."""

import itertools
import math
import time

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsense.core import InvalidData, InvalidPrivacyParameter, UnsupportedRequest, UsageError
from dpsense.sensitivity.smooth import MonotoneFamily, PersonLevel, smooth_upper_bound
from dpsense.sensitivity.triangles import (
    TriangleFamily,
    UndirectedGraph,
    as_graph,
    check_edge_privacy_unit,
    dense_reference_upper,
    triangle_count,
    triangle_global_sensitivity,
    triangle_local_sensitivity,
    triangle_smooth_sensitivity,
    triangle_smooth_sensitivity_candidates,
)

# ---------------------------------------------------------------------------------------------
# Brute force on small vertex sets: every graph is a bit mask over the vertex pairs; a neighbour flips one bit.


class Exhaustive:
    """All graphs on n vertices with their true count, true LS and brute-force A^(k) (balls of radius k)."""

    def __init__(self, n: int, kmax: int) -> None:
        self.n = n
        self.pairs = list(itertools.combinations(range(n), 2))
        self.size = 1 << len(self.pairs)
        tri = [
            [self.pairs.index((i, j)), self.pairs.index((i, k)), self.pairs.index((j, k))]
            for i, j, k in itertools.combinations(range(n), 3)
        ]
        masks = np.arange(self.size)
        bits = (masks[:, None] >> np.arange(len(self.pairs))[None, :]) & 1
        self.count = sum(bits[:, a] & bits[:, b] & bits[:, c] for a, b, c in tri)
        self.flip = masks[:, None] ^ (1 << np.arange(len(self.pairs)))[None, :]
        self.ls = np.abs(self.count[self.flip] - self.count[:, None]).max(axis=1)
        self.ball = [self.ls]
        for _ in range(kmax):
            prev = self.ball[-1]
            self.ball.append(np.maximum(prev, prev[self.flip].max(axis=1)))

    def graph(self, mask: int) -> UndirectedGraph:
        edges = [p for e, p in enumerate(self.pairs) if mask >> e & 1]
        return UndirectedGraph(np.array(edges, dtype=np.int64).reshape(-1, 2), num_vertices=self.n)


FIVE = Exhaustive(5, kmax=5)
FIVE_GRAPHS = [FIVE.graph(mask) for mask in range(FIVE.size)]


def test_exhaustive_five_vertices_formula_equals_brute_force_ball_maximum():
    assert FIVE.size == 1024
    for mask, g in enumerate(FIVE_GRAPHS):
        family = TriangleFamily(g)
        assert triangle_count(g) == FIVE.count[mask]
        assert triangle_local_sensitivity(g) == FIVE.ls[mask]
        for k in range(5):
            assert family.upper_exact(k) == FIVE.ball[k][mask], (mask, k)
            assert dense_reference_upper(g, k) == FIVE.ball[k][mask]


def test_global_sensitivity_is_n_minus_two_and_attained():
    assert int(FIVE.ls.max()) == triangle_global_sensitivity(5) == 3
    assert [triangle_global_sensitivity(n) for n in range(5)] == [0, 0, 0, 1, 2]
    assert triangle_global_sensitivity(np.int64(1000)) == 998
    for bad in (-1, 2.5, True, "5"):
        with pytest.raises(UsageError):
            triangle_global_sensitivity(bad)


def test_family_is_monotone_on_every_edge_neighbour_pair_of_six_vertices():
    rng = np.random.default_rng(6)
    pairs = list(itertools.combinations(range(6), 2))
    for mask in rng.integers(0, 1 << 15, size=120):
        g = UndirectedGraph(np.array([p for e, p in enumerate(pairs) if mask >> e & 1]).reshape(-1, 2), num_vertices=6)
        fam = TriangleFamily(g)
        assert fam.upper(0) == triangle_local_sensitivity(g)
        for e in range(15):
            other = [p for f, p in enumerate(pairs) if (mask ^ (1 << e)) >> f & 1]
            nb = TriangleFamily(UndirectedGraph(np.array(other).reshape(-1, 2), num_vertices=6))
            assert all(fam.upper(k) <= nb.upper(k + 1) for k in range(10))


# ---------------------------------------------------------------------------------------------
# Sparse evaluation against the dense O(n²) reference.


def _dense_check(g: UndirectedGraph) -> None:
    n = g.num_vertices
    fam = TriangleFamily(g)
    adj = g.adjacency.toarray()
    assert triangle_count(g) == int(np.trace(adj @ adj @ adj)) // 6
    assert triangle_local_sensitivity(g) == dense_reference_upper(g, 0)
    previous = 0
    steps = range(0, 2 * n + 3) if n <= 40 else sorted({*range(12), *np.linspace(12, 2 * n + 2, 12).astype(int)})
    for k in steps:
        value = fam.upper_exact(k)
        assert value == dense_reference_upper(g, k), (n, k)
        assert previous <= value <= max(n - 2, 0)
        previous = value
    assert fam.upper_exact(10**30) == max(n - 2, 0)


@st.composite
def sparse_graphs(draw):
    n = draw(st.integers(0, 40))
    if n < 2:
        return UndirectedGraph(np.zeros((0, 2), dtype=np.int64), num_vertices=n)
    m = draw(st.integers(0, 3 * n))
    vertex = st.integers(0, n - 1)
    edges = draw(st.lists(st.tuples(vertex, vertex).filter(lambda e: e[0] != e[1]), min_size=m, max_size=m))
    return UndirectedGraph(np.array(edges, dtype=np.int64).reshape(-1, 2), num_vertices=n)


@settings(max_examples=150, deadline=None)
@given(sparse_graphs())
def test_sparse_evaluation_equals_dense_reference_hypothesis(g):
    _dense_check(g)


def _random_edges(rng, n, m):
    e = rng.integers(0, n, size=(m, 2))
    return e[e[:, 0] != e[:, 1]]


@pytest.mark.parametrize("seed", range(6))
def test_sparse_evaluation_equals_dense_reference_seeded(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 200))
    for m in (0, n // 2, 2 * n, 6 * n):
        _dense_check(UndirectedGraph(_random_edges(rng, n, m), num_vertices=n))
    # Structured cases: disjoint cliques, a complete graph, stars of unequal size sharing no leaf.
    cliques = [(i, j) for base in range(0, 30, 6) for i, j in itertools.combinations(range(base, base + 6), 2)]
    _dense_check(UndirectedGraph(cliques, num_vertices=n))
    _dense_check(UndirectedGraph(list(itertools.combinations(range(12), 2)), num_vertices=12))
    stars = [(0, v) for v in range(2, 20)] + [(1, v) for v in range(20, 31)]
    _dense_check(UndirectedGraph(stars, num_vertices=n))


def test_pair_without_common_neighbours_dominates_for_large_k():
    # Two hubs with 20 private leaves each, far from the only triangle (3 common-neighbour pairs with a = 1).
    n = 60
    edges = [(0, v) for v in range(2, 22)] + [(1, v) for v in range(22, 42)] + [(50, 51), (51, 52), (50, 52)]
    g = UndirectedGraph(edges, num_vertices=n)
    fam = TriangleFamily(g)
    assert fam.upper_exact(0) == 1
    # Hubs 0 and 1: a = 0, b = 40, so U_k = k for 1 <= k <= 40; pairs with a > 0 alone would give about k/2.
    for k in (5, 20, 40):
        assert fam.upper_exact(k) == dense_reference_upper(g, k) == k
    adj = g.adjacency.toarray()
    common, deg = adj @ adj, adj.sum(axis=1)
    exactly_one = deg[:, None] + deg[None, :] - 2 * common - 2 * adj
    with_common = [(i, j) for i, j in itertools.combinations(range(n), 2) if common[i, j] > 0]
    restricted = max(common[i, j] + (40 + min(40, exactly_one[i, j])) // 2 for i, j in with_common)
    assert restricted == 21 < fam.upper_exact(40)


def test_large_sparse_graph_is_fast():
    rng = np.random.default_rng(1000)
    g = UndirectedGraph(_random_edges(rng, 1000, 5000), num_vertices=1000)
    start = time.perf_counter()
    value = triangle_smooth_sensitivity(g, beta=0.05, privacy_unit="edge")
    elapsed = time.perf_counter() - start
    assert triangle_local_sensitivity(g) <= value <= 998
    assert elapsed < 1.0


# ---------------------------------------------------------------------------------------------
# The smooth bound: >= LS, beta-smooth on every edge-neighbour pair, and the tail-term control.


@pytest.mark.parametrize("beta", [0.05, 0.3, 1.0])
@pytest.mark.parametrize("constant_work", [None, 1, 3])
def test_smooth_bound_is_beta_smooth_and_above_ls_on_all_five_vertex_graphs(beta, constant_work):
    s = np.array(
        [
            triangle_smooth_sensitivity(g, beta=beta, privacy_unit="edge", constant_work=constant_work)
            for g in FIVE_GRAPHS
        ]
    )
    assert np.all(s >= FIVE.ls)
    assert np.all(s[:, None] <= math.exp(beta) * s[FIVE.flip] * (1 + 1e-12))


def _no_tail(family: MonotoneFamily, beta: float, K: int) -> float:
    return max(math.exp(-k * beta) * min(family.cap, family.upper(k)) for k in range(K))


@pytest.mark.parametrize("K", [1, 2, 3])
def test_dropping_the_tail_term_breaks_smoothness_control(K):
    beta = 0.1
    no_tail = np.array([_no_tail(TriangleFamily(g), beta, K) for g in FIVE_GRAPHS])
    with_tail = np.array([smooth_upper_bound(TriangleFamily(g), beta=beta, constant_work=K) for g in FIVE_GRAPHS])
    assert np.any(no_tail[:, None] > math.exp(beta) * no_tail[FIVE.flip])
    assert np.all(with_tail[:, None] <= math.exp(beta) * with_tail[FIVE.flip] * (1 + 1e-12))


def test_smooth_bound_equals_the_definition_and_constant_work_adds_the_tail():
    rng = np.random.default_rng(7)
    g = UndirectedGraph(_random_edges(rng, 40, 90), num_vertices=40)
    beta = 0.2
    direct = max(math.exp(-k * beta) * min(38, dense_reference_upper(g, k)) for k in range(200))
    assert triangle_smooth_sensitivity(g, beta=beta, privacy_unit="edge") == pytest.approx(direct, rel=1e-12)
    fam = TriangleFamily(g)
    for K in (1, 4, 9):
        expected = max(_no_tail(fam, beta, K), math.exp(-K * beta) * 38)
        got = triangle_smooth_sensitivity(g, beta=beta, privacy_unit="edge", constant_work=K)
        assert got == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize("beta", [1e-4, 0.01, 0.07, 0.5, 3.0])
def test_candidate_k_method_equals_the_loop(beta):
    rng = np.random.default_rng(int(beta * 1e4))
    graphs = FIVE_GRAPHS[::37] + [
        UndirectedGraph(_random_edges(rng, n, m), num_vertices=n)
        for n, m in [(2, 1), (3, 3), (30, 10), (60, 200), (300, 900), (200, 4000)]
    ]
    for g in graphs:
        loop = triangle_smooth_sensitivity(g, beta=beta, privacy_unit="edge")
        fast = triangle_smooth_sensitivity_candidates(g, beta=beta, privacy_unit="edge")
        assert fast == pytest.approx(loop, rel=1e-12, abs=0.0)


@settings(max_examples=100, deadline=None)
@given(sparse_graphs(), st.floats(1e-3, 5.0))
def test_candidate_k_method_equals_the_loop_hypothesis(g, beta):
    loop = triangle_smooth_sensitivity(g, beta=beta, privacy_unit="edge")
    assert triangle_smooth_sensitivity_candidates(g, beta=beta, privacy_unit="edge") == pytest.approx(loop, rel=1e-12)


def test_tiny_graphs_have_zero_sensitivity():
    for n in (0, 1, 2):
        edges = [(0, 1)] if n == 2 else []
        g = UndirectedGraph(edges, num_vertices=n)
        assert triangle_count(g) == triangle_local_sensitivity(g) == 0
        assert TriangleFamily(g).cap == 0.0
        assert triangle_smooth_sensitivity(g, beta=0.1, privacy_unit="edge") == 0.0
        assert triangle_smooth_sensitivity_candidates(g, beta=0.1, privacy_unit="edge") == 0.0


@pytest.mark.parametrize("beta", [0, -1.0, math.inf, math.nan, "x", True])
def test_invalid_beta_is_refused(beta):
    g = FIVE_GRAPHS[5]
    with pytest.raises(InvalidPrivacyParameter):
        triangle_smooth_sensitivity(g, beta=beta, privacy_unit="edge")
    with pytest.raises(InvalidPrivacyParameter):
        triangle_smooth_sensitivity_candidates(g, beta=beta, privacy_unit="edge")


def test_family_refuses_negative_steps():
    fam = TriangleFamily(FIVE_GRAPHS[3])
    for k in (-1, 1.5, True):
        with pytest.raises(UsageError):
            fam.upper(k)
    assert fam.upper(np.int64(2)) == fam.upper(2)


# ---------------------------------------------------------------------------------------------
# The privacy unit.


def test_edge_unit_is_accepted():
    assert check_edge_privacy_unit("edge") == check_edge_privacy_unit(" EDGE ") == "edge"


@pytest.mark.parametrize("unit", ["node", "vertex", "person", "edges", "", 3])
def test_other_units_are_refused_with_a_fix(unit):
    with pytest.raises(UnsupportedRequest) as info:
        check_edge_privacy_unit(unit)
    assert "Fix:" in str(info.value)
    with pytest.raises(UnsupportedRequest):
        triangle_smooth_sensitivity(FIVE_GRAPHS[7], beta=0.1, privacy_unit=unit)
    with pytest.raises(UnsupportedRequest):
        triangle_smooth_sensitivity_candidates(FIVE_GRAPHS[7], beta=0.1, privacy_unit=unit)


def test_node_unit_refusal_names_the_quadratic_global_sensitivity():
    with pytest.raises(UnsupportedRequest, match="Θ"):
        check_edge_privacy_unit("node")


def test_direct_person_level_wrapper_is_not_valid_for_triangles():
    # The star 0-1, 0-2, 0-3 has U_1 = A^(1) = 1, so a direct PersonLevel with C = 2 claims U'_0 = 1, but
    # adding edges 1-2 and 1-3 (one unit, two edges) adds 2 triangles. The general wrapper (factor C) holds.
    star = UndirectedGraph([(0, 1), (0, 2), (0, 3)], num_vertices=5)
    direct = PersonLevel(TriangleFamily(star), max_records_per_unit=2, direct=True)
    general = PersonLevel(TriangleFamily(star), max_records_per_unit=2)
    after = UndirectedGraph([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3)], num_vertices=5)
    change = triangle_count(after) - triangle_count(star)
    assert change == 2 > direct.upper(0)
    assert general.upper(0) >= change


# ---------------------------------------------------------------------------------------------
# Input validation; messages never contain an edge.


def test_duplicate_and_reversed_edges_are_merged():
    a = UndirectedGraph([(0, 1), (1, 0), (0, 1), (1, 2), (2, 0)], num_vertices=4)
    b = UndirectedGraph(np.array([[0, 1], [1, 2], [0, 2]], dtype=np.uint8), num_vertices=4)
    assert (a.adjacency != b.adjacency).nnz == 0
    assert triangle_count(a) == 1
    assert a.adjacency.sum() == 6


def test_sparse_and_dense_adjacency_inputs():
    coo = sp.coo_matrix(([1, 1, 1, 1, 1, 1, 0], ([0, 1, 1, 2, 0, 0, 2], [1, 0, 2, 1, 1, 1, 3])), shape=(4, 4))
    g = UndirectedGraph.from_adjacency(coo)  # duplicated (0, 1) merged, explicit zero ignored
    assert g.num_vertices == 4 and g.adjacency.sum() == 4
    assert triangle_count(sp.csr_array(g.adjacency)) == 0
    dense = np.ones((4, 4), dtype=bool) ^ np.eye(4, dtype=bool)
    assert triangle_count(UndirectedGraph.from_adjacency(dense)) == 4
    assert as_graph(g) is g


SECRET = 17  # a vertex id that must never appear in a message


@pytest.mark.parametrize(
    "edges",
    [
        [(SECRET, SECRET)],
        [(SECRET, 40)],
        [(-SECRET, 3)],
        np.array([[1.0, SECRET]]),
        np.array([SECRET, 3]),
        np.zeros((SECRET, 3), dtype=np.int64),
    ],
)
def test_bad_edge_lists_are_refused_without_leaking(edges):
    with pytest.raises(InvalidData) as info:
        UndirectedGraph(edges, num_vertices=20)
    assert str(SECRET) not in str(info.value)


@pytest.mark.parametrize(
    "matrix",
    [
        sp.csr_array(([1], ([SECRET], [SECRET])), shape=(20, 20)),  # self loop
        sp.csr_array(([1], ([3], [SECRET])), shape=(20, 20)),  # not symmetric
        sp.csr_array(([SECRET, SECRET], ([3, 4], [4, 3])), shape=(20, 20)),  # weighted
        sp.csr_array(([1.0], ([3], [4])), shape=(20, 21)),  # not square
        np.zeros(SECRET + 3),
    ],
)
def test_bad_matrices_are_refused_without_leaking(matrix):
    with pytest.raises(InvalidData) as info:
        UndirectedGraph.from_adjacency(matrix)
    assert str(SECRET) not in str(info.value)


def test_edge_lists_need_the_public_vertex_count():
    with pytest.raises(UsageError, match="num_vertices"):
        triangle_count(np.array([[0, 1]]))
    for n in (-1, 2.0, True, None):
        with pytest.raises(UsageError):
            UndirectedGraph([(0, 1)], num_vertices=n)


def test_repr_shows_only_the_public_vertex_count():
    g = UndirectedGraph([(3, SECRET)], num_vertices=20)
    assert repr(g) == "UndirectedGraph(num_vertices=20, edges=<private>)"


def test_dense_reference_refuses_large_graphs():
    with pytest.raises(UsageError):
        dense_reference_upper(UndirectedGraph([], num_vertices=5000), 0)
