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
removing one moves r(c) by 0 or 1 and q n by q, so |Delta u| <= max(q, 1 - q) <= 1 (docs/math/index.md
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

**No records.** With n = 0 there is one run (all K cells, r(c) = 0 = q n), so every utility is 0
and the output is a uniform public cell: the definition above, not a special case, and the same
epsilon (a neighbour has one record, and |Delta u| <= 1 still holds).

**Exact exponents for every q and n.** With q = num/den, ``|i - q n| = E_i / den`` for the integer
``E_i = |i den - num n|``. The sampler needs int64 exponents with one rational rate, so the
exponents are taken on a public grid of step 1/D: ``P_i = floor(E_i D / den)`` with rate
epsilon/(2 D), and run i, proposed with weight ``len_i exp(-epsilon P_i / (2 D))``, is accepted with
probability ``exp(-epsilon (E_i D - P_i den) / (2 den D))`` (exact Bernoulli, ``dpsense.noise.exact``);
a rejected proposal is drawn again. Accepted runs have weight ``len_i exp(-epsilon E_i / (2 den))``
exactly, whatever D. ``D = den`` when den <= 2^20 (then ``P_i = E_i`` and every proposal is accepted:
the single exact draw), else ``D = 2^20`` (acceptance >= exp(-epsilon / 2^21)); D is halved only
for n >= 2^41 records, to keep (n + 1) D <= 2^61. The output law is therefore the same for every D,
the choice depends on q alone for every n an array can hold, and no q or n raises.

**Time.** Sorting is O(n log n) (its duration varies mildly with the order of the data); the rest is
vectorised O(n) and depends on the data only through n, except for the categorical sampler's rare
exact fallback, the rejection loop of the uniform cell draw (expected fewer than 2 rounds) and, when
q's denominator exceeds 2^20 (a public fact), the exact acceptance step (one Bernoulli per proposal,
a redraw with probability below epsilon / 2^21).
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
from dpsense.core.numbers import NumberLike, to_fraction, widen
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
#: Largest grid denominator D of the exponents (module docstring, "Exact exponents").
_GRID = 1 << 20
#: Exponents stay below (n + 1) D <= 2^61 (int64 prefix sums and shifts in the sampler).
_EXPONENT_LIMIT = 1 << 61


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


def record_values(values: ArrayLike) -> NDArray[np.float64]:
    """One value per record as a 1-D float64 array without NaN; no records (shape (0,)) is allowed."""
    array = np.asarray(values, dtype=np.float64)
    if array.shape == (0,):
        return array
    return as_record_values(array)


def _to_cells(values: ArrayLike, low: float, high: float, resolution: int) -> _Cells:
    array = record_values(values)
    clipped = np.clip(array, low, high)
    if high == low:
        cells = np.zeros(array.size, dtype=np.int64)
    else:
        # Halving is exact and keeps (U - L) finite for any finite bounds.
        position = (clipped * 0.5 - low * 0.5) / (high * 0.5 - low * 0.5)
        cells = np.clip(np.floor(position * resolution), 0, resolution - 1).astype(np.int64)
    cells.sort()
    return _Cells(low, high, resolution, cells)


@dataclass(frozen=True)
class _RankTable:
    """The runs' base measures, first cells and grid exponents, and the exact acceptance step.

    Run i (``i`` records below its cells) is proposed with weight ``lengths[i] exp(-rate exponents[i])``
    and accepted with probability ``exp(-accept_below)`` when ``i < split`` and ``exp(-accept_above)``
    otherwise (both exact Fractions, 0 when D is a multiple of den).
    """

    lengths: F64
    starts: I64
    exponents: I64
    rate: Fraction
    split: int
    accept_below: Fraction
    accept_above: Fraction


def _grid(n: int, den: int) -> int:
    """The exponent grid D: den up to 2^20, else 2^20; halved while (n + 1) D > 2^61 (n >= 2^41 only)."""
    grid = den if den <= _GRID else _GRID
    while grid > 1 and (n + 1) * grid > _EXPONENT_LIMIT:
        grid = max(1, grid // 2)
    return grid


def _rank_weights(cells: _Cells, q: Fraction, epsilon: Fraction) -> _RankTable:
    """The exact rank table of the module docstring ("Exact exponents"), in Python ints where they are large."""
    n = cells.sorted_cells.size
    num, den = q.numerator, q.denominator
    grid = _grid(n, den)
    target = num * n  # q n = target / den
    split = -((-target) // den)  # ceil(q n): runs i < split lie below q n
    low = (target * grid) // den  # floor(q n D)
    high = -((-target * grid) // den)  # ceil(q n D)
    padded = np.concatenate(([-1], cells.sorted_cells, [cells.resolution - 1])).astype(np.int64)
    lengths = np.diff(padded)
    i = np.arange(n + 1, dtype=np.int64)
    # P_i = floor(|i den - num n| D / den) = low - i D below q n and i D - high above (|.| <= (n + 1) D).
    exponents = np.where(i < split, low - i * grid, i * grid - high).astype(np.int64)
    scale = epsilon / (2 * den * grid)  # acceptance exponent per unit of E_i D - P_i den
    return _RankTable(
        lengths=lengths.astype(np.float64),
        starts=padded[:-1] + 1,
        exponents=exponents,
        rate=epsilon / (2 * grid),
        split=split,
        accept_below=scale * (target * grid - low * den),
        accept_above=scale * (high * den - target * grid),
    )


def _accepted(table: _RankTable, runs: I64) -> NDArray[np.bool_]:
    """The exact acceptance step of each proposed run (all True when both exponents are 0)."""
    accept = np.ones(runs.size, dtype=np.bool_)
    for lane, run in enumerate(runs.tolist()):
        x = table.accept_below if run < table.split else table.accept_above
        if x:
            accept[lane] = exact.python_bernoulli_exp(x.numerator, x.denominator)
    return accept


def _draw_cells(cells: _Cells, q: Fraction, epsilon: Fraction, size: int) -> I64:
    """``size`` independent exact draws of the output cell (the mechanism's randomness)."""
    table = _rank_weights(cells, q, epsilon)
    sampler = CategoricalSampler.build(table.lengths, table.exponents, table.rate)
    runs = sampler.draw(size)
    if table.accept_below or table.accept_above:  # a public fact of (q, D): exact rejection step
        pending = np.flatnonzero(~_accepted(table, runs))
        while pending.size:
            runs[pending] = sampler.draw(pending.size)
            pending = pending[~_accepted(table, runs[pending])]
    return table.starts[runs] + exact.uniform_below(table.lengths[runs].astype(np.int64))


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
        "rank_excess_bound": widen(2.0 / float(epsilon) * math.log(resolution / beta)),
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
        values: the records (1-D, no NaN; infinities are clipped). No records gives a uniform public cell.
        q: the quantile in [0, 1] (``0.5`` is the median; converted exactly, 0.1 means 1/10).
        bounds: public clipping bounds (L, U), L <= U, finite.
        epsilon: privacy loss > 0.
        resolution: number K of equal public output cells in [L, U] (1 <= K <= 2^52).

    Returns:
        A ``MechanismResult`` with ``value`` the released float, ``loss = PureDP(epsilon)``,
        ``accuracy = None`` and the public rank bound in ``details``.

    Raises:
        InvalidData: NaN, not 1-D. InvalidBounds: L > U or non-finite bounds.
        UsageError: q outside [0, 1], bad resolution. InvalidPrivacyParameter: epsilon not > 0.
        None of these depends on the values beyond their shape and NaN (every q and n is exact).

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
