"""trimmed_mean: the mean after dropping a fraction t of the rows from each tail (0 <= t < 1/2).

Data-dependent, on values resized to a noisy count n^ (a count step first): smooth sensitivity with
Cauchy noise (default; Bun-Steinke 2019 section 4, docs/math/order-statistics.md §4.3), inverse
sensitivity, or Propose-Test-Release. Each call runs at ε / M (``unit_record_cost``).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any, ClassVar

from dpsense.core.adjacency import Adjacency
from dpsense.query import _aggregates as aggregates
from dpsense.query._aggregates import Aggregate, AggregateKind
from dpsense.query._ir import AggregateIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query._parts import StepPart
from dpsense.query.planner import PlanStep
from dpsense.statistics._base import (
    NUMERIC_FIELDS,
    PTR_FIELDS,
    Fields,
    M,
    Produced,
    Runner,
    bounds_field,
    common_fields,
    public_n_weight,
)
from dpsense.statistics._smooth_default import SmoothDefault


class TrimmedMean(SmoothDefault):
    """A trimmed mean over a noisy n."""

    kind: ClassVar[AggregateKind] = AggregateKind.TRIMMED_MEAN
    mechanisms: ClassVar[tuple[Mechanism, ...]] = (
        M.SMOOTH_TRIMMED_MEAN,
        M.INVERSE_SENSITIVITY_TRIMMED_MEAN,
        M.PTR_TRIMMED_MEAN,
    )
    fields: ClassVar[Fields] = (NUMERIC_FIELDS | PTR_FIELDS | {"trim_fraction"}, frozenset({"column", "trim_fraction"}))

    def from_fields(self, f: Mapping[str, Any]) -> Aggregate:
        """``{kind: trimmed_mean, column, trim_fraction, bounds?, proposed_bound?, ...}``."""
        return aggregates.trimmed_mean(
            f["column"],
            f["trim_fraction"],
            bounds=bounds_field(f),
            proposed_bound=f.get("proposed_bound"),
            **common_fields(f),
        )

    def budget_weight(self, part: StepPart) -> Fraction:
        """The value step takes 9/10 of the statistic's ε when a noisy count makes n public (``public_n_weight``)."""
        return public_n_weight(part)

    def parts(
        self, agg: AggregateIR, *, adjacency: Adjacency, public_n: int | None, grouped: bool
    ) -> tuple[StepPart, ...]:
        """A noisy count (the public n^ the values are resized to), then the value."""
        return (StepPart.COUNT, StepPart.VALUE)

    def run(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> Produced:
        """Per group: a noisy count as the public n, then the floor(t n^)-trimmed mean."""
        output, losses = runner.trimmed_mean(agg, steps)
        return [output], losses
