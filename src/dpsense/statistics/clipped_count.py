"""clipped_count: the number of rows whose value lies outside the public bounds (the rows clipping moves).

A count of rows: the sensitivity of ``count`` (docs/math/global-sensitivity.md §1.3), on the same
bounded rows as the statistic it concerns. Mechanisms: Laplace (default), Gaussian, geometric.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from dpsense.core.numbers import inward_interval
from dpsense.engine import count_outside
from dpsense.query import _aggregates as aggregates
from dpsense.query._aggregates import Aggregate, AggregateKind
from dpsense.query._ir import AggregateIR
from dpsense.query.planner import PlanStep
from dpsense.statistics._base import NUMERIC_FIELDS, Fields, Runner, Statistic
from dpsense.statistics.count import Count


class ClippedCount(Count):
    """Rows outside [L, U], counted like ``count``."""

    kind: ClassVar[AggregateKind] = AggregateKind.CLIPPED_COUNT
    fields: ClassVar[Fields] = (NUMERIC_FIELDS, frozenset({"column"}))

    constructor: ClassVar[Callable[..., Aggregate] | None] = aggregates.clipped_count
    from_fields = Statistic.from_fields  # the numeric spelling, not the count's it inherits

    def additive_specs(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> tuple[int, list[Any]] | None:
        """The rows outside the bounds; a double lies in them exactly when it lies in their inward double interval."""
        lo, hi = inward_interval(*agg.bounds[0])
        return runner.step_rows(steps[0]), [count_outside(agg.columns[0], low=lo, high=hi, name=f"{agg.name}|n")]
