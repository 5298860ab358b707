"""sum: the sum of a numeric column, each value clipped to the public bounds [L, U].

Global sensitivity (docs/math/global-sensitivity.md §1.3, ``sum_sensitivity``): C max(|L|, |U|)
under add/remove; under replace C (max(U, 0) - min(L, 0)) ungrouped; per public group the add/remove
value (all rows in one group is the worst case), doubled under replace (a replaced unit leaves one
group while its replacement enters another; §1.4). Mechanisms: Laplace (default), Gaussian.
"""

from __future__ import annotations

from fractions import Fraction
from typing import ClassVar

from dpsense.query._aggregates import AggregateKind
from dpsense.query._ir import AggregateIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query._parts import StepPart
from dpsense.query._planner_rules import sum_sensitivity_for
from dpsense.sensitivity import Sqrt
from dpsense.statistics._base import ADDITIVE, Facts, Statistic, bounds_of


class Sum(Statistic):
    """A clipped sum."""

    kind: ClassVar[AggregateKind] = AggregateKind.SUM
    mechanisms: ClassVar[tuple[Mechanism, ...]] = ADDITIVE

    def sensitivity(self, agg: AggregateIR, part: StepPart, facts: Facts) -> Fraction | Sqrt:
        """The clipped sum, overall or per public group."""
        return sum_sensitivity_for(
            bounds_of(agg), adjacency=facts.adjacency, rows=facts.bounded_rows(agg), grouped=facts.grouped
        )
