"""sum: the sum of a numeric column, each value clipped to the public bounds [L, U].

Global sensitivity (docs/math/global-sensitivity.md §1.3, ``sum_sensitivity``): C max(|L|, |U|)
under add/remove; under replace C (max(U, 0) - min(L, 0)) ungrouped; per public group the add/remove
value (all rows in one group is the worst case), doubled under replace (a replaced unit leaves one
group while its replacement enters another; §1.4). Mechanisms: Laplace (default), Gaussian.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from dpsense.query import _aggregates as aggregates
from dpsense.query._aggregates import Aggregate, AggregateKind
from dpsense.query._ir import AggregateIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query._parts import StepPart
from dpsense.query._planner_rules import sum_sensitivity_for
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
from dpsense.statistics._steps import Output, accuracy_note, bounded_sum, error_bounds


class Sum(Statistic):
    """A clipped sum."""

    kind: ClassVar[AggregateKind] = AggregateKind.SUM
    mechanisms: ClassVar[tuple[Mechanism, ...]] = ADDITIVE

    constructor: ClassVar[Callable[..., Aggregate] | None] = aggregates.sum

    def sensitivity(self, agg: AggregateIR, part: StepPart, facts: Facts) -> Fraction | Sqrt:
        """The clipped sum, overall or per public group."""
        return sum_sensitivity_for(
            bounds_of(agg), adjacency=facts.adjacency, rows=facts.bounded_rows(agg), grouped=facts.grouped
        )

    def additive_specs(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> tuple[int, list[Any]] | None:
        """The exact fixed-point clipped sum of the column."""
        low, high = agg.bounds[0]
        return runner.step_rows(steps[0]), [bounded_sum(agg.columns[0], low, high, name=f"{agg.name}|s")]

    def run(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> Produced:
        """The noisy sums."""
        step = steps[0]
        rows = runner.fetched(agg, [step])
        name = f"{agg.name}|s"
        # float(units) rounds once, scaling by a power of two is exact: float(Fraction) without the Fraction
        sums = np.array([math.ldexp(float(r.sums[name].units), r.sums[name].grid_exponent) for r in rows])
        result = _steps.additive_noise(step, sums)
        values = [float(v) for v in np.atleast_1d(result.value)]
        return [Output(agg.name, values, error_bounds(result, len(values)), accuracy_note(result))], [result.loss]
