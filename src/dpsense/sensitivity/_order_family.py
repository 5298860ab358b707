"""The monotone sensitivity family of an order statistic (replace adjacency, public n): U_k = A^(k).

Shared by ``order_statistics`` (the early-stopping smooth bound, PTR, person-level) and ``_order_dc``
(the divide-and-conquer cross-check); the family's theory is in docs/math/order-statistics.md.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpsense.core.errors import UsageError
from dpsense.sensitivity._numeric import (
    BoundsLike,
    bounds_interval,
    check_count,
    clipped_sorted,
    max_diff_up,
    sub_up,
)

F64 = NDArray[np.float64]


def median_rank(n: int) -> int:
    """The rank dpsense calls the median of n values: (n + 1) // 2 (lower median for even n)."""
    return (check_count(n, name="n", minimum=1) + 1) // 2


def _check_rank(rank: object, n: int) -> int:
    r = check_count(rank, name="rank", minimum=1)
    if r > n:
        raise UsageError("rank must lie in 1..n", (rank, n), "choose a rank between 1 and the public n")
    return r


class _PaddedRanks:
    """U_k = A^(k) read from a padded stretch of order statistics (ranks first .. first + len - 1).

    Ranks <= 0 are L and ranks >= n + 1 are U. When the stretch starts at rank <= 0 (ends at >= n + 1)
    it is padded on that side; otherwise a rank outside it is *unknown*: ``upper`` then returns
    ``math.inf``, which ``smooth_upper_bound`` caps at G -- the truncated family of docs/math/smooth-sensitivity.md
    §3.2,
    still monotone -- and records that it happened in ``truncated``.
    """

    def __init__(self, ext: F64, first: int, n: int, rank: int, cap: float) -> None:
        self._ext = ext
        self._first = first
        self._n = n
        self._rank = rank
        self._cap = cap
        self.truncated = False

    @property
    def cap(self) -> float:
        """G = U - L rounded up: the global sensitivity of any order statistic (replace, n public)."""
        return self._cap

    @property
    def n(self) -> int:
        """The public number of values."""
        return self._n

    @property
    def rank(self) -> int:
        """The public rank r."""
        return self._rank

    @property
    def value(self) -> float:
        """The order statistic x_(r) itself (clipped)."""
        return float(self._ext[self._rank - self._first])

    def _stretch(self, lo_rank: int, hi_rank: int) -> F64 | None:
        """x_(lo_rank .. hi_rank) with padding, or None when a needed rank is unknown."""
        size = self._ext.size
        p0, p1 = lo_rank - self._first, hi_rank - self._first
        if p0 >= 0 and p1 < size:
            return self._ext[p0 : p1 + 1]
        if (p0 < 0 and self._first > 0) or (p1 >= size and self._first + size - 1 < self._n + 1):
            return None
        return self._ext[np.clip(np.arange(p0, p1 + 1), 0, size - 1)]

    def upper(self, k: int) -> float:
        """U_k = A^(k) = max_{0<=j<=k+1} (x_(r+j) - x_(r+j-k-1)), rounded up; O(k) time."""
        if k < 0:
            raise UsageError("k must be >= 0", k, "ask for U_k with k = 0, 1, 2, ...")
        if k >= self._n:
            return self._cap  # some j has r+j-k-1 <= 0 and r+j >= n+1: the full width U - L
        window = self._stretch(self._rank - k - 1, self._rank + k + 1)
        if window is None:
            self.truncated = True
            return math.inf
        return max_diff_up(window[k + 1 :], window[: k + 2])


class OrderStatisticFamily(_PaddedRanks):
    """The exact monotone family U_k = A^(k) for the order statistic of rank r (replace, n public).

    A^(k)(x) = max_{d(x,y)<=k} LS(y) = max_{0<=j<=k+1} (x_(r+j) - x_(r+j-k-1)) with pads L, U
    (NRS07 section 3; docs/math/order-statistics.md, verified by brute force), capped at G = U - L (the
    global sensitivity; A^(k) = G for k >= n). ``upper(k)`` costs O(k). Use it with
    ``smooth_upper_bound`` (S*, beta-smooth), ``distance_to_instability`` (PTR) or ``PersonLevel``
    (a unit owning C records: exactly C per unit under replace adjacency).

    Args:
        sorted_values: the n values sorted ascending; they are clipped to the bounds here.
        rank: the public rank r in 1..n (``median_rank(n)`` for the median).
        bounds: public clipping bounds [L, U].

    Raises:
        InvalidData: unsorted or non-finite input (a caller bug; no value is named).
        InvalidBounds: bad bounds.
        UsageError: no values (n must be >= 1) or a rank outside 1..n.

    """

    def __init__(self, sorted_values: ArrayLike, rank: int, bounds: BoundsLike) -> None:
        lo, hi = bounds_interval(bounds)
        x = clipped_sorted(sorted_values, lo, hi)
        n = check_count(x.size, name="n (the number of values)", minimum=1)
        ext = np.concatenate(([lo], x, [hi]))
        super().__init__(ext, 0, n, _check_rank(rank, n), sub_up(hi, lo))
