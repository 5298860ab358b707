"""Exact computational kernels behind ``dpsense.sensitivity.closest_pair`` (private).

Everything here is an *exact* function of the points for one fixed distance routine,
``pair_distances``; the privacy proofs in ``closest_pair`` (docs/math/closest-pair.md, derived there, not
published) are combinatorial statements about that routine's outputs, so an approximation of any
quantity below would void them.

* ``pair_distances``: the one per-pair distance routine (|a - b| in 1-D; sqrt of the sum of squared
  coordinate differences, accumulated in coordinate order, otherwise).
* ``NeighbourDistances``: rho_i^(j) (distance from point i to its j-th nearest other point) and the
  order statistic W_m = (m+1)-th smallest of rho_i^(m+1). A k-d tree only *proposes* neighbours;
  every distance is recomputed with ``pair_distances`` and a proposal is accepted only when the tree's
  own k-th distance clears the needed value by a margin (relative 2^-29, absolute 2^-499) that is
  many orders of magnitude above the disagreement of any two sum-of-squares implementations of the
  Euclidean distance (at most a few ulps plus underflow). Otherwise k is doubled, up to k = n.
* ``DeletionValues1D``: M_m (largest computed min-gap after deleting m points) by bisection over the
  bit patterns of non-negative doubles; each feasibility test is the greedy selection restricted to
  the runs of gaps below the threshold.
* ``largest_empty_radius_2d``: R = sup over a box of the distance to the nearest point (analysis only).
"""

from __future__ import annotations

import bisect
import itertools
import math
import struct
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpsense.core.errors import InternalError

F64 = NDArray[np.float64]
Idx = NDArray[np.intp]

_REL_SLACK = 2.0**-30
_ABS_SLACK = 2.0**-500
#: Up to this many points the full distance matrix replaces the k-d tree.
BRUTE_FORCE_MAX_POINTS = 256
#: Rows x neighbours handled per k-d query chunk (bounds peak memory to a few hundred MB).
_CHUNK = 1 << 21
_INF_BITS = 0x7FF0000000000000


def pair_distances(a: F64, b: F64) -> F64:
    """Distances between a[..., :] and b[..., :] (broadcast over leading axes), one routine for every pair.

    Deterministic and symmetric per pair: elementwise IEEE operations in a fixed coordinate order,
    never the BLAS expansion ||a||^2 + ||b||^2 - 2 a.b, whose cancellation returns 0 or negative values
    for close distinct points and whose rounding depends on blocking, so one pair could get two
    different distances in two calls and the exact monotonicity proofs would no longer apply.
    """
    return _combine([a[..., k] - b[..., k] for k in range(a.shape[-1])])


def indexed_distances(columns: list[F64], i: Idx, j: Idx) -> F64:
    """``pair_distances`` between points i and j given as coordinate columns (same arithmetic, faster gathers)."""
    return _combine([col[i] - col[j] for col in columns])


def _combine(diffs: list[F64]) -> F64:
    if len(diffs) == 1:
        return np.abs(diffs[0])
    acc = diffs[0] * diffs[0]
    for diff in diffs[1:]:
        acc = acc + diff * diff  # separate multiply and add ufuncs: never fused into an FMA
    return np.sqrt(acc)


class NeighbourDistances:
    """Exact nearest-neighbour distances rho_i^(j) and their order statistics for one point set (n >= 2)."""

    def __init__(self, points: F64, *, base_neighbours: int = 4, brute_force_max: int = BRUTE_FORCE_MAX_POINTS) -> None:
        self._P = points
        self._columns = [np.ascontiguousarray(points[:, k]) for k in range(points.shape[1])]
        self._n = n = int(points.shape[0])
        if n < 2:
            raise InternalError("NeighbourDistances needs at least two points")
        self._tree: Any = None
        self._order: Idx | None = None
        self._copies: NDArray[np.int64] | None = None
        self._ext_k = 0
        self._ext_pos: Idx = np.full(n, -1, dtype=np.intp)
        self._ext: F64 = np.empty((0, 0))
        if n <= brute_force_max:
            full = pair_distances(points[:, None, :], points[None, :, :])
            np.fill_diagonal(full, np.inf)
            full.sort(axis=1)
            self._base: F64 = full[:, : n - 1]
        else:
            self._base = self._query_exact(np.arange(n, dtype=np.intp), min(n - 1, max(1, base_neighbours)))
        self._base_k = int(self._base.shape[1])

    def order_statistic(self, m: int) -> float:
        """W_m: the (m+1)-th smallest over points i of rho_i^(m+1) (``inf`` when m >= n - 1)."""
        j = m + 1
        n = self._n
        if j > n - 1:
            return math.inf
        if j <= self._base_k:
            return float(np.partition(self._base[:, j - 1], m)[m])
        lower = self._base[:, -1]  # rho^(base_k) <= rho^(j) for every point
        order = self._lower_bound_order()
        if lower[order[m]] == 0.0 and self._enough_exact_copies(j):
            return 0.0
        size = max(64, 16 * j)
        while size < n:
            # Points outside the candidates have rho^(j) >= lower >= tau; if the candidates' order
            # statistic w is <= tau it is the order statistic of all points.
            tau = float(lower[order[size]])
            w = float(np.partition(self._exact_column(order[:size], j), m)[m])
            if w <= tau:
                return w
            size *= 4
        return float(np.partition(self._exact_column(np.arange(n, dtype=np.intp), j), m)[m])

    def _lower_bound_order(self) -> Idx:
        if self._order is None:
            order: Idx = np.argsort(self._base[:, -1], kind="stable").astype(np.intp)
            self._order = order
        return self._order

    def _enough_exact_copies(self, j: int) -> bool:
        """True when at least j points each have >= j bit-identical copies (so W_{j-1} = 0 exactly)."""
        if self._copies is None:
            _, inverse, counts = np.unique(self._P, axis=0, return_inverse=True, return_counts=True)
            self._copies = np.sort(counts[inverse.reshape(-1)] - 1)[::-1]
        return bool(self._copies[j - 1] >= j)

    def _exact_column(self, idx: Idx, j: int) -> F64:
        """rho^(j) for the points ``idx``, cached in blocks whose neighbour count doubles."""
        n = self._n
        if self._ext_k < j:
            self._ext_k = min(n - 1, max(j, 2 * self._ext_k, 2 * self._base_k))
            self._ext_pos = np.full(n, -1, dtype=np.intp)
            self._ext = np.empty((0, self._ext_k))
        missing = idx[self._ext_pos[idx] < 0]
        if missing.size:
            rows = self._query_exact(missing, self._ext_k)
            self._ext_pos[missing] = np.arange(self._ext.shape[0], self._ext.shape[0] + missing.size)
            self._ext = np.vstack([self._ext, rows])
        column: F64 = self._ext[self._ext_pos[idx], j - 1]
        return column

    def _kdtree(self) -> Any:
        if self._tree is None:
            from scipy.spatial import cKDTree  # imported when first used

            self._tree = cKDTree(self._P)
        return self._tree

    def _query_exact(self, idx: Idx, k: int) -> F64:
        """Sorted exact distances from each point in ``idx`` to its k nearest other points (k <= n - 1)."""
        n = self._n
        out = np.empty((idx.size, k))
        pending = np.arange(idx.size, dtype=np.intp)
        kq = min(n, k + 2)  # one neighbour beyond the k needed (plus the point itself) certifies the k-th
        while pending.size:
            accepted = np.zeros(pending.size, dtype=bool)
            rows = max(1, _CHUNK // kq)
            for start in range(0, pending.size, rows):
                sel = pending[start : start + rows]
                exact, ok = self._query_chunk(idx[sel], k, kq)
                out[sel[ok]] = exact[ok]
                accepted[start : start + rows] = ok
            pending = pending[~accepted]
            if pending.size and kq == n:
                raise InternalError("a full neighbour query was not accepted")
            kq = min(n, 2 * kq)
        return out

    def _query_chunk(self, q: Idx, k: int, kq: int) -> tuple[F64, NDArray[np.bool_]]:
        tree_dist, nbr = self._kdtree().query(self._P[q], k=kq)
        own = nbr == q[:, None]
        # Drop the query point itself; if duplicates pushed it out of the answer, drop the farthest one.
        drop = own | (~own.any(axis=1, keepdims=True) & (np.arange(kq) == kq - 1))
        others = nbr[~drop].reshape(q.size, kq - 1)
        dist = indexed_distances(self._columns, others, q[:, None])
        dist.sort(axis=1)
        exact = dist[:, :k]
        if kq == self._n:
            return exact, np.ones(q.size, dtype=bool)
        # Every point the tree did not return is at tree distance >= its k-th distance, hence at
        # our distance >= floor; the j-th candidate value is exact when it does not exceed floor.
        floor = np.maximum(tree_dist[:, -1] * (1.0 - 2.0 * _REL_SLACK) - 2.0 * _ABS_SLACK, 0.0)
        return exact, exact[:, k - 1] <= floor


def _bits_to_float(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<q", bits))[0])


def _float_to_bits(value: float) -> int:
    return int(struct.unpack("<q", struct.pack("<d", value))[0])


class DeletionValues1D:
    """M_m for 1-D points: the largest computed min-gap fl(x_b - x_a) over subsets of n - m points."""

    def __init__(self, values: F64) -> None:
        self._x = np.sort(values)
        gaps = self._x[1:] - self._x[:-1]
        self._gap_order = np.argsort(gaps, kind="stable").astype(np.intp)
        self._sorted_gaps = gaps[self._gap_order]
        self._small_gaps: list[float] = []  # Python copies of the smallest gaps (fast scalar bisection)
        self._small_order: list[int] = []
        self._known: dict[int, float] = {}

    def value(self, m: int) -> float:
        """M_m (``inf`` when fewer than two points would remain)."""
        n = int(self._x.size)
        if n - m < 2:
            return math.inf
        if m in self._known:
            return self._known[m]
        if len(self._small_gaps) < min(n - 1, 2 * m + 1):
            self._small_gaps = self._sorted_gaps[: 4 * m + 2].tolist()
            self._small_order = self._gap_order[: 4 * m + 2].tolist()
        # M is non-decreasing in m: start from the largest known value for a smaller m.
        lo = max((_float_to_bits(v) for mm, v in self._known.items() if mm < m), default=0)
        hi = _INF_BITS  # N(inf) = 1 < n - m: computed gaps of finite points are finite
        if lo == 0 and self._deletions_needed(_bits_to_float(1), m) > m:
            hi = 1  # M_m = 0 (e.g. a pile of coincident points): one greedy pass instead of 63
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._deletions_needed(_bits_to_float(mid), m) <= m:
                lo = mid
            else:
                hi = mid
        self._known[m] = _bits_to_float(lo)
        return self._known[m]

    def _deletions_needed(self, t: float, allowed: int) -> int:
        """Deletions made by the greedy selection at threshold t (exact up to ``allowed`` + 1)."""
        limit = min(len(self._small_gaps), 2 * allowed + 1)
        small_count = bisect.bisect_left(self._small_gaps, t, 0, limit)
        if small_count > 2 * allowed:
            return allowed + 1  # every gap < t needs one of its endpoints deleted: >= count/2 deletions
        small = sorted(self._small_order[:small_count])
        x = self._x
        deletions = 0
        i = 0
        while i < len(small):
            start = small[i]
            while i + 1 < len(small) and small[i + 1] == small[i] + 1:
                i += 1
            # Greedy on the run of points start..small[i]+1; the point after the run is kept anyway,
            # because a gap >= t only grows when its left end moves left (rounding is monotone).
            last = x[start]
            for b in range(start + 1, small[i] + 2):
                if x[b] - last >= t:
                    last = x[b]
                else:
                    deletions += 1
            if deletions > allowed:
                return deletions
            i += 1
        return deletions


def largest_empty_radius_2d(points: F64, low: float, high: float) -> float:
    """The sup over p in [low, high]^2 of min_j d(p, points_j), by evaluation at all candidate maximisers.

    The maximiser of the lower envelope of distance functions over a box is a box corner, a point of
    a box edge equidistant from two sites, or a point equidistant from three sites (a Voronoi
    vertex), so the maximum over that candidate set is exact up to rounding of the candidates.
    O(n^3) candidates times n sites: for small n only (analysis and tests).
    """
    sites = np.unique(points, axis=0)
    cands = [np.array([[low, low], [low, high], [high, low], [high, high]])]
    if sites.shape[0] >= 2:
        a_i, b_i = np.array(list(itertools.combinations(range(sites.shape[0]), 2))).T
        a, b = sites[a_i], sites[b_i]
        normal = b - a
        rhs = 0.5 * ((b * b).sum(axis=1) - (a * a).sum(axis=1))
        for axis in (0, 1):
            other = 1 - axis
            ok = normal[:, other] != 0.0
            for c in (low, high):
                pts = np.empty((int(ok.sum()), 2))
                pts[:, axis] = c
                pts[:, other] = (rhs[ok] - normal[ok, axis] * c) / normal[ok, other]
                cands.append(pts)
    if sites.shape[0] >= 3:
        tri = np.array(list(itertools.combinations(range(sites.shape[0]), 3)))
        a, b, c = sites[tri[:, 0]], sites[tri[:, 1]], sites[tri[:, 2]]
        bp, cp = b - a, c - a
        det = 2.0 * (bp[:, 0] * cp[:, 1] - bp[:, 1] * cp[:, 0])
        ok = det != 0.0
        b2, c2 = (bp * bp).sum(axis=1)[ok], (cp * cp).sum(axis=1)[ok]
        ux = (cp[ok, 1] * b2 - bp[ok, 1] * c2) / det[ok]
        uy = (bp[ok, 0] * c2 - cp[ok, 0] * b2) / det[ok]
        cands.append(a[ok] + np.stack([ux, uy], axis=1))
    allc = np.concatenate(cands)
    span = high - low
    inside = np.all((allc >= low - 1e-9 * span) & (allc <= high + 1e-9 * span), axis=1)
    allc = np.clip(allc[inside], low, high)
    best = 0.0
    for start in range(0, allc.shape[0], 1 << 14):
        block = allc[start : start + (1 << 14)]
        best = max(best, float(pair_distances(block[:, None, :], sites[None, :, :]).min(axis=1).max()))
    return best
