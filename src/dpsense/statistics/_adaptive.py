"""The adaptive clip of a mean or sum: when it is the default, and the clip step both statistics release.

``mechanism="adaptive_clip"`` releases approximate bounds [lo, hi] of the column first
(``approx_bounds``' log2 histogram over every present value of the view, a step of its own), then the
statistic on the values clipped to [a, b] = [L, U] ∩ [lo, hi], its noise calibrated to [a, b]
(docs/math/global-sensitivity.md §1.5, "Adaptive clip"; adaptive composition: the clip is a release,
and the second step's sensitivity is a function of it).

**The default rule** (public facts only: the declared bounds and the steward's declared typical
range). When data concentrate in the typical range [t0, t1], the clip the histogram releases is at most
the power-of-two cover of it (the outer edges of the log2 bins holding t0 and t1), intersected with
[L, U]: ``predicted_clip``. The clip costs one even share of the statistic's ε, so the sum's noise
grows by 31/22 (mean) or 2 (sum) while its sensitivity shrinks by (U − L) / (b − a). The planner
takes the adaptive clip when the declared bounds are at least ``ADAPTIVE_WIDTH_RATIO`` times wider
than that cover, where the measured gain is already large (``benchmarks/adaptive_default.py``;
docs/planner.md, "A declared typical range"). The rule never reads the data; a typical range that is
wrong costs accuracy (a clip that is not found falls back to [L, U] at a smaller ε), never privacy.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpsense import mechanisms as mech
from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import InternalError
from dpsense.mechanisms.approx_bounds import LARGEST_EXPONENT, SMALLEST_EXPONENT, bin_edges, log_bin_indices
from dpsense.query._ir import AggregateIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query._parts import StepPart
from dpsense.query._planner_rules import Choice
from dpsense.query.planner import PlanStep
from dpsense.sensitivity import Bounds
from dpsense.statistics._base import Runner
from dpsense.statistics._steps import check_result_loss
from dpsense.statistics.approx_bounds import SUCCESS_PROBABILITY

#: The declared bounds must be at least this many times wider than the typical range's power-of-two
#: cover for the adaptive clip to be the default (measured: benchmarks/adaptive_default.py).
ADAPTIVE_WIDTH_RATIO = 8


def predicted_clip(typical: Bounds, bounds: Bounds) -> Bounds:
    """The widest clip data inside ``typical`` release: the outer edges of its ends' log2 bins, within ``bounds``."""
    ends = log_bin_indices(
        [float(typical.lower), float(typical.upper)],
        smallest_exponent=SMALLEST_EXPONENT,
        largest_exponent=LARGEST_EXPONENT,
    )
    low = Fraction(bin_edges(int(ends[0]), smallest_exponent=SMALLEST_EXPONENT)[0])
    high = Fraction(bin_edges(int(ends[1]), smallest_exponent=SMALLEST_EXPONENT)[1])
    return Bounds(max(bounds.lower, low), min(bounds.upper, high))


def adaptive_by_default(agg: AggregateIR) -> bool:
    """The rule of the module docstring: a declared typical range whose cover is ``ADAPTIVE_WIDTH_RATIO``x narrower."""
    if agg.mechanism is not None or agg.typical is None or not agg.bounds:
        return False
    bounds = Bounds(*agg.bounds[0])
    clip = predicted_clip(Bounds(*agg.typical), bounds)
    return clip.upper > clip.lower and bounds.upper - bounds.lower >= ADAPTIVE_WIDTH_RATIO * (clip.upper - clip.lower)


def is_adaptive(agg: AggregateIR) -> bool:
    """The statistic runs with the adaptive clip: named by the analyst, or the default by the rule above."""
    return agg.mechanism == Mechanism.ADAPTIVE_CLIP.value or adaptive_by_default(agg)


def default_reason(agg: AggregateIR) -> str:
    """The plan's reason for an adaptive default, with the numbers the rule compared."""
    bounds = Bounds(*agg.bounds[0])
    if agg.typical is None:
        raise InternalError(f"{agg.name!r} has no typical range")
    clip = predicted_clip(Bounds(*agg.typical), bounds)
    ratio = (bounds.upper - bounds.lower) / (clip.upper - clip.lower)
    return (
        f"adaptive clip by default: the declared bounds are {float(ratio):.3g}x wider than the power-of-two cover "
        f"[{float(clip.lower):g}, {float(clip.upper):g}] of the declared typical range (rule: >= "
        f"{ADAPTIVE_WIDTH_RATIO}x)"
    )


def part_choice(part: StepPart, choice: Choice) -> Choice:
    """The mechanism of each part of an ``adaptive_clip`` choice: approximate bounds for the clip, then Laplace.

    The clip part keeps the choice's reason (the analyst's name, or the default rule with its numbers).
    """
    if choice.mechanism is not Mechanism.ADAPTIVE_CLIP:
        return choice
    if part is StepPart.CLIP:
        reason = f"{choice.reason}; adaptive clip: the column's approximate bounds"
        return Choice(Mechanism.APPROX_BOUNDS, choice.chosen_by, reason)
    return Choice(
        Mechanism.LAPLACE,
        choice.chosen_by,
        "adaptive clip: Laplace on the values clipped to the released bounds, calibrated to that clip (the "
        "sensitivity stated here is its ceiling, for the declared bounds)",
    )


def release_clip(runner: Runner, agg: AggregateIR, clip_step: PlanStep) -> tuple[Bounds, mech.ApproxBounds, int]:
    """Release approximate bounds of every present value of the view: (the clip [L, U] ∩ them, the release, C).

    The clip is [L, U] when none were found or they do not overlap [L, U] (post-processing of the
    release). C, the step's contribution bound, was decided by the plan before any data was read.
    """
    low, high = agg.bounds[0]
    rows = clip_step.max_rows_per_unit
    if rows is None or clip_step.sensitivity is None:
        raise InternalError(f"the clip step of {agg.name!r} has no contribution bound")
    groups = [np.asarray(g, dtype=np.float64) for g in runner.present_values(agg, clip_step)]
    values = np.concatenate(groups) if groups else np.zeros(0, dtype=np.float64)
    found = mech.approx_bounds(
        values,
        epsilon=clip_step.loss.epsilon,
        max_rows_per_unit=rows,
        replace=runner.plan.adjacency is Adjacency.REPLACE,
        success_probability=SUCCESS_PROBABILITY,
    )
    check_result_loss(found, clip_step.loss, clip_step)
    a, b = low, high
    if found.low is not None and found.high is not None:
        a, b = max(low, Fraction(found.low)), min(high, Fraction(found.high))
        if not a < b:
            a, b = low, high
    return Bounds(a, b), found, rows


def clip_note(found: mech.ApproxBounds, then: str) -> str:
    """The accuracy note of an adaptive release: the clip, then ``then``, and the bias the bound leaves out."""
    return (
        f"adaptive clip: approximate bounds released first (threshold {found.threshold}; "
        f"{'found' if found.found else 'none found: the declared bounds'}), then {then}; the error "
        "bound covers the noise only: values outside the released clip add a bias that is not bounded"
    )


#: The post-processing line every adaptive release adds.
CLIP_POST_PROCESSING = "the clip [a, b] = the declared bounds intersected with the released ones"
