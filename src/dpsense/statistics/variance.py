"""variance: the population variance of a numeric column clipped to [L, U], over a private n.

Three steps: a noisy centred sum S1, a noisy sum of squared centred values S2 and a noisy count N;
the release computes S2/N - (S1/N)^2, clamped (post-processing). Sensitivities: S1 as the mean's
centred sum; S2 C h^2 (h = (U - L)/2) under add/remove and replace ungrouped, 2 C h^2 (L1) and
sqrt(2) C h^2 (L2) grouped under replace (docs/math/global-sensitivity.md §1.4); N as ``count``.
Mechanisms: Laplace (default), Gaussian.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from dpsense.core.adjacency import Adjacency
from dpsense.core.numbers import inward_interval
from dpsense.engine import centered_squares, count_present
from dpsense.query import _aggregates as aggregates
from dpsense.query._aggregates import Aggregate, AggregateKind
from dpsense.query._ir import AggregateIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query._parts import StepPart
from dpsense.query._planner_rules import centered_sensitivity_for, squares_sensitivity
from dpsense.query.planner import PlanStep
from dpsense.sensitivity import Sqrt
from dpsense.statistics import _steps
from dpsense.statistics._base import (
    ADDITIVE,
    Facts,
    Produced,
    Runner,
    Statistic,
    bounds_of,
)
from dpsense.statistics._steps import CONFIDENCE, Output, bounded_sum, variance_error


class Variance(Statistic):
    """A clipped population variance."""

    kind: ClassVar[AggregateKind] = AggregateKind.VARIANCE
    mechanisms: ClassVar[tuple[Mechanism, ...]] = ADDITIVE

    constructor: ClassVar[Callable[..., Aggregate] | None] = aggregates.variance

    def parts(
        self, agg: AggregateIR, *, adjacency: Adjacency, public_n: int | None, grouped: bool
    ) -> tuple[StepPart, ...]:
        """A centred sum, a sum of squared centred values, a count."""
        return (StepPart.CENTERED_SUM, StepPart.CENTERED_SQUARES, StepPart.COUNT)

    def sensitivity(self, agg: AggregateIR, part: StepPart, facts: Facts) -> Fraction | Sqrt:
        """Each of the three parts."""
        if part is StepPart.COUNT:
            return super().sensitivity(agg, part, facts)
        rows = facts.bounded_rows(agg)
        if part is StepPart.CENTERED_SQUARES:
            return squares_sensitivity(
                bounds_of(agg), adjacency=facts.adjacency, rows=rows, grouped=facts.grouped, norm=facts.norm
            )
        return centered_sensitivity_for(bounds_of(agg), adjacency=facts.adjacency, rows=rows)

    def additive_specs(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> tuple[int, list[Any]] | None:
        """The clipped sum, the count of present values and the sum of squared centred values."""
        low, high = agg.bounds[0]
        column = agg.columns[0]
        inside = inward_interval(low, high)  # the clip stays inside the bounds of the sensitivity
        specs = [
            bounded_sum(column, low, high, name=f"{agg.name}|s"),
            count_present(column, f"{agg.name}|n"),
            centered_squares(column, low=inside[0], high=inside[1], name=f"{agg.name}|q"),
        ]
        return runner.step_rows(steps[0]), specs

    def run(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> Produced:
        """Population variance from three noisy releases: centred sum S1, centred squares S2, count N.

        With a = S2/N in [0, h**2] and m = S1/N in [-h, h] (h the public half-width), the estimate is
        ``clamp(S2^/N^ - clamp(S1^/N^, -h, h)**2, 0, h**2)``. Post-processing of the three releases, so
        is its error bound: |S2^/N^ - a| <= (b2 + h**2 bn)/N^ and |m^ - m| <= (b1 + h bn)/N^, whence
        |error| <= (b2 + h**2 bn + 2 h (b1 + h bn)) / N^ (capped at h**2), with each b at 1 - β/3 so the
        three hold together with probability >= 0.95 (union bound).
        """
        low, high = agg.bounds[0]
        by_part = {s.part: s for s in steps}
        rows = runner.fetched(agg, steps)
        s_name, n_name, q_name = f"{agg.name}|s", f"{agg.name}|n", f"{agg.name}|q"
        mid = (low + high) / 2
        centered = np.array([float(r.sums[s_name].value - mid * r.counts[n_name]) for r in rows], dtype=np.float64)
        squares = np.array([float(r.sums[q_name].value) for r in rows], dtype=np.float64)
        counts = np.array([r.counts[n_name] for r in rows], dtype=np.float64)
        confidence = 1 - (1 - CONFIDENCE) / 3
        noisy_sum = _steps.additive_noise(by_part[StepPart.CENTERED_SUM], centered, confidence=confidence)
        noisy_squares = _steps.additive_noise(by_part[StepPart.CENTERED_SQUARES], squares, confidence=confidence)
        noisy_count = _steps.additive_noise(by_part[StepPart.COUNT], counts, confidence=confidence)
        half = float(high - low) / 2
        top = half * half
        values: list[Any] = []
        errors: list[float | None] = []
        for s1, s2, n in zip(
            np.atleast_1d(noisy_sum.value).astype(np.float64),
            np.atleast_1d(noisy_squares.value).astype(np.float64),
            np.atleast_1d(noisy_count.value).astype(np.float64),
            strict=True,
        ):
            if n < 1:
                values.append(top / 3)  # the variance of a uniform value on the bounds: public
                errors.append(top)
                continue
            m = min(max(float(s1) / n, -half), half)
            values.append(min(max(float(s2) / n - m * m, 0.0), top))
            errors.append(variance_error(noisy_sum, noisy_squares, noisy_count, float(n), half))
        note = (
            "population variance (divisor n^) from a noisy centred sum, a noisy sum of squared centred values "
            "and a noisy count; the error bound uses the released n^: |error| <= (b_sq + h^2 b_n + 2h (b_sum + "
            "h b_n)) / n^ with h = (U-L)/2 and each b at 98.3%, so it grows as the group shrinks"
        )
        post = [
            f"clamped to [0, ((U-L)/2)^2] = [0, {top:g}]",
            "the variance of a uniform value on the bounds when the noisy count is below 1",
        ]
        return [Output(agg.name, values, errors, note, post)], [noisy_sum.loss, noisy_squares.loss, noisy_count.loss]
