"""Public n under add/remove adjacency: resize the data to a declared public size.

dpsense never reads n from the data. Under add/remove adjacency the caller declares ``public_n``; the
values are padded (alternately with L and U) or trimmed (alternately the smallest and largest) to
exactly that size, so one added or removed record becomes at most one replacement and the
replace-adjacency families (order statistics, trimmed mean) apply unchanged (proved in the docstring
of ``resize_to_public_n``, checked by brute force in the tests).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import UsageError
from dpsense.sensitivity._numeric import (
    BoundsLike,
    bounds_interval,
    check_count,
    finite_values,
)

F64 = NDArray[np.float64]

#: D&C sub-problems with at most this many (i, j) pairs are evaluated as one vectorised block.
_DC_BLOCK = 1 << 12
#: The first window covers ln(2^64) / beta ranks on each side (G / S up to 1.8e19 needs no growth).
_WINDOW_LOG_RATIO = 64 * math.log(2)
_WINDOW_GROWTH = 4


# --------------------------------------------------------------------------------------------------
# Add/remove adjacency through a declared public n.


def _resize_plan(m: int, public_n: int) -> tuple[int, int]:
    """(low values dropped, low pads added) when m records are resized to ``public_n``."""
    if m >= public_n:
        return (m - public_n + 1) // 2, 0
    return 0, (public_n - m + 1) // 2


def resize_to_public_n(values: ArrayLike, *, public_n: int, bounds: BoundsLike) -> F64:
    """The sorted, clipped values resized to exactly ``public_n`` records, never reading n from the data.

    With m records: if m < n add ceil((n-m)/2) copies of L and floor((n-m)/2) copies of U; if m > n
    drop the ceil((m-n)/2) smallest and floor((m-n)/2) largest values.

    **Stability (proof).** Adding one record d (m -> m + 1) changes the result by at most one
    replacement: for m < n one pad (a U when n-m is even, an L when odd) is replaced by d; for m >= n
    one more value is trimmed on one side, say the smallest, and with D' = D + {d} sorted the kept
    block D'(a+2 .. a+1+n) differs from D(a+1 .. a+n) by dropping D(a+1) and gaining d or D(a+n+1)
    (or not at all when d falls below the block); the largest side is symmetric. So add/remove
    neighbours map to replace neighbours (or to the same multiset) on X^n, and every replace-adjacency
    smooth bound or PTR distance of f(resize(x)) holds under add/remove adjacency, for the statistic
    f(resize(x)). A unit adding or removing up to C records moves the result by up to C replacements.
    """
    lo, hi = bounds_interval(bounds)
    n = check_count(public_n, name="public_n", minimum=1)
    x = np.sort(np.clip(finite_values(values), lo, hi))
    dropped, pads = _resize_plan(x.size, n)
    if dropped or x.size >= n:
        return x[dropped : dropped + n]
    return np.concatenate((np.full(pads, lo), x, np.full(n - x.size - pads, hi)))


def _resolve_size(count: int, adjacency: Adjacency, public_n: int | None) -> tuple[int, int]:
    """(public n, shift from resized ranks to data ranks)."""
    if adjacency is Adjacency.ADD_REMOVE:
        if public_n is None:
            raise UsageError(
                "add/remove adjacency needs a declared public_n (dpsense never reads the count from the data)",
                None,
                "declare public_n, e.g. from a previous private count or a public register",
            )
        n = check_count(public_n, name="public_n", minimum=1)
        dropped, pads = _resize_plan(count, n)
        return n, dropped - pads
    n = check_count(count, name="n (public under replace adjacency)", minimum=1)
    if public_n is not None and public_n != n:
        raise UsageError(
            "under replace adjacency n is the (public) number of values", (public_n, n), "omit public_n or fix it"
        )
    return n, 0
