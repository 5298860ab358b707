"""Quantiles by the exponential mechanism over sorted intervals (Smith 2011), sampled exactly.

**Mechanism.** Public bounds [L, U] are cut into K equal cells (``resolution``, public). Each value is
clipped to [L, U] and mapped to its cell. For an output cell c let ``r(c)`` be the number of records
in cells strictly below c; the utility is ``u(c) = -|r(c) - q n|`` and cell c is chosen with
probability proportional to ``exp(-epsilon |r(c) - q n| / 2)`` (exponential mechanism, counting base
measure on the K cells). The cells with ``r(c) = i`` form the run ``c_(i) < c <= c_(i+1)`` between
consecutive sorted data cells (``c_(0) = -1``, ``c_(n+1) = K - 1``), so the mechanism picks run i
with weight ``(c_(i+1) - c_(i)) exp(-epsilon |i - q n| / 2)`` -- the interval construction of Smith
2011 used by diffprivlib, with cell counts as interval lengths -- then a uniform cell of the run. The
released value is the chosen cell's midpoint, a function of the cell alone (post-processing).

**Guarantee.** epsilon-DP for one record under add/remove and under replace adjacency (DR Thm 3.10
with Delta u = 1): replacing one record moves every r(c) by at most 1 with n fixed; adding or
removing one moves r(c) by 0 or 1 and q n by q, so |Delta u| <= max(q, 1 - q) <= 1 (ALGORITHMS.md
section 8). The candidate cells depend only on (L, U, K). A privacy unit owning up to C records moves
every r(c) by up to C: the guarantee is then C epsilon-DP (group privacy). ``em_quantiles`` runs one
such mechanism per requested quantile with epsilon / k each: epsilon-DP in total by basic composition
(DR Thm 3.16); diffprivlib splits the same way.

**Why cells, not a uniform real point of the chosen interval.** The continuous version outputs a
uniform point of ``[z_i, z_(i+1)]`` where the ``z`` are data values. That is not post-processing of
the index: the interval's endpoints are private, and a float64 point ``z_i + V (z_(i+1) - z_i)`` can
only land on a data-dependent set of doubles, so an output possible under x can be impossible under
a neighbour (Mironov's attack, CCS 2012, transposed to the exponential mechanism; Ilvento, CCS 2020).
With public cells every possible output has positive probability under every dataset and the
distribution is sampled exactly (``dpsense.noise.categorical`` for the run, an exact uniform integer
for the cell).

**Accuracy (public).** By DR Thm 3.11 with K candidates: with probability at least 1 - beta,
``|r(c) - q n| <= min_c' |r(c') - q n| + (2 / epsilon) ln(K / beta)``. The first term is data-dependent
(at most 1/2 when the records fall in distinct cells; larger with ties); the second is public and is
reported in ``details`` as ``rank_excess_bound``. ``accuracy`` is None: the error is in rank units,
and translating it into value units needs the data's density near the quantile.

**Time.** Sorting is O(n log n) (its duration varies mildly with the order of the data); the rest is
vectorised O(n) and depends on the data only through n, except for the categorical sampler's rare
exact fallback and the rejection loop of the uniform cell draw (expected fewer than 2 rounds).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpsense.core.errors import UsageError
from dpsense.core.numbers import NumberLike, to_fraction
from dpsense.core.privacy_loss import PureDP, check_epsilon
from dpsense.mechanisms._validate import as_record_values, check_bounds_pair, check_resolution
from dpsense.mechanisms.result import MechanismResult
from dpsense.noise import exact
from dpsense.noise.categorical import CategoricalSampler

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: Default number of public output cells in [L, U].
DEFAULT_RESOLUTION = 1 << 32
#: Confidence of the public rank bound reported in ``details``.
REPORTED_CONFIDENCE = 0.95
_EXPONENT_LIMIT = 1 << 62


@dataclass(frozen=True)
class _Cells:
    """A dataset mapped to public cells and sorted."""

    lower: float
    upper: float
    resolution: int
    sorted_cells: I64


def _check_q(q: NumberLike) -> Fraction:
    value = to_fraction(q, name="q")
    if not 0 <= value <= 1:
        raise UsageError("q must lie in [0, 1]", q, "pass the quantile as a fraction, e.g. q=0.5 for the median")
    return value


def _to_cells(values: ArrayLike, low: float, high: float, resolution: int) -> _Cells:
    array = as_record_values(values)
    clipped = np.clip(array, low, high)
    if high == low:
        cells = np.zeros(array.size, dtype=np.int64)
    else:
        # Halving is exact and keeps (U - L) finite for any finite bounds.
        position = (clipped * 0.5 - low * 0.5) / (high * 0.5 - low * 0.5)
        cells = np.clip(np.floor(position * resolution), 0, resolution - 1).astype(np.int64)
    cells.sort()
    return _Cells(low, high, resolution, cells)


def _rank_weights(cells: _Cells, q: Fraction, epsilon: Fraction) -> tuple[F64, I64, I64, Fraction]:
    """Run starts, run lengths (base measure), exponents |i den - num n| and the rate epsilon/(2 den)."""
    n = cells.sorted_cells.size
    num, den = q.numerator, q.denominator
    if (n + 1) * den + num * n >= _EXPONENT_LIMIT:
        raise UsageError(
            "q's denominator is too large for exact integer exponents",
            str(q),
            "pass q as a short decimal such as 0.25, or a Fraction with a small denominator",
        )
    padded = np.concatenate(([-1], cells.sorted_cells, [cells.resolution - 1])).astype(np.int64)
    lengths = np.diff(padded)
    exponents = np.abs(np.arange(n + 1, dtype=np.int64) * den - num * n)
    return lengths.astype(np.float64), padded[:-1] + 1, exponents, epsilon / (2 * den)


def _draw_cells(cells: _Cells, q: Fraction, epsilon: Fraction, size: int) -> I64:
    """``size`` independent exact draws of the output cell (the mechanism's randomness)."""
    lengths, starts, exponents, rate = _rank_weights(cells, q, epsilon)
    runs = CategoricalSampler.build(lengths, exponents, rate).draw(size)
    return starts[runs] + exact.uniform_below(lengths[runs].astype(np.int64))


def _cell_midpoints(cell: I64, low: float, high: float, resolution: int) -> F64:
    """Post-processing: the midpoint of each public cell, clipped to [L, U]."""
    fraction = (cell.astype(np.float64) + 0.5) / resolution
    midpoint = 2.0 * (low * 0.5 + fraction * (high * 0.5 - low * 0.5))
    return np.clip(midpoint, low, high)


def _details(epsilon: Fraction, resolution: int, low: float, high: float, split: int) -> dict[str, Any]:
    beta = 1.0 - REPORTED_CONFIDENCE
    return {
        "resolution": resolution,
        "cell_width": (high * 0.5 - low * 0.5) * 2.0 / resolution,
        "epsilon_per_quantile": str(epsilon),
        "rank_excess_bound": 2.0 / float(epsilon) * math.log(resolution / beta) * (1.0 + 1e-12),
        "rank_excess_confidence": REPORTED_CONFIDENCE,
        "rank_statement": (
            "with the stated confidence |r(c) - q n| <= min_c' |r(c') - q n| + rank_excess_bound, r(c) = number of "
            "records in cells below the released cell (DR Thm 3.11); the min term is data-dependent (<= 1/2 when "
            "records fall in distinct cells), so no value-unit accuracy is stated"
        ),
        "adjacency": "add/remove or replace of one record (C records per unit: C times the loss)",
        "composition": f"basic composition of {split} mechanisms (DR Thm 3.16)" if split > 1 else "single mechanism",
        "output": "midpoint of the chosen public cell",
    }


def _guarantee(epsilon: Fraction, split: int) -> str:
    what = "exponential-mechanism quantile (Smith 2011; McSherry-Talwar 2007, DR Thm 3.10, Delta u = 1)"
    if split > 1:
        what = f"{split} exponential-mechanism quantiles at epsilon/{split} each, basic composition (DR Thm 3.16)"
    return f"{PureDP(epsilon)}-DP for one record under add/remove and under replace adjacency: {what}"


def em_quantile(
    values: ArrayLike,
    *,
    q: NumberLike,
    bounds: tuple[float, float],
    epsilon: NumberLike,
    resolution: int = DEFAULT_RESOLUTION,
) -> MechanismResult:
    """An epsilon-DP q-quantile of ``values`` clipped to public ``bounds``, by the exponential mechanism.

    Guarantee: epsilon-DP for one record under add/remove and replace adjacency (Smith 2011 interval
    exponential mechanism; DR Thm 3.10 with Delta u = 1), sampled exactly over ``resolution`` public
    cells of [L, U]; see the module docstring for the proof and the rank-accuracy statement.

    Args:
        values: the records (1-D, non-empty, no NaN; infinities are clipped).
        q: the quantile in [0, 1] (``0.5`` is the median; converted exactly, 0.1 means 1/10).
        bounds: public clipping bounds (L, U), L <= U, finite.
        epsilon: privacy loss > 0.
        resolution: number K of equal public output cells in [L, U] (1 <= K <= 2^52).

    Returns:
        A ``MechanismResult`` with ``value`` the released float, ``loss = PureDP(epsilon)``,
        ``accuracy = None`` and the public rank bound in ``details``.

    Raises:
        InvalidData: empty input, NaN. InvalidBounds: L > U or non-finite bounds.
        UsageError: q outside [0, 1], bad resolution. InvalidPrivacyParameter: epsilon not > 0.

    """
    eps = check_epsilon(epsilon)
    quantile = _check_q(q)
    low, high = check_bounds_pair(bounds)
    k = check_resolution(resolution)
    cells = _to_cells(values, low, high, k)
    chosen = _draw_cells(cells, quantile, eps, 1)
    value = float(_cell_midpoints(chosen, low, high, k)[0])
    return MechanismResult(
        value=value,
        loss=PureDP(eps),
        accuracy=None,
        mechanism="quantile/em-cells-exact@1",
        guarantee=_guarantee(eps, 1),
        details={"q": str(quantile), **_details(eps, k, low, high, 1)},
    )


def em_quantiles(
    values: ArrayLike,
    *,
    qs: Sequence[NumberLike],
    bounds: tuple[float, float],
    epsilon: NumberLike,
    resolution: int = DEFAULT_RESOLUTION,
) -> MechanismResult:
    """Several quantiles, each by ``em_quantile``'s mechanism with epsilon / len(qs).

    Guarantee: epsilon-DP in total for one record under add/remove and replace adjacency, by basic
    composition (DR Thm 3.16) of len(qs) mechanisms that are each (epsilon/len(qs))-DP. The outputs
    are independent and returned in the order of ``qs`` (not forced to be monotone; sorting them is
    free post-processing).

    Returns:
        A ``MechanismResult`` whose ``value`` is a float64 array, one entry per requested quantile.

    """
    eps = check_epsilon(epsilon)
    if isinstance(qs, (str, bytes)) or len(qs) == 0:
        raise UsageError("qs must be a non-empty sequence of quantiles", qs, "pass e.g. qs=[0.25, 0.5, 0.75]")
    quantiles = [_check_q(q) for q in qs]
    low, high = check_bounds_pair(bounds)
    k = check_resolution(resolution)
    cells = _to_cells(values, low, high, k)
    share = eps / len(quantiles)
    chosen = np.concatenate([_draw_cells(cells, quantile, share, 1) for quantile in quantiles])
    return MechanismResult(
        value=_cell_midpoints(chosen, low, high, k),
        loss=PureDP(eps),
        accuracy=None,
        mechanism="quantile/em-cells-exact@1",
        guarantee=_guarantee(eps, len(quantiles)),
        details={"qs": [str(q) for q in quantiles], **_details(share, k, low, high, len(quantiles))},
    )
