"""histogram: counts per value of a categorical column over public keys (released alone, keys as rows).

A unit's C rows fall in at most C keys: the per-key count vector has ``histogram_sensitivity``
(docs/math/global-sensitivity.md §1.3; L1 min(C, C0 C_inf), doubled under replace). Mechanisms: Laplace (default),
Gaussian, geometric. Keys must be public (declared); private key selection is for grouped counts.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, ClassVar

from dpsense.core.errors import UnsupportedRequest
from dpsense.engine import count_rows
from dpsense.query._aggregates import AggregateKind
from dpsense.query._ir import AggregateIR, QueryIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query._parts import StepPart
from dpsense.query._planner_rules import count_sensitivity
from dpsense.query.planner import Plan, PlanStep
from dpsense.sensitivity import Sqrt
from dpsense.statistics._base import COUNTING, Facts, Produced, Runner, Statistic
from dpsense.statistics.count import release_counts


class Histogram(Statistic):
    """Counts per public key of one column."""

    kind: ClassVar[AggregateKind] = AggregateKind.HISTOGRAM
    mechanisms: ClassVar[tuple[Mechanism, ...]] = COUNTING

    def sensitivity(self, agg: AggregateIR, part: StepPart, facts: Facts) -> Fraction | Sqrt:
        """The count vector over the public keys (always grouped: the keys are its groups)."""
        return count_sensitivity(
            adjacency=facts.adjacency, rows=facts.bounded_rows(agg), groups=facts.groups, grouped=True, norm=facts.norm
        )

    def additive_specs(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> tuple[int, list[Any]] | None:
        """The rows of the view bounded to C per unit, grouped by the histogram's column (the runner's keys)."""
        return runner.step_rows(steps[0]), [count_rows(f"{agg.name}|n")]

    def check_executable(self, ir: QueryIR, agg: AggregateIR, plan: Plan) -> None:
        """A histogram is released alone: its public keys are the rows."""
        if ir.group_by or len(ir.aggregates) > 1:
            raise UnsupportedRequest(
                "a histogram is released on its own (one row per public key)",
                agg.name,
                f"release it alone, or use group_by({agg.columns[0]!r}, keys=[...]).agg({agg.name}=count())",
            )

    def run(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> Produced:
        """The noisy count of every public key, rounded to integers >= 0."""
        return release_counts(runner, agg, steps[0])
