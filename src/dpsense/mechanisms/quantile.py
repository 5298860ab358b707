"""Quantiles by the exponential mechanism over public candidates (Smith 2011), sampled exactly.

Guarantee: ε-DP for one record (C records per unit: Cε by group privacy), under replace adjacency
with utility sensitivity Δu = 1 and under add/remove with Δu = max(q, 1 − q) when the caller states it
(``adjacency=Adjacency.ADD_REMOVE``: twice as sharp for the median). McSherry–Talwar 2007, Dwork–Roth
Thm 3.10. The utility is −dist(q n, [records below c, records up to and in c]) over K public candidates
(2^32 equal cells of [L, U], or the integers of [L, U] for an integer column), so a tie holding the
target rank is answered at its own value. Several quantiles: ε / k each, basic composition (DR Thm 3.16).
Output: the chosen cell's midpoint or integer, a function of the candidate alone (no private endpoints:
Mironov's attack does not apply). Rank accuracy: (2Δu/ε) ln(K/β) beyond the best candidate (DR Thm 3.11).
Exact sampling: integer exponents on a public grid with an exact acceptance step for long denominators.
For a numeric column the points of the decimal grids of [L, U] (10^e Z with 2 to 2^16 points each) can
join the cells as candidates, so a tie at a recorded value (a whole number, a tenth, a cent stored as a
float) is released at its value; each such point pays 1/16 rank per record off its grid (the fit: the
grids the data are not recorded on lose their pull), so the points run at Δu + 1/16 and the cells at
the rank term's Δu (§8.7). A column's declared recording step s makes the points k s of [L, U] the only
candidates. Proofs: docs/math/exponential-mechanism.md §8.1 (cells, exact exponents), §8.2 (ties,
add/remove Δu, integer candidates), §8.3 (decimal points), §8.5 (a declared step), §8.6 (the fit),
§8.7 (a Δu per candidate set).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import UsageError
from dpsense.core.numbers import NumberLike, to_fraction, widen
from dpsense.core.privacy_loss import PureDP, check_epsilon
from dpsense.core.steps import DecimalStep
from dpsense.mechanisms._quantile_candidates import (
    DEFAULT_RESOLUTION,
    MAX_GRID_POINTS,
    Candidates,
    DecimalGrid,
    decimal_grids,
    integer_candidates,
    integer_span,
    point_grids,
    prepared,
    prepared_groups,
    rank_slack_candidates,
    record_values,
    step_candidates,
    step_span,
)
from dpsense.mechanisms._rank_sampler import FIT_WEIGHT, draw, draw_groups
from dpsense.mechanisms.result import MechanismResult

__all__ = [
    "DEFAULT_RESOLUTION",
    "FIT_WEIGHT",
    "MAX_GRID_POINTS",
    "MECHANISM",
    "REPORTED_CONFIDENCE",
    "DecimalGrid",
    "cells_sharper",
    "decimal_grids",
    "em_quantile",
    "em_quantile_groups",
    "em_quantiles",
    "integer_candidates",
    "integer_span",
    "point_grids",
    "points_shift",
    "rank_slack_candidates",
    "record_values",
    "step_candidates",
    "step_span",
    "utility_sensitivity",
]

#: The mechanism's version: @8 gives the decimal grids 2^-k of the cells' base measure, k from the cells'
#: rate per rank (``points_shift``, §8.8; @7 gave them as much as the cells at every ε); @7 runs each
#: candidate set at its own Δu, the cells at the rank term's and the decimal points at the rank term's
#: plus the fit's whole range (§8.7; @6 ran every set at one Δu, the rank term's plus half the fit's range
#: under add/remove); @6 charges each decimal grid's point for the records off its grid (the fit, §8.6; @5
#: was a rule of grids of >= 100 points, reverted before it landed); @4 may add the points of the decimal
#: grids of [L, U] (@3: the integers alone); @2 ranks ties (an occupied cell holds the ranks of its
#: records) and sharpens the weights under add/remove; @1 gave every cell the rank of the records
#: strictly below it.
MECHANISM = "quantile/em-cells-exact@8"
#: Confidence of the public rank bound reported in ``details``.
REPORTED_CONFIDENCE = 0.95


def _check_q(q: NumberLike) -> Fraction:
    value = to_fraction(q, name="q")
    if not 0 <= value <= 1:
        raise UsageError("q must lie in [0, 1]", q, "pass the quantile as a fraction, e.g. q=0.5 for the median")
    return value


def utility_sensitivity(q: Fraction, adjacency: Adjacency | None, *, fitted: bool = False) -> Fraction:
    """Δu of the score for one record: half the width of the range its change can take on a neighbour.

    Rank utility alone: max(q, 1 − q) under add/remove, 1 otherwise. Adding or removing a record moves
    every rank count by 0 or 1 and q n by q, so the utility moves by at most max(q, 1 − q); replacing one
    (n fixed) moves the counts by at most 1 (docs/math/exponential-mechanism.md §8.2). ``None``
    (adjacency not stated) takes 1, valid under both. ``fitted``: the decimal points' Δu beside the
    cells. A point of G_e also pays FIT_WEIGHT per record off G_e, a count that moves by 0 or +1 when a
    record is added (0 or -1 removed) and by -1..1 when one is replaced, so its score moves by at most
    Δu + FIT_WEIGHT either way (§8.6, §8.7); the cells pay no fit and keep the rank term's Δu
    (``cells_sharper``).
    """
    if adjacency is Adjacency.ADD_REMOVE:
        return max(q, 1 - q) + (FIT_WEIGHT if fitted else 0)
    return Fraction(1) + (FIT_WEIGHT if fitted else 0)


#: The grid the cells' speed-up is rounded down to (``cells_sharper``): gains of at most 72 / 64.
_SHARPER_GRID = 64


def cells_sharper(q: Fraction, adjacency: Adjacency | None) -> Fraction:
    """How much faster the cells' weights fall than the decimal points': their Δu's ratio (§8.7), >= 1.

    Each set is weighted by its own Δu: a neighbour moves a cell's score within [-Δu_c, Δu_c] and a
    point's within [-Δu_p, Δu_p] (Δu_p = Δu_c + FIT_WEIGHT: the fit's count moves by at most one), so
    every candidate's weighted change lies in [-ε/2, ε/2] and the mechanism is ε-DP (McSherry-Talwar).
    The ratio is rounded down to a multiple of 1/64, so the sampler's integer gains stay small for any q
    (a q with a long denominator gives Δu_c one too): the cells then run at most 1/64 slower than they
    may, which only narrows their changes. 9/8 for the median under add/remove, 17/16 under replace.
    """
    exact = utility_sensitivity(q, adjacency, fitted=True) / utility_sensitivity(q, adjacency)
    return Fraction(math.floor(exact * _SHARPER_GRID), _SHARPER_GRID)


def points_shift(epsilon: Fraction, q: Fraction, adjacency: Adjacency | None) -> int:
    """The decimal points' share of the base measure: the grids weigh 2^-k of the cells' total (§8.8).

    k is the least k >= 0 with 2^-k <= r, r = ε / (2 Δu) the cells' rate per rank (Δu the rank term's,
    ``utility_sensitivity``): the grids weigh as much as the cells while the EM's rank noise spans at
    most a rank (r >= 1), and their share halves with each halving of r below. A point released for a
    tie needs the tie's block of ranks to stand out of the EM's noise of about 1/r ranks; below that the
    points only take outputs from the cells (1.19x OpenDP's error on iris at ε = 0.1 with equal
    shares). Public: ε, q and the adjacency alone.
    """
    rate = epsilon / (2 * utility_sensitivity(q, adjacency))
    if rate >= 1:
        return 0
    return (-(-rate.denominator // rate.numerator) - 1).bit_length()  # least k with 2^k >= 1/r


def _details(
    epsilon: Fraction, sensitivity: Fraction, candidates: Candidates, count: int, integers: bool
) -> dict[str, Any]:
    cells = candidates.lattices[0]
    if cells.step is not None:
        details = dict(_public_details(epsilon, sensitivity, cells.resolution, False, count, False))
        step = cells.step.text()
        details.update(candidates=f"the points of the declared step {step}", output="the chosen point")
        details["cell_width"] = float(cells.step.value)
        return details
    width = 1.0 if integers else (cells.upper * 0.5 - cells.lower * 0.5) * 2.0 / cells.resolution
    points = len(candidates.lattices) > 1
    details = dict(_public_details(epsilon, sensitivity, cells.resolution, points, count, integers))
    details["cell_width"] = width
    return details


@functools.lru_cache(maxsize=256)  # asked per group of a release with the same public facts
def _public_details(
    epsilon: Fraction, sensitivity: Fraction, resolution: int, points: bool, count: int, integers: bool
) -> dict[str, Any]:
    """The details of a release but the cell width: public facts alone (callers copy the dict)."""
    beta = 1.0 - REPORTED_CONFIDENCE
    kind = "integers" if integers else "cells and decimal points" if points else "cells"
    effective = rank_slack_candidates(resolution, points=points)
    return {
        "resolution": resolution,
        "candidates": kind,
        "cell_width": None,  # set by ``_details``
        "epsilon_per_quantile": str(epsilon),
        "utility_sensitivity": str(sensitivity),
        "rank_excess_bound": widen(2.0 * float(sensitivity / epsilon) * math.log(effective / beta)),
        "rank_excess_confidence": REPORTED_CONFIDENCE,
        "rank_statement": (
            "with the stated confidence dist(q n, ranks(c)) <= min_c' dist(q n, ranks(c')) + rank_excess_bound, "
            "ranks(c) = [records below the released cell, records up to and in it] (DR Thm 3.11); the min term is "
            "0 when a candidate holds the target rank, so no value-unit accuracy is stated"
        ),
        "adjacency": "add/remove or replace of one record (C records per unit: C times the loss)",
        "composition": f"basic composition of {count} mechanisms (DR Thm 3.16)" if count > 1 else "single mechanism",
        "output": "the chosen integer" if integers else "midpoint of the chosen public cell",
    }


@functools.lru_cache(maxsize=256)
def _guarantee(epsilon: Fraction, sensitivity: Fraction, count: int, adjacency: Adjacency | None) -> str:
    what = f"exponential-mechanism quantile (Smith 2011; McSherry-Talwar 2007, DR Thm 3.10, Delta u = {sensitivity})"
    if count > 1:
        what = f"{count} exponential-mechanism quantiles at epsilon/{count} each, basic composition (DR Thm 3.16)"
    if adjacency is Adjacency.ADD_REMOVE:
        return f"{PureDP(epsilon)}-DP for one record under add/remove adjacency: {what}"
    return f"{PureDP(epsilon)}-DP for one record under add/remove and under replace adjacency: {what}"


def em_quantile(
    values: ArrayLike,
    *,
    q: NumberLike,
    bounds: tuple[float, float],
    epsilon: NumberLike,
    resolution: int | None = None,
    adjacency: Adjacency | None = None,
    integers: bool = False,
    decimal_points: bool = False,
    step: NumberLike | DecimalStep | None = None,
) -> MechanismResult:
    """An epsilon-DP q-quantile of ``values`` clipped to public ``bounds``, by the exponential mechanism.

    Guarantee: epsilon-DP for one record under ``adjacency`` (Smith 2011 interval exponential
    mechanism with tie-aware ranks; DR Thm 3.10 with Δu = max(q, 1 − q) under add/remove, 1 under
    replace or when no adjacency is stated), sampled exactly over public candidates: ``resolution``
    equal cells of [L, U], or the integers ⌈L⌉..⌊U⌋ with ``integers=True`` (an integer column's
    declared kind). Proof: docs/math/exponential-mechanism.md §8.2.

    Args:
        values: the records (1-D, no NaN; infinities are clipped). No records gives a uniform candidate.
        q: the quantile in [0, 1] (``0.5`` is the median; converted exactly, 0.1 means 1/10).
        bounds: public clipping bounds (L, U), L <= U, finite.
        epsilon: privacy loss > 0.
        resolution: number K of equal public output cells in [L, U] (1 <= K <= 2^52; default 2^32).
        adjacency: the neighbouring relation the guarantee must hold under; ``Adjacency.ADD_REMOVE``
            sharpens the weights by 1 / max(q, 1 − q) (2x for the median). ``None``: valid under both.
        integers: candidates are the integers in [L, U] (records rounded to the nearest one).
        decimal_points: the cells and the points of each decimal grid of [L, U] with 2 to 2^16 points
            (``decimal_grids``; together 2^-k of the cells' measure, shared equally, 2^-k <= the cells'
            rate per rank ε / (2Δu): ``points_shift``, §8.8), so a tie at a recorded value of a numeric
            column (whole years, tenths, cents) is released at that value
            (docs/math/exponential-mechanism.md §8.3); a point of a grid pays FIT_WEIGHT per
            record off that grid and its Δu grows by FIT_WEIGHT (§8.6); the cells keep the rank term's
            Δu (§8.7).
            Cells alone when resolution > 2^32.
        step: a declared recording step s (a decimal such as ``"0.01"`` or ``25``): the candidates are the
            points k s in [L, U] alone, each record rounded to the nearest (§8.5); overrides ``integers``
            and ``decimal_points``.

    Returns:
        A ``MechanismResult`` with ``value`` the released float, ``loss = PureDP(epsilon)``,
        ``accuracy = None`` and the public rank bound in ``details``.

    Raises:
        InvalidData: NaN, not 1-D. InvalidBounds: L > U or non-finite bounds.
        UsageError: q outside [0, 1], bad resolution, no integer in the bounds. InvalidPrivacyParameter:
        epsilon not > 0. None of these depends on the values beyond their shape and NaN.

    """
    (result,) = em_quantile_groups(
        [values],
        q=q,
        bounds=bounds,
        epsilon=epsilon,
        resolution=resolution,
        adjacency=adjacency,
        integers=integers,
        decimal_points=decimal_points,
        step=step,
    )
    return result


def em_quantile_groups(
    groups: Sequence[ArrayLike],
    *,
    q: NumberLike,
    bounds: tuple[float, float],
    epsilon: NumberLike,
    resolution: int | None = None,
    adjacency: Adjacency | None = None,
    integers: bool = False,
    decimal_points: bool = False,
    step: NumberLike | DecimalStep | None = None,
) -> list[MechanismResult]:
    """``em_quantile`` of each group's records, in order: the same law, and the same draws from the same words.

    Guarantee: each result is epsilon-DP for one record of its group under ``adjacency``, exactly as
    ``em_quantile`` (docs/math/exponential-mechanism.md §8.2); the groups are the caller's disjoint
    partition, so how their losses combine is the caller's (parallel composition over public groups).
    The windows and float tables of consecutive groups are built together (``_rank_sampler.draw_groups``):
    one group's draw is the one ``em_quantile`` makes, and the groups draw in order, so under a test
    source the values equal those of ``em_quantile`` called for each group in turn.
    """
    eps = check_epsilon(epsilon)
    quantile = _check_q(q)
    shift = points_shift(eps, quantile, adjacency)
    candidates, release = prepared_groups(groups, bounds, resolution, integers, decimal_points, step, shift)
    if not candidates:
        return []
    fitted = candidates[0].misfits is not None
    sensitivity = utility_sensitivity(quantile, adjacency, fitted=fitted)
    sharper = cells_sharper(quantile, adjacency)  # the sampler uses it only beside decimal points
    chosen = draw_groups(candidates, quantile, eps / sensitivity, sharper)
    parts = np.array([part for part, _ in chosen], dtype=np.int64)
    values = release(parts, np.array([position for _, position in chosen], dtype=np.int64))
    guarantee = _guarantee(eps, sensitivity, 1, adjacency)
    details = {"q": str(quantile), **_details(eps, sensitivity, candidates[0], 1, integers)}  # public: the same for all
    if fitted:  # the points run at ``utility_sensitivity``, the cells at this (§8.7); the grids' share (§8.8)
        details["cells_utility_sensitivity"] = str(sensitivity / sharper)
        details["points_measure"] = f"2^-{shift} of the cells'"
    return [
        MechanismResult(
            value=float(value),
            loss=PureDP(eps),
            accuracy=None,
            mechanism=MECHANISM,
            guarantee=guarantee,
            details=dict(details),
        )
        for value in values.tolist()
    ]


def em_quantiles(
    values: ArrayLike,
    *,
    qs: Sequence[NumberLike],
    bounds: tuple[float, float],
    epsilon: NumberLike,
    resolution: int | None = None,
    adjacency: Adjacency | None = None,
    integers: bool = False,
    decimal_points: bool = False,
    step: NumberLike | DecimalStep | None = None,
) -> MechanismResult:
    """Several quantiles, each by ``em_quantile``'s mechanism with epsilon / len(qs).

    Guarantee: epsilon-DP in total for one record under ``adjacency`` (as ``em_quantile``), by basic
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
    share = eps / len(quantiles)
    shifts = [points_shift(share, quantile, adjacency) for quantile in quantiles]
    prepared_by_shift = {
        shift: prepared(values, bounds, resolution, integers, decimal_points, step, shift) for shift in set(shifts)
    }
    sensitivities = [
        utility_sensitivity(quantile, adjacency, fitted=prepared_by_shift[shift][0].misfits is not None)
        for quantile, shift in zip(quantiles, shifts, strict=True)
    ]
    released = []
    for quantile, sens, shift in zip(quantiles, sensitivities, shifts, strict=True):
        candidates, release = prepared_by_shift[shift]  # a tiny rate may leave a coarse grid out (``point_grids``)
        released.append(release(*draw(candidates, quantile, share / sens, 1, cells_sharper(quantile, adjacency))))
    candidates = prepared_by_shift[shifts[0]][0]
    return MechanismResult(
        value=np.concatenate(released),
        loss=PureDP(eps),
        accuracy=None,
        mechanism=MECHANISM,
        guarantee=_guarantee(eps, max(sensitivities), len(quantiles), adjacency),
        details={
            "qs": [str(q) for q in quantiles],
            **_details(share, max(sensitivities), candidates, len(quantiles), integers),
        },
    )
