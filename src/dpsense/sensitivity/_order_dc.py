"""The NRS07 divide-and-conquer smooth sensitivity of an order statistic (O(n log n), a cross-check).

The early-stopping loop of ``order_statistics`` is the reference; this algorithm computes the same
S* = max over i <= r <= j of (x_(j) - x_(i)) e^{-beta (j - i - 1)} (docs/math/order-statistics.md, NRS07
"Algorithm 1"), comparing candidates in log space so that e^{-beta k} underflowing far from r cannot
prune the true maximiser.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpsense.sensitivity._numeric import (
    BoundsLike,
    check_beta,
    diff_up,
)
from dpsense.sensitivity._order_family import OrderStatisticFamily

F64 = NDArray[np.float64]

#: D&C sub-problems with at most this many (i, j) pairs are evaluated as one vectorised block.
_DC_BLOCK = 1 << 12


def _exp_weights(count: int, beta: float) -> F64:
    # math.exp, exactly as smooth_upper_bound computes e^{-k beta}, so both paths multiply alike.
    return np.array([math.exp(-k * beta) for k in range(count)], dtype=np.float64)


def order_statistic_smooth_sensitivity_dc(
    sorted_values: ArrayLike, rank: int, bounds: BoundsLike, beta: float
) -> float:
    """S* by NRS07's divide and conquer, O(n log n): max over i <= r <= j, i < j of (x_(j) - x_(i)) e^{-beta(j-i-1)}.

    For i in [0, r] let j*(i) be the largest maximiser over j in [max(r, i + 1), n + 1]; j* is
    non-decreasing in i (for j' > j the advantage (x_j' - c) w_j' - (x_j - c) w_j grows with c because
    w_j' <= w_j), so j*(mid) splits the j-range of both halves. Small sub-problems are evaluated as
    one vectorised block. Replace adjacency, n public; beta-smooth upper bound on LS.

    The pruning relies on an inequality between real numbers; with rounded products it can in rare
    ties keep a maximiser whose rounded value is a few ulps below the loop's. Tests hold the two
    within 1e-12 relative; ``order_statistic_smooth_sensitivity`` is the reference.
    """
    b = check_beta(beta)
    family = OrderStatisticFamily(sorted_values, rank, bounds)
    ext, n, r = family._ext, family.n, family.rank
    weights = _exp_weights(n + 1, b)
    best = 0.0
    stack = [(0, r, r, n + 1)]
    while stack:
        ilo, ihi, jlo, jhi = stack.pop()
        if ilo > ihi:
            continue
        if (ihi - ilo + 1) * (jhi - jlo + 1) <= _DC_BLOCK:
            i = np.arange(ilo, ihi + 1)[:, None]
            j = np.arange(jlo, jhi + 1)[None, :]
            lag = np.maximum(j - i - 1, 0)
            vals = diff_up(ext[j], ext[i]) * weights[lag]
            vals[np.broadcast_to(j <= i, vals.shape)] = 0.0
            best = max(best, float(vals.max()))
            continue
        mid = (ilo + ihi) // 2
        start = max(jlo, mid + 1)
        j = np.arange(start, jhi + 1)
        diffs = diff_up(ext[j], np.full(j.size, ext[mid]))
        best = max(best, float((diffs * weights[j - mid - 1]).max()))
        # Choose j* on log values: e^{-k beta} underflows to 0 far from r, and ties among zeros
        # would send j* to the end of the range and prune the true maximisers of larger i.
        with np.errstate(divide="ignore"):
            keys = np.log(diffs) - b * (j - mid - 1)
        j_star = start + (keys.size - 1 - int(np.argmax(keys[::-1])))  # ties: the largest j
        stack.append((ilo, mid - 1, jlo, j_star))
        stack.append((mid + 1, ihi, j_star, jhi))
    return best
