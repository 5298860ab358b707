"""Triangle counting under edge-level DP: local, global and smooth sensitivity.

Provides LS = max_{i<j} a_ij (common neighbours), GS = n - 2 and ``TriangleFamily``, the exact
A^(k) = max_{i<j} min(a_ij + floor((k + min(k, b_ij))/2), n - 2) evaluated sparsely over a Pareto
frontier (``dense_reference_upper`` is the O(n²) reference). Adjacency: the vertex set [n] is public
and declared; neighbouring graphs differ in one vertex pair (one edge added or removed). A release
calibrated with ``triangle_smooth_sensitivity`` (monotone-family lemma, beta-smooth) protects any
*single edge*, not a vertex's neighbourhood (node-level) nor a person owning several edges:
``check_edge_privacy_unit`` refuses both, and ``smooth.PersonLevel`` must not wrap this family.
Sources: Nissim-Raskhodnikova-Smith, STOC 2007, section 3; Karwa-Raskhodnikova-Smith-Yaroslavtsev,
VLDB 2011. Proofs, sparse evaluation and pitfalls: docs/math/triangles.md (the lemma:
docs/math/smooth-sensitivity.md §3.2). Every value computed here is data-dependent and stays in the process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpsense.core.checks import integer_in
from dpsense.core.errors import InternalError, InvalidPrivacyParameter, UnsupportedRequest, UsageError
from dpsense.sensitivity.graph import GraphLike, IntArray, _check_num_vertices
from dpsense.sensitivity.graph import UndirectedGraph as UndirectedGraph
from dpsense.sensitivity.graph import as_graph as as_graph
from dpsense.sensitivity.smooth import smooth_upper_bound

__all__ = [
    "EDGE_PRIVACY_UNIT",
    "TriangleFamily",
    "UndirectedGraph",
    "as_graph",
    "check_edge_privacy_unit",
    "dense_reference_upper",
    "triangle_count",
    "triangle_global_sensitivity",
    "triangle_local_sensitivity",
    "triangle_smooth_sensitivity",
    "triangle_smooth_sensitivity_candidates",
]

EDGE_PRIVACY_UNIT = "edge"
DENSE_REFERENCE_MAX_VERTICES = 2048


def check_edge_privacy_unit(unit: str) -> str:
    """The declared privacy unit, accepted only when it is a single edge.

    Args:
        unit: the declared unit; only ``"edge"`` (any case) is supported.

    Returns:
        ``"edge"``.

    Raises:
        UnsupportedRequest: for any other unit. Node-level privacy (a vertex and all its edges) has global
            sensitivity Θ(n²) for triangles and needs different algorithms; a person owning several edges
            is not covered by this family either (see docs/math/triangles.md).

    """
    if isinstance(unit, str) and unit.strip().lower() == EDGE_PRIVACY_UNIT:
        return EDGE_PRIVACY_UNIT
    if isinstance(unit, str) and unit.strip().lower() in {"node", "vertex", "person", "user"}:
        fix = (
            "a unit owning a vertex's edges (node-level, global sensitivity Θ(n²)) or several edges needs a "
            "different method, e.g. node-private degree-bounded projection; declare privacy_unit='edge' only if "
            "one edge is the unit"
        )
    else:
        fix = "declare privacy_unit='edge': these bounds protect the presence of one edge on a public vertex set"
    raise UnsupportedRequest("triangle sensitivities are stated for the edge privacy unit only", unit, fix)


@dataclass(frozen=True)
class _PairStructure:
    """Everything the sensitivities need, computed once per graph (private, data-dependent)."""

    triangles: int
    max_common: int
    frontier_a: IntArray  # Pareto frontier of (a_ij, b_ij) over all pairs i < j, a increasing
    frontier_b: IntArray


def _analyse(adj: Any, n: int) -> _PairStructure:
    empty = np.zeros(0, dtype=np.int64)
    import scipy.sparse as sp  # imported when first used: scipy costs a CLI's start

    if n < 2:
        return _PairStructure(0, 0, empty, empty)
    deg = np.diff(adj.indptr).astype(np.int64)
    # Relabel by decreasing degree: a vertex's label is then its position in that order (free-pair search).
    order = np.argsort(-deg, kind="stable")
    adj, deg = adj[order][:, order], deg[order]
    # (A + I)(A + nI) = A² + (n + 1)A + nI: off the diagonal an entry is a_ij + (n + 1)A_ij with a_ij <= n - 2,
    # and every diagonal entry is stored, so each vertex blocks itself. Canonical CSR: per row, sorted
    # unique labels of the explicit pairs P.
    eye = sp.eye_array(n, dtype=np.int64, format="csr")
    coded = ((adj + eye) @ (adj + eye * n)).tocsr()
    coded.sum_duplicates()
    coded.eliminate_zeros()
    counts = np.diff(coded.indptr).astype(np.int64)
    rows = np.repeat(np.arange(n, dtype=np.int64), counts)
    cols = np.asarray(coded.indices, dtype=np.int64)
    data = np.asarray(coded.data, dtype=np.int64)
    free_b = _best_free_pair(deg, rows, cols, counts, np.asarray(coded.indptr[:-1], dtype=np.int64), n)
    upper = cols > rows
    a, edge = data[upper] % (n + 1), data[upper] // (n + 1)
    b = deg[rows[upper]] + deg[cols[upper]] - 2 * a - 2 * edge
    closed = int(a[edge == 1].sum())
    if closed % 3:
        raise InternalError("the triangle count from A * A² is not a multiple of 3")
    best = np.full(int(a.max()) + 1 if a.size else 1, -1, dtype=np.int64)
    np.maximum.at(best, a, b)
    best[0] = max(int(best[0]), free_b)
    after = np.append(np.maximum.accumulate(best[::-1])[::-1][1:], -1)
    keep = best > after
    return _PairStructure(closed // 3, int(a.max()) if a.size else 0, np.flatnonzero(keep).astype(np.int64), best[keep])


def _pairs(graph: UndirectedGraph) -> _PairStructure:
    """The graph's pair structure (common neighbours, Pareto frontier), computed once per graph."""
    structure: _PairStructure = graph.derived(_analyse)
    return structure


def _best_free_pair(deg: IntArray, rows: IntArray, cols: IntArray, counts: IntArray, starts: IntArray, n: int) -> int:
    """Max of d_i + d_j over pairs not stored in the canonical CSR (rows, cols); -1 if every pair is stored.

    Labels are sorted by decreasing degree, so i's best free partner is the smallest label missing from its
    sorted row (self included). Labels in a row are distinct, so that is the first rank where they disagree.
    """
    rank = np.arange(cols.size, dtype=np.int64) - starts[rows]
    first_gap = np.minimum.reduceat(np.where(cols != rank, rank, counts[rows]), starts)
    found = first_gap < n
    if not bool(np.any(found)):
        return -1
    return int(np.max(deg[found] + deg[first_gap[found]]))


def _check_step(k: object) -> int:
    if isinstance(k, np.integer):
        k = int(k)
    if not integer_in(k, 0):
        raise UsageError("the step k of a monotone family must be an integer >= 0", k, "pass k = 0, 1, 2, ...")
    return k


def _check_beta(beta: float) -> float:
    try:
        value = float(beta)
    except (TypeError, ValueError):
        value = math.nan
    if isinstance(beta, bool) or not (value > 0 and math.isfinite(value)):
        raise InvalidPrivacyParameter(
            "the smoothing parameter beta must be finite and > 0",
            beta,
            "derive beta from (epsilon, delta) and the noise family (docs/math/smooth-sensitivity.md §3.3), "
            "never from the data",
        )
    return value


def triangle_count(graph: GraphLike) -> int:
    """The number of triangles (exact). Private: release only through a DP mechanism."""
    return _pairs(as_graph(graph)).triangles


def triangle_local_sensitivity(graph: GraphLike) -> int:
    """LS(G) = max_{i<j} a_ij, the largest number of common neighbours of a vertex pair (edge adjacency).

    For analysis only: it never calibrates noise on its own. A noise scale read from LS leaks through its
    size (docs/math/local-sensitivity.md); calibrate with ``triangle_smooth_sensitivity`` or test it with PTR.
    """
    return _pairs(as_graph(graph)).max_common


def triangle_global_sensitivity(num_vertices: int) -> int:
    """GS = n - 2 (0 when n < 3) under edge adjacency: one edge ij closes at most n - 2 triangles."""
    return max(_check_num_vertices(num_vertices) - 2, 0)


class TriangleFamily:
    """U_k = A^(k) = max_{i<j} min(a_ij + floor((k + min(k, b_ij))/2), n - 2): an exact monotone family.

    Implements ``smooth.MonotoneFamily`` for edge adjacency on the public vertex set [n] (NRS07 section 3;
    Karwa et al. VLDB 2011), with cap G = n - 2 = GS. Evaluated over the Pareto frontier of (a_ij, b_ij),
    which includes the best pair without common neighbours (proof in docs/math/triangles.md): O(d_max) per k.
    Do not wrap it in ``smooth.PersonLevel`` (docs/math/smooth-sensitivity.md §3.2).
    """

    __slots__ = ("_cap", "_frontier_a", "_frontier_b")

    def __init__(self, graph: GraphLike) -> None:
        g = as_graph(graph)
        pairs = _pairs(g)
        self._cap = triangle_global_sensitivity(g.num_vertices)
        self._frontier_a = pairs.frontier_a
        self._frontier_b = pairs.frontier_b

    @property
    def cap(self) -> float:
        """G = n - 2, the global sensitivity (public)."""
        return float(self._cap)

    def upper(self, k: int) -> float:
        """U_k = A^(k)(G), exact: the largest LS over graphs within k edge flips."""
        return float(self.upper_exact(k))

    def upper_exact(self, k: int) -> int:
        """U_k as an integer."""
        step = _check_step(k)
        if self._frontier_a.size == 0:
            return 0
        # Every pair reaches the cap once floor(k/2) >= G, so larger k change nothing (and cannot overflow).
        step = min(step, 2 * self._cap)
        best = int(np.max(self._frontier_a + (step + np.minimum(step, self._frontier_b)) // 2))
        return min(best, self._cap)


def dense_reference_upper(graph: GraphLike, k: int) -> int:
    """U_k = A^(k) by the O(n²) dense formula over every pair: the reference for tests (n <= 2048).

    Raises:
        UsageError: if n exceeds ``DENSE_REFERENCE_MAX_VERTICES`` or k is not an integer >= 0.

    """
    g = as_graph(graph)
    step, n = _check_step(k), g.num_vertices
    if n > DENSE_REFERENCE_MAX_VERTICES:
        raise UsageError(
            f"the dense reference handles at most {DENSE_REFERENCE_MAX_VERTICES} vertices", n, "use TriangleFamily"
        )
    if n < 2:
        return 0
    adj = g._adjacency.toarray()
    common = adj @ adj
    deg = adj.sum(axis=1)
    exactly_one = deg[:, None] + deg[None, :] - 2 * common - 2 * adj
    iu = np.triu_indices(n, k=1)
    step = min(step, 2 * (n - 2))
    values = common[iu] + (step + np.minimum(step, exactly_one[iu])) // 2
    return int(min(int(values.max()), n - 2))


def triangle_smooth_sensitivity(
    graph: GraphLike, *, beta: float, privacy_unit: str, constant_work: int | None = None
) -> float:
    """A β-smooth upper bound on the triangle count's local sensitivity, edge-level (S* itself by default).

    S(G) = max_k e^{-kβ} min(n - 2, A^(k)(G)) through ``smooth_upper_bound`` (docs/math/index.md sections 3.2 and 7).
    With
    the default early stop this is exactly the smooth sensitivity S*; with ``constant_work=K`` it evaluates K
    terms and adds the tail e^{-Kβ}(n - 2), still β-smooth. β must come from (ε, δ) and the noise family
    (docs/math/smooth-sensitivity.md §3.3), never from the data. The result is data-dependent: use it only as a noise
    scale.

    Args:
        graph: an ``UndirectedGraph`` or a scipy sparse adjacency matrix on the public vertex set.
        beta: the smoothing parameter, finite and > 0.
        privacy_unit: must be ``"edge"``; anything else is refused (see ``check_edge_privacy_unit``).
        constant_work: optional public number of terms K.

    Raises:
        UnsupportedRequest: if the privacy unit is not an edge.
        InvalidPrivacyParameter: if beta is not finite and > 0.

    """
    check_edge_privacy_unit(privacy_unit)
    family = TriangleFamily(graph)
    value = smooth_upper_bound(family, beta=_check_beta(beta), constant_work=constant_work)
    if not math.isfinite(value):
        raise InternalError("the triangle smooth bound is not finite")
    return value


def triangle_smooth_sensitivity_candidates(graph: GraphLike, *, beta: float, privacy_unit: str) -> float:
    """S* = max_k e^{-kβ} A^(k)(G) by a constant candidate set per frontier point: work independent of β.

    The same value as ``triangle_smooth_sensitivity`` without ``constant_work`` (docs/math/triangles.md; checked
    against that loop in the tests). For one point (a, b) with cap G, phi(k) = min(a + floor((k + min(k, b))/2),
    G) is a + k on [0, b], then a + b + t at k = b + 2t (odd steps repeat a value at a larger k, so never win),
    and constant from its cap point k_c on. On each piece log phi(k) - kβ is concave, so the maximum lies in
    {0, b, k_c, the integers around 1/β - a in [0, min(b, k_c)], b + 2t for the integers t around
    1/(2β) - a - b in [0, (k_c - b)/2]}.

    Raises:
        UnsupportedRequest: if the privacy unit is not an edge.
        InvalidPrivacyParameter: if beta is not finite and > 0.

    """
    check_edge_privacy_unit(privacy_unit)
    beta = _check_beta(beta)
    family = TriangleFamily(graph)
    fa, fb, cap = family._frontier_a, family._frontier_b, family._cap
    if fa.size == 0 or cap == 0:
        return 0.0
    k_cap = np.where(fa + fb >= cap, cap - fa, fb + 2 * (cap - fa - fb))
    rise_end = np.minimum(fb, k_cap)
    steps_end = np.maximum((k_cap - fb) // 2, 0)
    rise, steps = 1.0 / beta - fa, 1.0 / (2.0 * beta) - fa - fb
    candidates = [np.zeros_like(fa), fb, k_cap]
    for rounding in (np.floor, np.ceil):
        candidates.append(np.clip(rounding(rise), 0, rise_end).astype(np.int64))
        candidates.append(fb + 2 * np.clip(rounding(steps), 0, steps_end).astype(np.int64))
    k = np.stack(candidates)
    phi = np.minimum(fa + (k + np.minimum(k, fb)) // 2, cap)
    return float(np.max(np.exp(-beta * k) * phi))
