"""sum: the sum of a numeric column, each value clipped to the public bounds [L, U].

Global sensitivity (docs/math/global-sensitivity.md §1.3, ``sum_sensitivity``): C max(|L|, |U|)
under add/remove; under replace C (max(U, 0) - min(L, 0)) ungrouped; per public group the add/remove
value (all rows in one group is the worst case), doubled under replace (a replaced unit leaves one
group while its replacement enters another; §1.4). Mechanisms: Laplace (default), Gaussian, and
``adaptive_clip``: approximate bounds of the column first (one even share of the sum's ε), then the sum
of the values clipped to [a, b] = [L, U] ∩ them, its noise calibrated to the same formula on [a, b]
(``statistics._adaptive``, which also states when it is the default: a declared typical range much
narrower than the bounds). Its bias column, ``<name>_bias95``, bounds the clipping bias beside the noise
bound of ``<name>_error95`` (docs/math/global-sensitivity.md §1.5a).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace as replace_step
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from dpsense.core.adjacency import Adjacency
from dpsense.query import _aggregates as aggregates
from dpsense.query._aggregates import Aggregate, AggregateKind
from dpsense.query._ir import AggregateIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query._parts import StepPart
from dpsense.query._planner_rules import Choice, count_sensitivity, sum_sensitivity_for
from dpsense.query.planner import PlanStep
from dpsense.sensitivity import Sqrt
from dpsense.statistics import _steps
from dpsense.statistics._adaptive import (
    BINS_FAILURE,
    CLIP_POST_PROCESSING,
    JOINT_CONFIDENCE,
    NOISE_CONFIDENCE,
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
from dpsense.statistics._steps import CONFIDENCE, Output, accuracy_note, bounded_sum, error_bounds


class Sum(Statistic):
    """A clipped sum."""

    kind: ClassVar[AggregateKind] = AggregateKind.SUM
    mechanisms: ClassVar[tuple[Mechanism, ...]] = (*ADDITIVE, Mechanism.ADAPTIVE_CLIP)

    constructor: ClassVar[Callable[..., Aggregate] | None] = aggregates.sum

    def parts(
        self, agg: AggregateIR, *, adjacency: Adjacency, public_n: int | None, grouped: bool
    ) -> tuple[StepPart, ...]:
        """The sum alone; ``adaptive_clip``: the approximate bounds first, then the sum."""
        return (StepPart.CLIP, StepPart.VALUE) if is_adaptive(agg) else (StepPart.VALUE,)

    def default(self, agg: AggregateIR, *, mechanism_epsilon: Fraction, adjacency: Adjacency) -> Choice:
        """Laplace; the adaptive clip when the declared typical range is much narrower than the bounds."""
        if is_adaptive(agg):
            return Choice(Mechanism.ADAPTIVE_CLIP, "default", default_reason(agg))
        return super().default(agg, mechanism_epsilon=mechanism_epsilon, adjacency=adjacency)

    def part_choice(self, part: StepPart, choice: Choice) -> Choice:
        """``adaptive_clip``: the approximate bounds for the clip part, Laplace for the rest (``_adaptive``)."""
        return adaptive_part_choice(part, choice)

    def sensitivity(self, agg: AggregateIR, part: StepPart, facts: Facts) -> Fraction | Sqrt:
        """The clipped sum, overall or per public group; the clip part: the log2 histogram of the view's rows."""
        rows = facts.bounded_rows(agg)
        if part is StepPart.CLIP:  # all rows of the view in one histogram: C (2C under replace), groups or not
            return count_sensitivity(adjacency=facts.adjacency, rows=rows, groups=None, grouped=True, norm=facts.norm)
        return sum_sensitivity_for(bounds_of(agg), adjacency=facts.adjacency, rows=rows, grouped=facts.grouped)

    def additive_specs(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> tuple[int, list[Any]] | None:
        """The exact fixed-point clipped sum of the column (none for ``adaptive_clip``: ``run`` asks after the clip)."""
        if is_adaptive(agg):
            return None
        low, high = agg.bounds[0]
        return runner.step_rows(steps[0]), [bounded_sum(agg.columns[0], low, high, name=f"{agg.name}|s")]

    def run(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> Produced:
        """The noisy sums (after the released clip for ``adaptive_clip``, its error column noise + clipping bias)."""
        by_part = {s.part: s for s in steps}
        step = by_part[StepPart.VALUE]
        if not is_adaptive(agg):
            return _noisy_sums(agg, step, runner.fetched(agg, [step]))
        clip = release_clip(runner, agg, by_part[StepPart.CLIP])
        grouped = runner.group_column is not None
        sensitivity = sum_sensitivity_for(clip.bounds, adjacency=runner.plan.adjacency, rows=clip.rows, grouped=grouped)
        calibrated = replace_step(step, sensitivity=sensitivity)
        specs = [bounded_sum(agg.columns[0], clip.bounds.lower, clip.bounds.upper, name=f"{agg.name}|s")]
        (output,), losses = _noisy_sums(agg, calibrated, runner.group_rows(step, specs), confidence=NOISE_CONFIDENCE)
        bias = clip.sum_bias() if clip.cuts else 0.0
        if clip.cuts:
            tail = (
                f"the bias column bounds the clipping bias, at most max(B_up, B_low) = {g_up(bias)} per value, grouped "
                f"or not ({bias_text(clip)}), with probability >= {1 - BINS_FAILURE:g}; |value - sum of the values "
                f"clipped to the declared bounds| <= error + bias with probability >= {JOINT_CONFIDENCE:g}"
            )
        else:
            tail = no_bias_text()
        note = clip_note(clip, output.accuracy_note, tail)
        post = [*output.post_processing, CLIP_POST_PROCESSING]
        biases: list[float | None] = [bias] * len(output.values)
        output = replace_step(output, accuracy_note=note, post_processing=post, bias=biases)
        return [output], [clip.found.loss, *losses]


def _noisy_sums(agg: AggregateIR, step: PlanStep, rows: list[Any], *, confidence: float = CONFIDENCE) -> Produced:
    """Laplace or Gaussian noise on each group's exact clipped sum, for the step's sensitivity."""
    name = f"{agg.name}|s"
    # float(units) rounds once, scaling by a power of two is exact: float(Fraction) without the Fraction
    sums = np.array([math.ldexp(float(r.sums[name].units), r.sums[name].grid_exponent) for r in rows])
    result = _steps.additive_noise(step, sums, confidence=confidence)
    values = [float(v) for v in np.atleast_1d(result.value)]
    return [Output(agg.name, values, error_bounds(result, len(values)), accuracy_note(result))], [result.loss]
