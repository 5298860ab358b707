"""count: the number of rows, each unit contributing at most C of them.

Global sensitivity (docs/math/global-sensitivity.md §1.3): C under both adjacencies ungrouped
(``count_rows_sensitivity``); per public group, the count vector of a unit's C rows in at most C0
groups (``histogram_sensitivity``: L1 min(C, C0 C_inf), L2 sqrt(M); twice / sqrt(2) times that under
replace, where the replaced unit leaves some groups and its replacement enters others).
Mechanisms: Laplace (default, pure ε), Gaussian ((ε, δ)), geometric (pure ε, integer noise).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from dpsense.engine import count_rows
from dpsense.query import _aggregates as aggregates
from dpsense.query._aggregates import Aggregate, AggregateKind
from dpsense.query._ir import AggregateIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query._parts import StepPart
from dpsense.query._planner_rules import count_sensitivity
from dpsense.query.planner import PlanStep
from dpsense.sensitivity import Sqrt
from dpsense.statistics import _steps
from dpsense.statistics._base import COUNTING, SHARED_FIELDS, Facts, Fields, Produced, Runner, Statistic, common_fields
from dpsense.statistics._steps import Output, accuracy_note, error_bounds


class Count(Statistic):
    """The number of rows (bounded to C per unit)."""

    kind: ClassVar[AggregateKind] = AggregateKind.COUNT
    mechanisms: ClassVar[tuple[Mechanism, ...]] = COUNTING
    fields: ClassVar[Fields] = (SHARED_FIELDS, frozenset())

    def from_fields(self, f: Mapping[str, Any]) -> Aggregate:
        """``{kind: count, max_rows_per_unit?, mechanism?}``."""
        return aggregates.count(**common_fields(f))

    def sensitivity(self, agg: AggregateIR, part: StepPart, facts: Facts) -> Fraction | Sqrt:
        """Rows counted, overall or per public group."""
        return count_sensitivity(
            adjacency=facts.adjacency,
            rows=facts.bounded_rows(agg),
            groups=facts.groups,
            grouped=facts.grouped,
            norm=facts.norm,
        )

    def additive_specs(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> tuple[int, list[Any]] | None:
        """The rows of the view bounded to C per unit."""
        return runner.step_rows(steps[0]), [count_rows(f"{agg.name}|n")]

    def run(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> Produced:
        """The noisy counts, rounded to integers >= 0."""
        return release_counts(runner, agg, steps[0])


def release_counts(runner: Runner, agg: AggregateIR, step: PlanStep) -> Produced:
    """The noisy count of every group (or key), rounded to an integer, negatives set to 0 (post-processing)."""
    rows = runner.fetched(agg, [step])
    counts = np.array([r.counts[f"{agg.name}|n"] for r in rows], dtype=np.int64)
    result = _steps.additive_noise(step, counts)
    values = [max(0, round(float(v))) for v in np.atleast_1d(result.value)]
    error = error_bounds(result, len(values))
    out = Output(agg.name, values, error, accuracy_note(result), ["rounded to an integer, negatives set to 0"])
    if agg.kind is AggregateKind.HISTOGRAM:
        out.post_processing.append(f"one value per public key of {agg.columns[0]!r}, in key order")
    return [out], [result.loss]
