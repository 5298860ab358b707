"""mean: the mean of a numeric column clipped to [L, U]; the number of values is private.

Released as a noisy centred sum S = sum(x - m), m = (L + U)/2, over a noisy count (two steps), then
m + S/N clamped to the bounds (post-processing; docs/math/global-sensitivity.md §1.5). Sensitivities:
the centred sum C (U - L)/2 under add/remove and C (U - L) under replace, also per group; the count as
``count``. Under replace with a public n, ungrouped: sum / n in one step, min(C, n)(U - L)/n (§1.3).
Mechanisms: Laplace (default), Gaussian, and ``adaptive_clip`` (the default when the steward declared a
typical range much narrower than the bounds, ``statistics._adaptive``; else the analyst's opt-in):
approximate bounds [a, b] of the column first (``approx_bounds``'s log2 histogram over all rows of the
view, a step of its own), then the centred sum and the count of the values clipped to [a, b], the sum's
noise calibrated to C (b - a)/2 (docs/math/global-sensitivity.md §1.5, "Adaptive clip"); a column of
its own, ``<name>_bias95``, bounds the clipping bias beside the noise bound of ``<name>_error95`` (§1.5a:
the sum's bias bound over a lower bound on the group's count from its noisy count).

Budget: the centred sum takes 13/22 of the mean's ε and the count 9/22, the split that minimises the
expected variance when nothing but the bounds is known (docs/math/global-sensitivity.md §1.5, "Budget
split"): the even split's error is 1.18x this one's for a mean at the midpoint, 1.13x at a quarter of
the range from it, and 0.95x for a mean at a domain edge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace as replace_step
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import InternalError
from dpsense.core.privacy_loss import PrivacyLoss
from dpsense.engine import count_present
from dpsense.query import _aggregates as aggregates
from dpsense.query._aggregates import Aggregate, AggregateKind
from dpsense.query._ir import AggregateIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query._parts import StepPart
from dpsense.query._planner_rules import (
    Choice,
    centered_sensitivity_for,
    count_sensitivity,
    public_n_mean_sensitivity,
    sum_sensitivity_for,
)
from dpsense.query.planner import PlanStep
from dpsense.sensitivity import Sqrt
from dpsense.sensitivity.mean import SUM_SHARE
from dpsense.statistics import _steps
from dpsense.statistics._adaptive import (
    BINS_FAILURE,
    CLIP_POST_PROCESSING,
    JOINT_CONFIDENCE,
    NOISE_CONFIDENCE,
    AdaptiveClip,
    bias_text,
    clip_note,
    default_reason,
    g_up,
    is_adaptive,
    no_bias_text,
    release_clip,
)
from dpsense.statistics._adaptive import part_choice as adaptive_part_choice
from dpsense.statistics._base import (
    ADDITIVE,
    Facts,
    Produced,
    Runner,
    Statistic,
    bounds_of,
)
from dpsense.statistics._steps import CONFIDENCE, Output, accuracy_note, bounded_sum, error_bounds, mean_error

#: The centred sum's ε against the count's (``Mean.budget_weight``): 13/9.
_SUM_WEIGHT = SUM_SHARE / (1 - SUM_SHARE)


class Mean(Statistic):
    """A clipped mean over a private (or, under replace, a public) n."""

    kind: ClassVar[AggregateKind] = AggregateKind.MEAN
    mechanisms: ClassVar[tuple[Mechanism, ...]] = (*ADDITIVE, Mechanism.ADAPTIVE_CLIP)

    constructor: ClassVar[Callable[..., Aggregate] | None] = aggregates.mean

    def parts(
        self, agg: AggregateIR, *, adjacency: Adjacency, public_n: int | None, grouped: bool
    ) -> tuple[StepPart, ...]:
        """Sum / public n in one step (replace, public n, ungrouped); else a centred sum and a count.

        ``adaptive_clip``: the approximate bounds first, then the centred sum and the count.
        """
        if is_adaptive(agg):
            return (StepPart.CLIP, StepPart.CENTERED_SUM, StepPart.COUNT)
        if adjacency is Adjacency.REPLACE and public_n is not None and not grouped:
            return (StepPart.VALUE,)
        return (StepPart.CENTERED_SUM, StepPart.COUNT)

    def budget_weight(self, part: StepPart) -> Fraction:
        """13/9 for the centred sum against 1 for the count (``sensitivity.mean.SUM_SHARE`` = 13/22 of ε).

        With sensitivities C (U - L)/2 and C, the mean's error is about (η_sum - (μ - m) η_count)/n, of
        variance ∝ (U - L)²/4 / ε_sum² + (μ - m)² / ε_count². μ is private; averaged over μ uniform on
        [L, U] ((μ - m)² has mean (U - L)²/12) the minimum is at ε_sum/ε_count = 3^(1/3) ≈ 1.442 (13/9 = 1.444,
        an exact rational). Proof and the loss against the even split: docs/math/global-sensitivity.md §1.5.
        """
        return _SUM_WEIGHT if part is StepPart.CENTERED_SUM else Fraction(1)

    def default(self, agg: AggregateIR, *, mechanism_epsilon: Fraction, adjacency: Adjacency) -> Choice:
        """Laplace; the adaptive clip when the column's declared typical range is much narrower than its bounds.

        The rule and its measurement: ``statistics._adaptive`` (public facts only).
        """
        if is_adaptive(agg):
            return Choice(Mechanism.ADAPTIVE_CLIP, "default", default_reason(agg))
        return super().default(agg, mechanism_epsilon=mechanism_epsilon, adjacency=adjacency)

    def part_choice(self, part: StepPart, choice: Choice) -> Choice:
        """``adaptive_clip``: the approximate bounds for the clip part, Laplace for the rest (``_adaptive``)."""
        return adaptive_part_choice(part, choice)

    def sensitivity(self, agg: AggregateIR, part: StepPart, facts: Facts) -> Fraction | Sqrt:
        """The centred sum, the count, or the public-n mean; the clip part: the log2 histogram of the view's rows.

        The centred sum of ``adaptive_clip`` is stated for the declared [L, U], its ceiling; its noise is
        calibrated to the released clip [a, b] (at most as wide) when it runs.
        """
        if part is StepPart.COUNT:
            return super().sensitivity(agg, part, facts)
        rows = facts.bounded_rows(agg)
        if part is StepPart.CLIP:  # all rows of the view in one histogram: C (2C under replace), groups or not
            return count_sensitivity(adjacency=facts.adjacency, rows=rows, groups=None, grouped=True, norm=facts.norm)
        if part is StepPart.CENTERED_SUM:
            return centered_sensitivity_for(bounds_of(agg), adjacency=facts.adjacency, rows=rows)
        if facts.public_n is not None:
            return public_n_mean_sensitivity(bounds_of(agg), n=facts.public_n, adjacency=facts.adjacency, rows=rows)
        return sum_sensitivity_for(bounds_of(agg), adjacency=facts.adjacency, rows=rows, grouped=facts.grouped)

    def explain_note(self, agg: AggregateIR, part: StepPart, public_n: int | None) -> str:
        """The public n of a one-step mean."""
        return f" (mean over the public n = {public_n})" if part is StepPart.VALUE and public_n is not None else ""

    def additive_specs(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> tuple[int, list[Any]] | None:
        """The clipped sum and the count of present values (the denominator counts what the sum adds).

        None for ``adaptive_clip``: its clip is released first (``run`` asks for the sums then).
        """
        if is_adaptive(agg):
            return None
        low, high = agg.bounds[0]
        column = agg.columns[0]
        if steps[0].part is StepPart.VALUE:  # sum / public n
            return runner.step_rows(steps[0]), [bounded_sum(column, low, high, name=f"{agg.name}|s")]
        specs = [bounded_sum(column, low, high, name=f"{agg.name}|s"), count_present(column, f"{agg.name}|n")]
        return runner.step_rows(steps[0]), specs

    def run(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> Produced:
        """The midpoint plus the noisy centred sum over the noisy count, clamped; its error bound uses that count."""
        by_part = {s.part: s for s in steps}
        if is_adaptive(agg):
            return _adaptive_mean(runner, agg, by_part)
        low, high = agg.bounds[0]
        rows = runner.fetched(agg, steps)
        if StepPart.VALUE in by_part:
            return _public_n_mean(agg, by_part[StepPart.VALUE], rows, runner.plan.public_n, low, high)
        outputs, losses = _noisy_mean(agg, by_part, rows, low, high)
        return [outputs], losses


def _adaptive_mean(runner: Runner, agg: AggregateIR, by_part: dict[StepPart, PlanStep]) -> Produced:
    """Approximate bounds of the view's values, then the mean of the values clipped to them (adaptive composition).

    Step 1 releases the clip [a, b] (``_adaptive.release_clip``: its noise for the step's sensitivity,
    C rows per unit, 2C under replace). Steps 2-3 are the private-n mean on [a, b]: the centred sum's
    noise for C (b - a)/2 (C (b - a) under replace), at most the planned C (U - L)/2. The error column
    bias column is the clipping bias's bound (``AdaptiveClip.mean_bias``, §1.5a).
    """
    clip = release_clip(runner, agg, by_part[StepPart.CLIP])
    total = by_part[StepPart.CENTERED_SUM]
    calibrated = replace_step(
        total, sensitivity=centered_sensitivity_for(clip.bounds, adjacency=runner.plan.adjacency, rows=clip.rows)
    )
    a, b = clip.bounds.lower, clip.bounds.upper
    specs = [bounded_sum(agg.columns[0], a, b, name=f"{agg.name}|s"), count_present(agg.columns[0], f"{agg.name}|n")]
    group_rows = runner.group_rows(total, specs)
    steps = {**by_part, StepPart.CENTERED_SUM: calibrated}
    output, losses = _noisy_mean(
        agg, steps, group_rows, a, b, confidence=NOISE_CONFIDENCE, clip=clip, half_width="(b-a)/2"
    )
    if clip.cuts:
        tail = (
            "the bias column bounds the clipping bias of the mean, at most max(min(B_up/n_lo, U - b), "
            f"min(B_low/n_lo, a - L)) with n_lo = max(1, ceil(n^ - b_count)) ({bias_text(clip)}), with probability "
            f">= {1 - BINS_FAILURE - (1 - CONFIDENCE) / 2:g} (the bins' event and the count's); |value - mean of the "
            f"values clipped to the declared bounds| <= error + bias with probability >= {JOINT_CONFIDENCE:g}, "
            f"and error + bias is at most max(U - a, b - L) = {g_up(clip.widest_mean_error())}"
        )
    else:
        tail = no_bias_text()
    note = clip_note(clip, output.accuracy_note, tail)
    post = [*output.post_processing, CLIP_POST_PROCESSING]
    return [replace_step(output, accuracy_note=note, post_processing=post)], [clip.found.loss, *losses]


def _public_n_mean(
    agg: AggregateIR, step: PlanStep, rows: list[Any], n: int | None, low: Fraction, high: Fraction
) -> Produced:
    """Sum / n with the public n of the plan, plus noise for (U - L)/n, clamped to [L, U] (one step).

    The plan has this step only when n is public (``release._profile.public_units``: replace adjacency,
    one row per unit, the whole snapshot, no missing value), so the view holds exactly n values on both
    neighbours; the error bound is the noise's, a function of n, which is public.
    """
    if n is None:
        raise InternalError(f"the one-step mean {agg.name!r} has no public n")
    name = f"{agg.name}|s"
    means = np.array([float(r.sums[name].value / n) for r in rows], dtype=np.float64)
    result = _steps.additive_noise(step, means)
    values = [min(max(float(v), float(low)), float(high)) for v in np.atleast_1d(result.value)]
    note = f"sum / public n (n = {n}, the units every neighbour holds under replace); {accuracy_note(result)}"
    post = [f"clamped to the public bounds [{float(low):g}, {float(high):g}]"]
    return [Output(agg.name, values, error_bounds(result, len(values)), note, post)], [result.loss]


def _noisy_mean(
    agg: AggregateIR,
    by_part: dict[StepPart, PlanStep],
    rows: list[Any],
    low: Fraction,
    high: Fraction,
    *,
    confidence: float = CONFIDENCE,
    clip: AdaptiveClip | None = None,
    half_width: str = "(U-L)/2",
) -> tuple[Output, list[PrivacyLoss]]:
    """The midpoint of [low, high] plus the noisy centred sum over the noisy count, clamped to [low, high].

    The error bound holds with probability ``confidence`` (each noise at 1 - β/2); with an adaptive
    ``clip`` each group's clipping-bias bound is added (from its noisy count, on the count's same event);
    ``half_width`` names half the width of [low, high] in the note.
    """
    clamp = f"clamped to the public bounds [{float(low):g}, {float(high):g}]"
    total, count = by_part[StepPart.CENTERED_SUM], by_part[StepPart.COUNT]
    s_name, n_name = f"{agg.name}|s", f"{agg.name}|n"
    mid = (low + high) / 2
    centered = np.array([float(r.sums[s_name].value - mid * r.counts[n_name]) for r in rows], dtype=np.float64)
    counts = np.array([r.counts[n_name] for r in rows], dtype=np.float64)
    beta = 1 - confidence
    noisy_sum = _steps.additive_noise(total, centered, confidence=1 - beta / 2)
    noisy_count = _steps.additive_noise(count, counts, confidence=1 - beta / 2)
    sums_out = np.atleast_1d(noisy_sum.value).astype(np.float64)
    counts_out = np.atleast_1d(noisy_count.value).astype(np.float64)
    half = float(high - low) / 2
    values: list[Any] = []
    errors: list[float | None] = []
    biases: list[float | None] | None = None if clip is None else []
    for s, c in zip(sums_out, counts_out, strict=True):
        estimate = float(mid) + (s / c if c >= 1 else 0.0)
        values.append(min(max(estimate, float(low)), float(high)))
        error = mean_error(noisy_sum, noisy_count, c, half)
        errors.append(error)
        if biases is not None and clip is not None:
            b_count = None if noisy_count.accuracy is None else float(noisy_count.accuracy.error_bound)
            biases.append(clip.mean_bias(float(c), b_count) if clip.cuts else 0.0)
    note = (
        "noisy centered sum / noisy count; the error bound uses the released noisy count n^: "
        f"|error| <= (b_sum + {half_width} * b_count) / n^ with b at {100 * (1 - beta / 2):g}% each, so it grows as "
        "the group shrinks and is the full range when n^ < 1"
    )
    post = [clamp, "the midpoint when the noisy count is below 1"]
    return Output(agg.name, values, errors, note, post, biases), [noisy_sum.loss, noisy_count.loss]
