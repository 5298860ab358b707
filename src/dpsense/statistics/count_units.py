"""count_units: the number of distinct privacy units.

Global sensitivity (docs/math/global-sensitivity.md §1.3): 1 ungrouped under both adjacencies
(``count_units_sensitivity``); per public group a unit counts once in each of at most C0 groups:
``histogram_sensitivity`` of C0 rows with one per group (L1 C0, doubled under replace).
A grouped count_units needs C0. Mechanisms: Laplace (default), Gaussian, geometric.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any, ClassVar

from dpsense.core.errors import UsageError
from dpsense.engine import count_units
from dpsense.query import _aggregates as aggregates
from dpsense.query._aggregates import Aggregate, AggregateKind
from dpsense.query._ir import AggregateIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query._parts import StepPart
from dpsense.query._planner_rules import units_sensitivity
from dpsense.query.planner import PlanStep
from dpsense.sensitivity import Sqrt
from dpsense.statistics._base import COUNTING, Facts, Fields, Produced, Runner, Statistic
from dpsense.statistics._steps import ALL_ROWS
from dpsense.statistics.count import release_counts


class CountUnits(Statistic):
    """Distinct units (no row bound: a unit counts once)."""

    kind: ClassVar[AggregateKind] = AggregateKind.COUNT_UNITS
    mechanisms: ClassVar[tuple[Mechanism, ...]] = COUNTING
    fields: ClassVar[Fields] = (frozenset({"kind", "mechanism"}), frozenset())

    def from_fields(self, f: Mapping[str, Any]) -> Aggregate:
        """``{kind: count_units, mechanism?}``."""
        return aggregates.count_units(mechanism=f.get("mechanism"))

    def rows(self, agg: AggregateIR, *, dataset_rows: int | None, groups: int | None, grouped: bool) -> int | None:
        """No C: a unit counts once (per group it touches, at most C0 of them when grouped)."""
        if grouped and groups is None:
            raise UsageError(
                f"a grouped count_units {agg.name!r} needs the number of groups one unit may touch",
                None,
                "declare it with Query(...).max_groups_per_unit(k), or register the dataset with "
                "max_groups_per_unit={column: k}",
            )
        return None

    def sensitivity(self, agg: AggregateIR, part: StepPart, facts: Facts) -> Fraction | Sqrt:
        """One per unit overall; one per group touched per group."""
        return units_sensitivity(adjacency=facts.adjacency, groups=facts.groups, grouped=facts.grouped, norm=facts.norm)

    def additive_specs(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> tuple[int, list[Any]] | None:
        """Distinct units: every row kept per group (one row per unit ungrouped)."""
        return (ALL_ROWS if runner.group_column is not None else 1), [count_units(f"{agg.name}|n")]

    def run(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> Produced:
        """The noisy counts, rounded to integers >= 0."""
        return release_counts(runner, agg, steps[0])
