"""The inverse-sensitivity mechanism for order statistics (Asi-Duchi, NeurIPS 2020), sampled exactly.

A baseline to compare with the smooth-sensitivity median (docs/math/order-statistics.md) and the
exponential-mechanism quantile (``dpsense.mechanisms.quantile``, docs/math/exponential-mechanism.md).

**Inverse sensitivity.** For a statistic f and a candidate output t, the path length
``len_f(x; t) = min{d(x, x') : f(x') = t}`` is the number of records that must change for f to
output t. The mechanism outputs t with probability proportional to ``exp(-epsilon len_f(x; t) / 2)``
(Asi-Duchi 2020, the "inverse sensitivity mechanism"; an instance of the exponential mechanism with
utility ``-len``, McSherry-Talwar 2007, Dwork-Roth Thm 3.10). ``len_f`` changes by at most 1 between
adjacent datasets (a shortest path from x' is at most one step longer than one from x), so the
utility has sensitivity 1 and the mechanism is epsilon-DP.

**Order statistic of rank r, exact path length.** Values are clipped to public [L, U], n is public and
the adjacency is replace-one-record. For a target set T = [lo, hi) of outputs, x'_(r) lies in T iff
``#{x' < lo} <= r - 1`` and ``#{x' < hi} >= r``. One replacement moves each count by at most 1, and
the violated condition (at most one is, since #{< lo} <= #{< hi}) is repaired one record at a time
by moving a record from below lo (or from hi and above) onto lo. Hence, exactly,

    len(T) = max(0, #{x < lo} - (r - 1), r - #{x < hi}).

For a single point y (T = {y}): ``len(y) = max(0, #{x < y} - r + 1, r - #{x <= y})``, i.e. the number
of sorted points strictly between x_(r) and y, counting x_(r) itself when it is not tied with y. The
unit tests check both forms against brute force on small integer domains.

**Candidates.** [L, U] is cut into K equal public cells (``resolution``); each value is mapped to its
cell as in ``dpsense.mechanisms.quantile``, so a cell c has ``len(c) = max(0, #{cells < c} - r + 1,
r - #{cells <= c})`` and the data cell of rank r has length 0. Between consecutive distinct data cells
the length is constant, so the mechanism samples one of at most 2n + 1 runs with weight
``run size * exp(-epsilon len / 2)`` (``dpsense.noise.categorical``, exact) and then a uniform cell in
the run (``dpsense.noise.exact``); the output is the cell's midpoint (post-processing).

**Guarantee.** epsilon-DP for one record under replace adjacency with n public (r is public); for a
fixed public rank r the path length is also 1-Lipschitz under add/remove of one record. A privacy
unit owning up to C records gives C epsilon (group privacy).

**Rank from a private n (add/remove).** ``dpsense.release`` calls this with r = max(1, ceil(q n)) where
n is the private number of records. It stays epsilon-DP: adding one record moves n by 1 and r by 0 or 1
(ceil(q (n + 1)) - ceil(q n) is 0 or 1 for 0 <= q <= 1), and moves #{x < y} and #{x <= y} by 0 or 1
each; both terms of ``len(y) = max(0, #{x < y} - r + 1, r - #{x <= y})`` then move by at most 1, and so
does their maximum with 0. Under replace, n and hence r are fixed, which is the case above.

**No records.** For n = 0 and r = 1 the formula gives ``len(y) = max(0, 0, 1) = 1`` for every y, the
path length under add/remove (one record must be added at y), so the output is a uniform public
cell (one run holding all K cells): the mechanism's definition with the same epsilon, since the path
length stays 1-Lipschitz for a fixed r when one record is added. ``rank`` may be 1 when n = 0.

**Comparison.** For order statistics this differs from the EM quantile (utility ``-|#below - q n|``)
only in how ties are scored: a value held by many records has length 0 here, while the EM quantile
scores every cell by the count strictly below it, so with heavy ties it spreads its output over the
neighbouring gaps. Unlike smooth sensitivity it is pure epsilon-DP with no noise-family tuning; its
error is in rank units, about (2/epsilon) ln(K/beta) ranks.

**Accuracy (public).** DR Thm 3.11 with min len = 0: with probability at least 1 - beta,
``len(c) <= (2/epsilon) ln(K/beta) =: l``, which means the released cell lies between the data cells of
ranks r - l and r + l (padded with the end cells). Reported in ``details``; ``accuracy`` is None.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpsense.core.checks import integral_in
from dpsense.core.errors import UsageError
from dpsense.core.numbers import NumberLike, widen
from dpsense.core.privacy_loss import PureDP, check_epsilon
from dpsense.mechanisms._validate import check_bounds_pair, check_resolution
from dpsense.mechanisms.quantile import record_values
from dpsense.mechanisms.result import MechanismResult
from dpsense.noise import exact
from dpsense.noise.categorical import CategoricalSampler

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

MECHANISM = "inverse_sensitivity/order_statistic-cells-exact@1"
#: Default number of public output cells in [L, U].
DEFAULT_RESOLUTION = 1 << 32
#: Confidence of the public rank bound reported in ``details``.
REPORTED_CONFIDENCE = 0.95


def _check_rank(rank: int, n: int) -> int:
    """A rank in [1, max(n, 1)]: rank 1 on no records is the path length 1 everywhere (module docstring)."""
    if not integral_in(rank, 1, max(n, 1)):
        raise UsageError(
            "rank must be an integer in [1, n] (or 1 when there is no record; n is public under replace adjacency)",
            (rank, n),
            "pass rank=(n + 1) // 2 for the (lower) median",
        )
    return int(rank)


def order_statistic_path_lengths(values: ArrayLike, *, rank: int, candidates: ArrayLike) -> I64:
    """``len(y) = max(0, #{x < y} - r + 1, r - #{x <= y})`` for each candidate y: records to change for x_(r) = y.

    The exact inverse-sensitivity path length of the rank-r order statistic under replace adjacency
    (module docstring). Data-dependent: for analysis and tests, never for release.
    """
    data = np.sort(record_values(values))
    r = _check_rank(rank, data.size)
    points = np.asarray(candidates, dtype=np.float64).ravel()
    below = np.searchsorted(data, points, side="left")
    at_most = np.searchsorted(data, points, side="right")
    return np.maximum(0, np.maximum(below - r + 1, r - at_most)).astype(np.int64)


def _to_sorted_cells(values: ArrayLike, low: float, high: float, resolution: int) -> I64:
    clipped = np.clip(record_values(values), low, high)
    if high == low:
        return np.zeros(clipped.size, dtype=np.int64)
    position = (clipped * 0.5 - low * 0.5) / (high * 0.5 - low * 0.5)  # halving keeps U - L finite
    cells = np.clip(np.floor(position * resolution), 0, resolution - 1).astype(np.int64)
    cells.sort()
    return cells


def _runs(sorted_cells: I64, rank: int, resolution: int) -> tuple[I64, I64, I64]:
    """Runs of cells with equal path length: (first cell, number of cells, path length), gaps and atoms interleaved.

    Gap i holds the cells strictly between distinct data cells v_(i-1) and v_i (all below the first /
    above the last for the end gaps); atom i is the cell v_i itself.
    """
    cells, counts = np.unique(sorted_cells, return_counts=True)
    at_most = np.cumsum(counts)  # #{data cells <= v_i}
    below = at_most - counts  # #{data cells < v_i}
    atom_len = np.maximum(0, np.maximum(below - rank + 1, rank - at_most))
    gap_below = np.concatenate(([0], at_most))  # every cell of gap i has gap_below[i] data cells below it
    gap_len = np.maximum(0, np.maximum(gap_below - rank + 1, rank - gap_below))
    gap_start = np.concatenate(([0], cells + 1))
    gap_size = np.concatenate((cells, [resolution])) - gap_start
    m = cells.size
    starts = np.empty(2 * m + 1, dtype=np.int64)
    sizes = np.empty(2 * m + 1, dtype=np.int64)
    lengths = np.empty(2 * m + 1, dtype=np.int64)
    starts[0::2], sizes[0::2], lengths[0::2] = gap_start, gap_size, gap_len
    starts[1::2], sizes[1::2], lengths[1::2] = cells, 1, atom_len
    return starts, sizes, lengths


def _draw_cells(sorted_cells: I64, rank: int, epsilon: Fraction, resolution: int, size: int) -> I64:
    """``size`` independent exact draws of the output cell (the mechanism's only randomness)."""
    starts, sizes, lengths = _runs(sorted_cells, rank, resolution)
    runs = CategoricalSampler.build(sizes.astype(np.float64), lengths, epsilon / 2).draw(size)
    return starts[runs] + exact.uniform_below(sizes[runs])


def _midpoint(cell: int, low: float, high: float, resolution: int) -> float:
    fraction = (cell + 0.5) / resolution
    return float(min(max(2.0 * (low * 0.5 + fraction * (high * 0.5 - low * 0.5)), low), high))


def inverse_sensitivity_order_statistic(
    values: ArrayLike,
    *,
    rank: int,
    bounds: tuple[float, float],
    epsilon: NumberLike,
    resolution: int = DEFAULT_RESOLUTION,
) -> MechanismResult:
    """An epsilon-DP rank-r order statistic of ``values`` clipped to ``bounds``, by inverse sensitivity.

    Guarantee: epsilon-DP for one record under replace adjacency with n public (Asi-Duchi 2020 inverse
    sensitivity mechanism = exponential mechanism with utility -len, sensitivity 1; McSherry-Talwar 2007,
    DR Thm 3.10), sampled exactly over ``resolution`` public cells of [L, U]. See the module docstring for
    the exact path length and its proof.

    Args:
        values: the records (1-D, no NaN; clipped to the bounds). n = len(values) is public under replace.
        rank: the public rank r in [1, n] (1 is the minimum, n the maximum); 1 when n = 0 (a uniform cell).
        bounds: public (L, U), finite, L <= U.
        epsilon: privacy loss > 0.
        resolution: number K of equal public output cells (1 <= K <= 2^52).

    Returns:
        A ``MechanismResult``: ``value`` the released cell midpoint, ``loss = PureDP(epsilon)``,
        ``accuracy = None``, and the public rank bound in ``details``.

    Raises:
        InvalidData: NaN, not 1-D. InvalidBounds: bad bounds. UsageError: rank not in [1, max(n, 1)],
        bad resolution. InvalidPrivacyParameter: epsilon not > 0.

    """
    eps = check_epsilon(epsilon)
    low, high = check_bounds_pair(bounds)
    k = check_resolution(resolution)
    cells = _to_sorted_cells(values, low, high, k)
    r = _check_rank(rank, cells.size)
    chosen = int(_draw_cells(cells, r, eps, k, 1)[0])
    return MechanismResult(
        value=_midpoint(chosen, low, high, k),
        loss=PureDP(eps),
        accuracy=None,
        mechanism=MECHANISM,
        guarantee=(
            f"{PureDP(eps)}-DP for one record under replace adjacency with n public: inverse-sensitivity "
            "mechanism for the rank-r order statistic (Asi-Duchi, NeurIPS 2020), i.e. the exponential mechanism "
            "with utility -len and sensitivity 1 (McSherry-Talwar 2007, DR Thm 3.10)"
        ),
        details=_details(eps, k, low, high, r),
    )


def inverse_sensitivity_median(
    values: ArrayLike,
    *,
    bounds: tuple[float, float],
    epsilon: NumberLike,
    resolution: int = DEFAULT_RESOLUTION,
) -> MechanismResult:
    """The lower median (rank (n + 1) // 2) by ``inverse_sensitivity_order_statistic``; same guarantee."""
    n = np.asarray(values).size
    return inverse_sensitivity_order_statistic(
        values, rank=max(1, (n + 1) // 2), bounds=bounds, epsilon=epsilon, resolution=resolution
    )


def _details(epsilon: Fraction, resolution: int, low: float, high: float, rank: int) -> dict[str, Any]:
    beta = 1.0 - REPORTED_CONFIDENCE
    return {
        "rank": rank,
        "resolution": resolution,
        "cell_width": (high * 0.5 - low * 0.5) * 2.0 / resolution,
        "rank_error_bound": widen(2.0 / float(epsilon) * math.log(resolution / beta)),
        "rank_error_confidence": REPORTED_CONFIDENCE,
        "rank_statement": (
            "with the stated confidence the released cell lies between the data cells of ranks rank - l and "
            "rank + l, l = rank_error_bound (DR Thm 3.11; public parameters only)"
        ),
        "adjacency": "replace one record, n public (C records per unit: C times the loss)",
        "output": "midpoint of the chosen public cell",
    }
