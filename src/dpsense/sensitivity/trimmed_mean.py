"""Local and smooth sensitivity of the mean and of the trimmed mean on clipped data.

Provides the exact LS of the m-trimmed mean (1/(n - 2m)) sum_{i=m+1}^{n-m} x_(i) and of the plain
mean (analysis only, never a noise scale on its own), and ``TrimmedMeanFamily``, U_k = A^(k), exact
and monotone, so ``smooth_upper_bound`` gives S*, a beta-smooth upper bound on LS (Bun-Steinke,
NeurIPS 2019, section 4; docs/math/order-statistics.md §4.3, docs/math/local-sensitivity.md §2.3).
Adjacency: *replace* with n public; under add/remove a declared public n is required and the data
are resized to it (docs/math/order-statistics.md §4.4). Differences and the division are rounded
upward; the statistic itself is ``math.fsum`` divided by n - 2m, a rounding a release must account
for (docs/math/global-sensitivity.md §1.6).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import InvalidData, UsageError
from dpsense.sensitivity._numeric import (
    F64,
    BoundsLike,
    bounds_interval,
    check_beta,
    check_count,
    clipped_sorted,
    div_up,
    finite_values,
    max_diff_up,
    sub_up,
)
from dpsense.sensitivity.order_statistics import resize_to_public_n
from dpsense.sensitivity.smooth import PersonLevel, smooth_upper_bound


def _check_trim(trim: object, n: int) -> int:
    m = check_count(trim, name="trim", minimum=0)
    if n - 2 * m < 1:
        raise UsageError(
            "the trimmed mean needs n - 2 * trim >= 1", (trim, n), "trim fewer values than half of the public n"
        )
    return m


class TrimmedMeanFamily:
    """The exact monotone family U_k = A^(k) of the m-trimmed mean (replace adjacency, n public).

    A^(k)(x) = max_{0<=l<=k+1} (x_(n-m+1+k-l) - x_(m+1-l)) / (n - 2m), pads L and U, capped at
    G = (U - L) / (n - 2m) (the global sensitivity; A^(k) = G for k >= 2m + 1). ``upper(k)`` is O(k).

    Args:
        sorted_values: the n values sorted ascending; clipped to the bounds here.
        trim: m, the number of values dropped at each end (public), with n - 2m >= 1.
        bounds: public clipping bounds [L, U].

    Raises:
        InvalidData: unsorted or non-finite input.
        InvalidBounds, UsageError: bad bounds or trim.

    """

    def __init__(self, sorted_values: ArrayLike, trim: int, bounds: BoundsLike) -> None:
        lo, hi = bounds_interval(bounds)
        x = clipped_sorted(sorted_values, lo, hi)
        self._n = check_count(x.size, name="n (the number of values)", minimum=1)
        self._trim = _check_trim(trim, self._n)
        # ranks -m .. n+m+1: every rank A^(k) reads for k <= 2m.
        pad = self._trim + 1
        self._ext: F64 = np.concatenate((np.full(pad, lo), x, np.full(pad, hi)))
        self._kept = self._n - 2 * self._trim
        self._cap = div_up(sub_up(hi, lo), self._kept)

    @property
    def cap(self) -> float:
        """G = (U - L) / (n - 2m), rounded up: the global sensitivity (replace adjacency, n public)."""
        return self._cap

    @property
    def n(self) -> int:
        """The public number of values."""
        return self._n

    @property
    def trim(self) -> int:
        """The public trim m."""
        return self._trim

    @property
    def value(self) -> float:
        """trim_m(x) of the clipped values (``math.fsum`` of the kept values over n - 2m)."""
        m = self._trim
        return math.fsum(self._ext[2 * m + 1 : self._n + 1].tolist()) / self._kept  # ranks m+1 .. n-m

    def upper(self, k: int) -> float:
        """U_k = A^(k), rounded up; O(k) time."""
        if k < 0:
            raise UsageError("k must be >= 0", k, "ask for U_k with k = 0, 1, 2, ...")
        m, n = self._trim, self._n
        if k >= 2 * m + 1:
            return self._cap
        # rank i sits at position i + m; pair l reads ranks n-m+1+k-l and m+1-l (same offset n-2m+k)
        lo_part = self._ext[2 * m - k : 2 * m + 2]  # ranks m-k .. m+1
        hi_part = self._ext[n : n + k + 2]  # ranks n-m .. n-m+1+k
        return div_up(max_diff_up(hi_part, lo_part), self._kept)


def trimmed_mean(sorted_values: ArrayLike, trim: int, bounds: BoundsLike) -> float:
    """trim_m of the clipped sorted values: the mean of ranks m+1 .. n-m (``math.fsum``, then / (n - 2m))."""
    return TrimmedMeanFamily(sorted_values, trim, bounds).value


def trimmed_mean_local_sensitivity(sorted_values: ArrayLike, trim: int, bounds: BoundsLike) -> float:
    """Exact LS = A^(0) = max(x_(n-m+1) - x_(m+1), x_(n-m) - x_(m)) / (n - 2m), rounded up.

    For analysis only: noise calibrated to LS alone is not private (docs/math/local-sensitivity.md).
    Replace adjacency, n public.
    """
    return TrimmedMeanFamily(sorted_values, trim, bounds).upper(0)


def mean_local_sensitivity(values: ArrayLike, *, bounds: BoundsLike, adjacency: Adjacency | str) -> float:
    """Exact local sensitivity of the mean of the clipped values, for analysis only.

    * REPLACE (n public): max_i max(x_i - L, U - x_i) / n = max(x_max - L, U - x_min) / n, rounded
      up. Replacing x_i by v moves the mean by (v - x_i) / n, extreme at v = L or v = U.
    * ADD_REMOVE (n = number of values, needs n >= 2 so that every neighbour has a mean):
      max( max(mu - L, U - mu) / (n + 1),  max_i |x_i - mu| / (n - 1) ): adding v moves the mean by
      (v - mu) / (n + 1), removing x_i by (mu - x_i) / (n - 1). Computed in double precision
      (relative error ~1e-15).

    It never calibrates noise alone (docs/math/index.md sections 2 and 2.3: under replace adjacency it is
    close to the global (U - L) / n anyway).

    Raises:
        InvalidData: no values (replace) or fewer than 2 (add/remove), or non-finite values.

    """
    adj = Adjacency.parse(adjacency)
    lo, hi = bounds_interval(bounds)
    x = np.clip(finite_values(values), lo, hi)
    n = x.size
    if n < (2 if adj is Adjacency.ADD_REMOVE else 1):
        raise InvalidData(
            "the mean's local sensitivity needs at least 1 value (2 under add/remove)",
            f"{n} values",
            "analyse a non-empty dataset",
        )
    x_min, x_max = float(x.min()), float(x.max())
    if adj is Adjacency.REPLACE:
        return div_up(max(sub_up(x_max, lo), sub_up(hi, x_min)), n)
    mu = math.fsum(x.tolist()) / n
    add = max(mu - lo, hi - mu) / (n + 1)
    remove = max(x_max - mu, mu - x_min) / (n - 1)
    return max(add, remove)


def trimmed_mean_smooth_sensitivity(
    values: ArrayLike,
    *,
    bounds: BoundsLike,
    trim: int,
    beta: float,
    adjacency: Adjacency | str = Adjacency.REPLACE,
    public_n: int | None = None,
    max_records_per_unit: int = 1,
    constant_work: int | None = None,
) -> float:
    """S* of the m-trimmed mean of raw values: ``smooth_upper_bound`` on ``TrimmedMeanFamily``.

    Args:
        values: raw values (any order); clipped and sorted here.
        bounds: public clipping bounds [L, U].
        trim: m, values dropped at each end (public).
        beta: the smoothing parameter fixed by (epsilon, delta) and the noise family (docs/math/smooth-sensitivity.md
        §3.3).
        adjacency: REPLACE (n = len(values) public) or ADD_REMOVE (``public_n`` required; data resized).
        public_n: the declared number of records under add/remove adjacency.
        max_records_per_unit: C; uses ``PersonLevel`` (exactly C per unit under replace, up to C under
            add/remove).
        constant_work: evaluate exactly this many terms plus the tail (public work).

    Returns:
        A beta-smooth upper bound on LS of trim_m (of the resized data under add/remove).

    """
    adj = Adjacency.parse(adjacency)
    c = check_count(max_records_per_unit, name="max_records_per_unit", minimum=1)
    if adj is Adjacency.ADD_REMOVE:
        if public_n is None:
            raise UsageError(
                "add/remove adjacency needs a declared public_n (dpsense never reads the count from the data)",
                None,
                "declare public_n",
            )
        data = resize_to_public_n(values, public_n=public_n, bounds=bounds)
    else:
        lo, hi = bounds_interval(bounds)
        data = np.sort(np.clip(finite_values(values), lo, hi))
        if public_n is not None and public_n != data.size:
            raise UsageError("under replace adjacency n is the number of values", public_n, "omit public_n")
    family = TrimmedMeanFamily(data, trim, bounds)
    wrapped = family if c == 1 else PersonLevel(family, c)
    return smooth_upper_bound(wrapped, beta=check_beta(beta), constant_work=constant_work)


__all__ = [
    "TrimmedMeanFamily",
    "mean_local_sensitivity",
    "trimmed_mean",
    "trimmed_mean_local_sensitivity",
    "trimmed_mean_smooth_sensitivity",
]
