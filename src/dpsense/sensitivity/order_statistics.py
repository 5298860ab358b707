"""Local and smooth sensitivity of order statistics (median, quantiles) and PTR distances.

Provides the exact LS (analysis only, never a noise scale on its own), the family U_k = A^(k) for
the order statistic of public rank r on values clipped to public [L, U] (median rank (n + 1) // 2,
never the average of the two middle values), S* by the early-stopping loop, by an O(n) partial sort
and by NRS07's O(n log n) divide and conquer, and the exact PTR distance min{k : A^(k) > b}. Every
formula is for *replace* adjacency with n public (Nissim-Raskhodnikova-Smith, STOC 2007, section 3);
under add/remove a declared ``public_n`` is required and ``resize_to_public_n`` makes one addition
or removal at most one replacement. A^(k) is exact and monotone, so S* is a beta-smooth upper bound
(docs/math/order-statistics.md §4.1, §4.2, §4.4; docs/math/smooth-sensitivity.md §3.2); differences
are rounded upward. Units owning C records: ``PersonLevel(..., direct=True)``. Nothing computed here
may leave the process; running time depends on the data unless ``constant_work`` is given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import UsageError
from dpsense.sensitivity._numeric import (
    BoundsLike,
    FloatInterval,
    bounds_interval,
    check_beta,
    check_count,
    finite_values,
    sub_up,
)
from dpsense.sensitivity._order_dc import (
    order_statistic_smooth_sensitivity_dc as order_statistic_smooth_sensitivity_dc,
)
from dpsense.sensitivity._order_family import OrderStatisticFamily as OrderStatisticFamily
from dpsense.sensitivity._order_family import _check_rank, _PaddedRanks
from dpsense.sensitivity._order_family import median_rank as median_rank
from dpsense.sensitivity.public_n import _resolve_size
from dpsense.sensitivity.public_n import resize_to_public_n as resize_to_public_n
from dpsense.sensitivity.smooth import MAX_SMOOTH_TERMS, PersonLevel, distance_to_instability, smooth_upper_bound

F64 = NDArray[np.float64]

#: The first window covers ln(2^64) / beta ranks on each side (G / S up to 1.8e19 needs no growth).
_WINDOW_LOG_RATIO = 64 * math.log(2)
_WINDOW_GROWTH = 4


# --------------------------------------------------------------------------------------------------
# Local sensitivity and the monotone family.


def order_statistic_local_sensitivity(sorted_values: ArrayLike, rank: int, bounds: BoundsLike) -> float:
    """Exact LS of the rank-r order statistic: max(x_(r) - x_(r-1), x_(r+1) - x_(r)), pads L, U.

    For analysis only: calibrating noise to LS alone is not private (docs/math/local-sensitivity.md; the
    noise magnitude itself leaks). Replace adjacency, n public; rounded upward.
    """
    return OrderStatisticFamily(sorted_values, rank, bounds).upper(0)


def order_statistic_smooth_sensitivity(
    sorted_values: ArrayLike, rank: int, bounds: BoundsLike, beta: float, *, constant_work: int | None = None
) -> float:
    """S* = max_k e^{-k beta} A^(k): the smooth sensitivity by the early-stopping loop (replace, n public).

    Runs ``smooth_upper_bound`` on ``OrderStatisticFamily`` (tail term included); O(n + K^2) after
    sorting, K <= ceil(ln(G / S*) / beta). Beta-smooth upper bound on LS (docs/math/index.md sections 3.2 and 4).
    """
    family = OrderStatisticFamily(sorted_values, rank, bounds)
    return smooth_upper_bound(family, beta=beta, constant_work=constant_work)


def order_statistic_distance(
    sorted_values: ArrayLike, rank: int, bounds: BoundsLike, proposed_bound: float, cap: int
) -> int:
    """PTR distance gamma(x) = min{k : A^(k)(x) > b}, capped at ``cap`` (docs/math/ptr.md).

    Since A^(k) is exact, this is the true distance to instability min{d(x,y) : LS(y) > b} (capped):
    1-Lipschitz, >= 0, and gamma >= 1 implies LS(x) <= b. Replace adjacency, n public. Work O(cap^2).
    """
    b = float(proposed_bound)
    if not (b > 0 and math.isfinite(b)):
        raise UsageError("the proposed bound must be finite and > 0", proposed_bound, "propose a public b > 0")
    family = OrderStatisticFamily(sorted_values, rank, bounds)
    return distance_to_instability(family, bound=b, cap=check_count(cap, name="cap", minimum=1))


# --------------------------------------------------------------------------------------------------
# Fast path: partition a window around the rank instead of sorting.


@runtime_checkable
class RankedValues(Protocol):
    """Clipped values known by rank only: ``size`` of them, and the sorted ones at given ranks.

    Lets the smooth order statistic read just the window of ranks it needs from a store that can
    select order statistics without handing over the column (an engine's distributed selection).
    """

    @property
    def size(self) -> int:
        """The number of values (private: it is used inside the mechanism, never released)."""
        ...

    def ranks(self, first: int, last: int) -> F64:
        """The sorted clipped values of ranks ``first..last`` (1-based, inclusive, within 1..size)."""
        ...


class _PartialSort:
    """An array whose positions [lo, hi) hold their sorted values, grown by single-kth partitions."""

    def __init__(self, data: F64) -> None:
        self.data = data
        self.lo = self.hi = 0

    def cover(self, lo: int, hi: int) -> None:
        """Make positions [lo, hi) (clipped to the array) hold sorted values."""
        lo, hi = max(lo, 0), min(hi, self.data.size)
        if lo >= hi or (self.lo <= lo and hi <= self.hi):
            return
        a = self.data
        if self.lo == self.hi:  # nothing known yet
            a.partition(lo)
            if hi - lo > 1:
                a[lo:].partition(hi - lo - 1)
            a[lo:hi].sort()
            self.lo, self.hi = lo, hi
            return
        if lo < self.lo:  # positions < self.lo hold the self.lo smallest values, unsorted
            a[: self.lo].partition(lo)
            a[lo : self.lo].sort()
            self.lo = lo
        if hi > self.hi:  # positions >= self.hi hold the largest values, unsorted
            a[self.hi :].partition(hi - self.hi - 1)
            a[self.hi : hi].sort()
            self.hi = hi

    @property
    def size(self) -> int:
        """The number of values."""
        return int(self.data.size)

    def ranks(self, first: int, last: int) -> F64:
        """The sorted values of ranks ``first..last`` (1-based, inclusive)."""
        self.cover(first - 1, last)
        return self.data[first - 1 : last]


@dataclass(frozen=True)
class SmoothOrderStatistic:
    """An order statistic with its smooth sensitivity; both are private (never log or return them raw).

    Attributes:
        value: x_(rank) of the clipped (and, under add/remove, resized) data.
        smooth_sensitivity: a beta-smooth upper bound on LS (S* itself unless ``constant_work``).
        rank: the public rank used.
        n: the public number of records the statistic is defined on.
        beta: the smoothing parameter used.
        adjacency: the adjacency the bound holds for.
        max_records_per_unit: C, records one privacy unit may own.

    """

    value: float
    smooth_sensitivity: float
    rank: int
    n: int
    beta: float
    adjacency: Adjacency
    max_records_per_unit: int


def _window_ranks(part: RankedValues, t0: int, t1: int, n: int, shift: int, lo: float, hi: float) -> F64:
    """Order statistics of the resized data for ranks t0..t1 (pads included), from the data ranks."""
    m = part.size
    ranks = np.arange(t0, t1 + 1)
    data_ranks = ranks + shift
    inside = (ranks >= 1) & (ranks <= n) & (data_ranks >= 1) & (data_ranks <= m)
    ext = np.where((ranks >= n + 1) | (data_ranks >= m + 1), hi, lo)
    if inside.any():
        d0, d1 = int(data_ranks[inside][0]), int(data_ranks[inside][-1])
        ext[inside] = part.ranks(d0, d1)
    return ext


def smooth_order_statistic(
    values: ArrayLike | RankedValues,
    *,
    bounds: BoundsLike,
    beta: float,
    rank: int | None = None,
    adjacency: Adjacency | str = Adjacency.REPLACE,
    public_n: int | None = None,
    max_records_per_unit: int = 1,
    constant_work: int | None = None,
) -> SmoothOrderStatistic:
    """An order statistic and its smooth sensitivity S*, in O(n) time: no full sort.

    Clips to the bounds, then pulls the order statistics of ranks r - W - 1 .. r + W + 1 out with
    single-kth ``np.partition`` calls and runs ``smooth_upper_bound`` on the exact family restricted
    to them (unknown ranks count as G: the truncated family, always valid). If the early stop did not
    trigger inside the window, W grows fourfold and the loop reruns, so the result equals the loop on
    fully sorted data. With ``constant_work=K`` exactly K terms plus the tail are evaluated.

    Args:
        values: raw values (any order), clipped to ``bounds`` here; or ``RankedValues`` already
            clipped to ``bounds`` (only the window of ranks the bound needs is read from them).
        bounds: public clipping bounds [L, U].
        beta: the smoothing parameter, fixed by (epsilon, delta) and the noise family
        (docs/math/smooth-sensitivity.md §3.3).
        rank: public rank in 1..n; default ``median_rank(n)`` (lower median for even n).
        adjacency: REPLACE (n = len(values) is public) or ADD_REMOVE (``public_n`` required; the data
            are resized to it with ``resize_to_public_n`` semantics).
        public_n: the declared number of records under add/remove adjacency.
        max_records_per_unit: C; the bound uses ``PersonLevel`` (under replace every unit must own
            exactly C records, under add/remove up to C).
        constant_work: evaluate exactly this many terms (public work) instead of stopping early.

    Returns:
        The statistic, its beta-smooth upper bound on LS for the declared adjacency and unit, and the
        public parameters used.

    Raises:
        InvalidData, InvalidBounds, InvalidPrivacyParameter, UsageError: bad input or declarations.

    """
    adj = Adjacency.parse(adjacency)
    b = check_beta(beta)
    c = check_count(max_records_per_unit, name="max_records_per_unit", minimum=1)
    lo, hi = bounds_interval(bounds)
    # an array is clipped into a fresh copy (partitioned in place below); ranked values come clipped
    part = values if isinstance(values, RankedValues) else _PartialSort(np.clip(finite_values(values), lo, hi))
    n, shift = _resolve_size(part.size, adj, public_n)
    r = median_rank(n) if rank is None else _check_rank(rank, n)
    cap = sub_up(hi, lo)
    if constant_work is None:
        width = min(math.ceil(_WINDOW_LOG_RATIO / b), MAX_SMOOTH_TERMS + 1)  # the loop's public bound
    else:
        width = check_count(constant_work, name="constant_work", minimum=1)
    width *= c
    while True:
        width = min(width, n)
        t0, t1 = r - width - 1, r + width + 1
        family = _PaddedRanks(_window_ranks(part, t0, t1, n, shift, lo, hi), t0, n, r, cap)
        # direct=True: C changed records keep the rank-r value within [x_(r-C), x_(r+C)],
        # so U_{C-1} = A^(C-1) >= LS_unit (no factor C needed; see dpsense.sensitivity.smooth).
        wrapped = family if c == 1 else PersonLevel(family, c, direct=True)
        bound = smooth_upper_bound(wrapped, beta=b, constant_work=constant_work)
        if not family.truncated or width == n:
            return SmoothOrderStatistic(family.value, bound, r, n, b, adj, c)
        width *= _WINDOW_GROWTH


def median_smooth_sensitivity(
    values: ArrayLike,
    *,
    bounds: BoundsLike,
    beta: float,
    rank: int | None = None,
    adjacency: Adjacency | str = Adjacency.REPLACE,
    public_n: int | None = None,
    max_records_per_unit: int = 1,
    constant_work: int | None = None,
) -> float:
    """The smooth sensitivity S* of the median (or of ``rank``) of raw values; see ``smooth_order_statistic``.

    O(n): clipping plus a few partitions, typically below the cost of one ``np.sort``. The median is
    rank (n + 1) // 2 (lower median for even n; never the average of the two middle values).
    """
    return smooth_order_statistic(
        values,
        bounds=bounds,
        beta=beta,
        rank=rank,
        adjacency=adjacency,
        public_n=public_n,
        max_records_per_unit=max_records_per_unit,
        constant_work=constant_work,
    ).smooth_sensitivity


__all__ = [
    "BoundsLike",
    "FloatInterval",
    "OrderStatisticFamily",
    "RankedValues",
    "SmoothOrderStatistic",
    "median_rank",
    "median_smooth_sensitivity",
    "order_statistic_distance",
    "order_statistic_local_sensitivity",
    "order_statistic_smooth_sensitivity",
    "order_statistic_smooth_sensitivity_dc",
    "resize_to_public_n",
    "smooth_order_statistic",
]
