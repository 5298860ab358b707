"""count: the number of rows, each unit contributing at most C of them.

Global sensitivity (docs/math/global-sensitivity.md §1.3): C under both adjacencies ungrouped
(``count_rows_sensitivity``); per public group, the count vector of a unit's C rows in at most C0
groups (``histogram_sensitivity``: L1 min(C, C0 C_inf), L2 sqrt(M); twice / sqrt(2) times that under
replace, where the replaced unit leaves some groups and its replacement enters others).
Mechanisms: Laplace (default, pure ε), Gaussian ((ε, δ)), geometric (pure ε, integer noise).
"""

from __future__ import annotations

from fractions import Fraction
from typing import ClassVar

from dpsense.query._aggregates import AggregateKind
from dpsense.query._ir import AggregateIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query._parts import StepPart
from dpsense.query._planner_rules import count_sensitivity
from dpsense.sensitivity import Sqrt
from dpsense.statistics._base import COUNTING, Facts, Statistic


class Count(Statistic):
    """The number of rows (bounded to C per unit)."""

    kind: ClassVar[AggregateKind] = AggregateKind.COUNT
    mechanisms: ClassVar[tuple[Mechanism, ...]] = COUNTING

    def sensitivity(self, agg: AggregateIR, part: StepPart, facts: Facts) -> Fraction | Sqrt:
        """Rows counted, overall or per public group."""
        return count_sensitivity(
            adjacency=facts.adjacency,
            rows=facts.bounded_rows(agg),
            groups=facts.groups,
            grouped=facts.grouped,
            norm=facts.norm,
        )
