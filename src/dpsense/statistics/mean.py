"""mean: the mean of a numeric column clipped to [L, U]; the number of values is private.

Released as a noisy centred sum S = sum(x - m), m = (L + U)/2, over a noisy count (two steps), then
m + S/N clamped to the bounds (post-processing; docs/math/global-sensitivity.md §1.5). Sensitivities:
the centred sum C (U - L)/2 under add/remove and C (U - L) under replace, also per group; the count as
``count``. Under replace with a public n, ungrouped: sum / n in one step, min(C, n)(U - L)/n (§1.3).
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
from dpsense.query._planner_rules import centered_sensitivity_for, public_n_mean_sensitivity, sum_sensitivity_for
from dpsense.sensitivity import Sqrt
from dpsense.statistics._base import ADDITIVE, Facts, Statistic, bounds_of


class Mean(Statistic):
    """A clipped mean over a private (or, under replace, a public) n."""

    kind: ClassVar[AggregateKind] = AggregateKind.MEAN
    mechanisms: ClassVar[tuple[Mechanism, ...]] = ADDITIVE

    def parts(
        self, agg: AggregateIR, *, adjacency: Adjacency, public_n: int | None, grouped: bool
    ) -> tuple[StepPart, ...]:
        """Sum / public n in one step (replace, public n, ungrouped); else a centred sum and a count."""
        if adjacency is Adjacency.REPLACE and public_n is not None and not grouped:
            return (StepPart.VALUE,)
        return (StepPart.CENTERED_SUM, StepPart.COUNT)

    def sensitivity(self, agg: AggregateIR, part: StepPart, facts: Facts) -> Fraction | Sqrt:
        """The centred sum, the count, or the public-n mean."""
        if part is StepPart.COUNT:
            return super().sensitivity(agg, part, facts)
        rows = facts.bounded_rows(agg)
        if part is StepPart.CENTERED_SUM:
            return centered_sensitivity_for(bounds_of(agg), adjacency=facts.adjacency, rows=rows)
        if facts.public_n is not None:
            return public_n_mean_sensitivity(bounds_of(agg), n=facts.public_n, adjacency=facts.adjacency, rows=rows)
        return sum_sensitivity_for(bounds_of(agg), adjacency=facts.adjacency, rows=rows, grouped=facts.grouped)

    def explain_note(self, part: StepPart, public_n: int | None) -> str:
        """The public n of a one-step mean."""
        return f" (mean over the public n = {public_n})" if part is StepPart.VALUE and public_n is not None else ""
