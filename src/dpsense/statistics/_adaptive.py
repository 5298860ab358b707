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

**The clipping bias** (docs/math/global-sensitivity.md §1.5a). The histogram counts the values
clamped to [L, U] (what the statistic sums). Every log2 bin outside the released [lo, hi] had a noisy
count below τ, so with probability >= 1 - ``BINS_FAILURE`` each holds at most m = τ - 1 + t rows
(``mechanisms.approx_bounds.skipped_bin_rows``, a union bound over the bins [L, U] meets), and clipping
moves a value of such a bin at most to the bin's far edge within [L, U]: ``AdaptiveClip.above`` and
``below`` bound the sum's bias on each side, for every group at once (a group's values are a subset
of the histogram's). An adaptive release shows this bound in its own column, ``<name>_bias95``, beside
the noise bound of ``<name>_error95`` (each at 0.95; together, |value - truth| <= error + bias with
probability >= 0.90, against the statistic of the values clipped to the declared bounds). The bias
bound is a worst case over the rows the released histogram cannot rule out, often far above the bias
the data have; it is shown apart so that the noise bound keeps its meaning. All of it is a function of
the released clip and public facts (post-processing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from fractions import Fraction

import numpy as np

from dpsense import mechanisms as mech
from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import DPSenseError, InternalError
from dpsense.core.numbers import double_at_or_above, inward_interval
from dpsense.mechanisms.approx_bounds import (
    LARGEST_EXPONENT,
    SMALLEST_EXPONENT,
    approx_bounds_threshold,
    bin_edges,
    log_bin_indices,
    skipped_bin_rows,
)
from dpsense.query._ir import AggregateIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query._parts import StepPart
from dpsense.query._planner_rules import Choice
from dpsense.query.planner import PlanStep
from dpsense.sensitivity import Bounds
from dpsense.statistics._base import Runner
from dpsense.statistics._steps import CONFIDENCE, check_result_loss
from dpsense.statistics.approx_bounds import SUCCESS_PROBABILITY

#: The declared bounds must be at least this many times wider than the typical range's power-of-two
#: cover for the adaptive clip to be the default (measured: benchmarks/adaptive_default.py).
ADAPTIVE_WIDTH_RATIO = 8

#: The failure probability of the clip's bins (m rows at most in each bin below τ) and the confidence of the
#: noise bound of an adaptive release. They are separate columns, ``<name>_error95`` (the noise, as for every
#: statistic) and ``<name>_bias95`` (the clipping bias), each holding with probability >= 0.95: the sum's bias
#: on the bins' event alone (0.975), the mean's on it and its noisy count's event (0.975 each). Together
#: |value - truth| <= error + bias holds with probability >= ``JOINT_CONFIDENCE`` (union bound).
BINS_FAILURE = (1 - CONFIDENCE) / 2
NOISE_CONFIDENCE = CONFIDENCE
JOINT_CONFIDENCE = 1 - BINS_FAILURE - (1 - CONFIDENCE)


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


@dataclass(frozen=True)
class AdaptiveClip:
    """The released clip of an adaptive mean or sum and the public bound on the clipping bias it adds.

    Attributes:
        bounds: the clip [a, b] = [L, U] ∩ [lo, hi] (or [L, U]).
        declared: the declared bounds [L, U].
        found: the approximate-bounds release.
        rows: C, the clip step's contribution bound (Δ = C, 2C under replace).
        above: B_up, the most the values above b lose to the clip in total (any group, or all).
        below: B_low, the most the values below a gain.
        rows_per_bin: m = τ - 1 + t, the most rows a bin outside the clip holds; None when the clip is [L, U].
        bins: the number of bins of the union bound (those [L, U] meets); 0 when the clip is [L, U].

    ``above`` and ``below`` hold together with probability >= 1 - ``BINS_FAILURE`` (exactly 0 when the
    clip does not cut that side).

    """

    bounds: Bounds
    declared: Bounds
    found: mech.ApproxBounds
    rows: int
    above: Fraction
    below: Fraction
    rows_per_bin: int | None
    bins: int

    @property
    def cuts(self) -> bool:
        """Whether the clip is narrower than the declared bounds (else there is no clipping bias)."""
        return self.bounds != self.declared

    def sum_bias(self) -> float:
        """|clipped sum - sum on [L, U]| <= max(B_up, B_low), for every group (rounded up to a double)."""
        return double_at_or_above(max(self.above, self.below))

    def mean_bias(self, noisy_count: float, count_bound: float | None) -> float:
        """The mean's bias bound for a group of released noisy count n^, on the count's event |n^ - n| <= b_n.

        There n >= n_lo = max(1, ⌈n^ - b_n⌉) (n is a whole number, and a group with a mean has a value);
        the bias (up - low)/n lies in [-B_low/n, B_up/n], each side also at most the distance from the clip
        to the declared edge: max(min(B_up/n_lo, U - b), min(B_low/n_lo, a - L)).
        """
        if not self.cuts:
            return 0.0
        a, b = self.bounds.lower, self.bounds.upper
        L, U = self.declared.lower, self.declared.upper
        n_low = 1
        if count_bound is not None and math.isfinite(noisy_count) and math.isfinite(count_bound):
            floor = noisy_count - count_bound
            n_low = max(1, math.ceil(floor - abs(floor) * 1e-12)) if floor > 1 else 1  # rounding: never above n
        return double_at_or_above(max(min(self.above / n_low, U - b), min(self.below / n_low, a - L)))

    def widest_mean_error(self) -> float:
        """The most a mean clamped to [a, b] can differ from one in [L, U]: max(U - a, b - L)."""
        return double_at_or_above(max(self.declared.upper - self.bounds.lower, self.bounds.upper - self.declared.lower))


def clip_of(found: mech.ApproxBounds, declared: Bounds) -> Bounds:
    """[L, U] ∩ [lo, hi]; [L, U] when nothing was found or the two do not overlap (post-processing).

    An outermost bin (±K) holds every magnitude beyond 2^(k_max - 1), not only up to its reported edge
    2^k_max: when it reached τ, its side is not clipped (the declared bound stays), so that every value
    beyond the clip lies in a bin that did not reach τ.
    """
    low, high = declared.lower, declared.upper
    if found.low is None or found.high is None:
        return declared
    outer = Fraction(math.ldexp(1.0, LARGEST_EXPONENT))
    lo, hi = Fraction(found.low), Fraction(found.high)
    a = low if lo <= -outer else max(low, lo)
    b = high if hi >= outer else min(high, hi)
    return Bounds(a, b) if a < b else declared


def declared_bins(declared: Bounds) -> tuple[int, int]:
    """The log2 bins of L and U: every value clamped to [L, U] lies in one of them or one between (public)."""
    ends = log_bin_indices(
        list(inward_interval(declared.lower, declared.upper)),
        smallest_exponent=SMALLEST_EXPONENT,
        largest_exponent=LARGEST_EXPONENT,
    )
    return int(ends[0]), int(ends[1])


def clip_bias(
    found: mech.ApproxBounds, declared: Bounds, clip: Bounds, *, sensitivity: int
) -> tuple[Fraction, Fraction, int | None, int]:
    """(B_up, B_low, m, M): the public bound on each side's clipping bias (docs/math/global-sensitivity.md §1.5a).

    The histogram counted the values clamped to [L, U], so they fall in the M bins from that of L to
    that of U. With probability >= 1 - ``BINS_FAILURE`` every such bin whose noisy count stayed below τ
    holds at most m = τ - 1 + t rows (``skipped_bin_rows``). When b < U, b is the upper edge of the highest
    bin that reached τ, so a value above b lies in a higher bin, which did not reach τ, and moves by at most
    min(U, that bin's upper edge) - b: B_up = m Σ (min(U, u_j) - b) over the bins j of [L, U] with lower edge
    >= b (the outermost bin's upper edge taken as +∞). Symmetrically B_low = m Σ (a - max(L, l_j)) over the bins
    with upper edge <= a. Zero on a side the clip does not cut.
    """
    L, U = declared.lower, declared.upper
    a, b = clip.lower, clip.upper
    if a == L and b == U:
        return Fraction(0), Fraction(0), None, 0
    K = LARGEST_EXPONENT - SMALLEST_EXPONENT
    first, last = declared_bins(declared)
    bins = last - first + 1
    m = skipped_bin_rows(
        threshold=found.threshold,
        epsilon=found.loss.epsilon,
        sensitivity=sensitivity,
        bins=bins,
        failure_probability=BINS_FAILURE,
    )
    above, below = Fraction(0), Fraction(0)
    for j in range(first, last + 1):
        lower, upper = (Fraction(e) for e in bin_edges(j, smallest_exponent=SMALLEST_EXPONENT))
        if b < U and lower >= b:
            above += (U if j == K else min(U, upper)) - b
        if a > L and upper <= a:
            below += a - (L if j == -K else max(L, lower))
    return m * above, m * below, m, bins


def release_clip(runner: Runner, agg: AggregateIR, clip_step: PlanStep) -> AdaptiveClip:
    """Release approximate bounds of every present value of the view, clamped to [L, U]: the clip and its bias.

    The clip is [L, U] ∩ the bounds, or [L, U] when none were found or they do not overlap (``clip_of``:
    post-processing of the release). The values are clamped to the declared bounds first (what the
    statistic adds; a per-row map, so the histogram's sensitivity is unchanged), so every value outside the
    clip lies in a bin of [L, U] that did not reach τ. C, the step's contribution bound, was decided by the
    plan before any data was read.
    """
    low, high = agg.bounds[0]
    rows = clip_step.max_rows_per_unit
    if rows is None or clip_step.sensitivity is None:
        raise InternalError(f"the clip step of {agg.name!r} has no contribution bound")
    replace = runner.plan.adjacency is Adjacency.REPLACE
    groups = [np.asarray(g, dtype=np.float64) for g in runner.present_values(agg, clip_step)]
    values = np.concatenate(groups) if groups else np.zeros(0, dtype=np.float64)
    lo_d, hi_d = inward_interval(low, high)
    found = mech.approx_bounds(
        np.clip(values, lo_d, hi_d),
        epsilon=clip_step.loss.epsilon,
        max_rows_per_unit=rows,
        replace=replace,
        success_probability=SUCCESS_PROBABILITY,
    )
    check_result_loss(found, clip_step.loss, clip_step)
    declared = Bounds(low, high)
    clip = clip_of(found, declared)
    above, below, m, bins = clip_bias(found, declared, clip, sensitivity=2 * rows if replace else rows)
    return AdaptiveClip(clip, declared, found, rows, above, below, m, bins)


def _g(value: Fraction | float) -> str:
    return f"{float(value):.6g}"


def g_up(value: float) -> str:
    """``value`` with 6 significant digits, rounded up: a bound is never printed below itself."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    exact = Decimal(value)
    rounded = exact.quantize(Decimal(1).scaleb(exact.adjusted() - 5), rounding=ROUND_CEILING)
    return f"{float(rounded):.6g}"


def clip_note(clip: AdaptiveClip, then: str, bias: str) -> str:
    """The accuracy note of an adaptive release: the clip, then ``then`` (the noise), then ``bias`` (the column)."""
    found = clip.found
    declared = f"[{_g(clip.declared.lower)}, {_g(clip.declared.upper)}]"
    if not found.found:
        head = f"none found: the clip is the declared bounds {declared}, no clipping bias"
    elif not clip.cuts:
        head = (
            f"found [{_g(found.low or 0)}, {_g(found.high or 0)}]: the clip is the declared bounds {declared}, "
            "no clipping bias"
        )
    else:
        head = (
            f"found [{_g(found.low or 0)}, {_g(found.high or 0)}]: the clip [{_g(clip.bounds.lower)}, "
            f"{_g(clip.bounds.upper)}] of the declared {declared}"
        )
    head = f"adaptive clip: approximate bounds released first (threshold {found.threshold}; {head})"
    return f"{head}, then {then}; {bias}"


def _rows_text(tau: int, m: int, bins: int) -> str:
    return (
        f"so with probability {1 - BINS_FAILURE:g} (a union bound over the {bins} bins the declared bounds meet) "
        f"each holds at most m = {m} rows (τ - 1 + t, τ = {tau}, t = {m - tau + 1}), and clipping moves a row at "
        "most to its bin's far edge within the declared bounds"
    )


def bias_text(clip: AdaptiveClip) -> str:
    """How the clipping-bias bound of the note is made: m rows per bin outside the clip, at 1 - ``BINS_FAILURE``."""
    m = clip.rows_per_bin if clip.rows_per_bin is not None else 0
    return (
        f"every log2 bin outside the clip had a noisy count below the threshold, "
        f"{_rows_text(clip.found.threshold, m, clip.bins)}: "
        f"B_up = {g_up(double_at_or_above(clip.above))} above the clip, "
        f"B_low = {g_up(double_at_or_above(clip.below))} below it"
    )


def no_bias_text() -> str:
    """The note's last part when the clip is the declared bounds (the bias column is 0)."""
    return (
        f"the error column is that noise bound (at {NOISE_CONFIDENCE:g}); the clip is the declared bounds, so the "
        "bias column is 0"
    )


def forecast_note(agg: AggregateIR, clip_step: PlanStep, adjacency: Adjacency) -> str:
    """What a forecast can say of an adaptive statistic before its clip is released: no number, and why.

    The noise is calibrated to the clip and the bias bound depends on where the clip falls, both known
    only after step 1; τ and m (the rows a bin below τ may hold) are public before it and are stated.
    """
    head = (
        "no number before the clip is released: the noise is calibrated to the clip [a, b] that its first step "
        "releases, and the bias column bounds the clipping bias computed from that clip"
    )
    tail = (
        "the narrower the clip inside the declared bounds, the larger; the release states the noise bound and "
        f"the bias bound at {CONFIDENCE:g} each"
    )
    rows = clip_step.max_rows_per_unit
    if rows is None or not agg.bounds:
        return f"{head} ({tail})"
    sensitivity = 2 * rows if adjacency is Adjacency.REPLACE else rows
    try:
        tau = approx_bounds_threshold(
            sensitivity=sensitivity,
            epsilon=clip_step.loss.epsilon,
            bins=2 * (LARGEST_EXPONENT - SMALLEST_EXPONENT) + 1,
            success_probability=SUCCESS_PROBABILITY,
        )
        first, last = declared_bins(Bounds(*agg.bounds[0]))
        m = skipped_bin_rows(
            threshold=tau,
            epsilon=clip_step.loss.epsilon,
            sensitivity=sensitivity,
            bins=last - first + 1,
            failure_probability=BINS_FAILURE,
        )
    except DPSenseError:  # an ε the release would refuse: it says so itself
        return f"{head} ({tail})"
    rows_text = _rows_text(tau, m, last - first + 1)
    return f"{head}: each log2 bin outside it will have a noisy count below τ, {rows_text} ({tail})"


#: The post-processing line every adaptive release adds.
CLIP_POST_PROCESSING = "the clip [a, b] = the declared bounds intersected with the released ones"
