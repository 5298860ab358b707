"""variance: the population variance of a numeric column clipped to [L, U], over a private n.

Three steps: a noisy centred sum S1, a noisy sum of squared centred values S2 and a noisy count N;
the release computes S2/N - (S1/N)^2, clamped (post-processing). Sensitivities: S1 as the mean's
centred sum; S2 C h^2 (h = (U - L)/2) under add/remove and replace ungrouped, 2 C h^2 (L1) and
sqrt(2) C h^2 (L2) grouped under replace (docs/math/global-sensitivity.md §1.4); N as ``count``.
Mechanisms: Laplace (default), Gaussian.
"""

from __future__ import annotations

from fractions import Fraction
from typing import ClassVar

from dpsense.core.adjacency import Adjacency
from dpsense.query._aggregates import AggregateKind
from dpsense.query._ir import AggregateIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query._parts import StepPart
from dpsense.query._planner_rules import centered_sensitivity_for, squares_sensitivity
from dpsense.sensitivity import Sqrt
from dpsense.statistics._base import ADDITIVE, Facts, Statistic, bounds_of


class Variance(Statistic):
    """A clipped population variance."""

    kind: ClassVar[AggregateKind] = AggregateKind.VARIANCE
    mechanisms: ClassVar[tuple[Mechanism, ...]] = ADDITIVE

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
