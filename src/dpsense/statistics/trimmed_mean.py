"""trimmed_mean: the mean after dropping a fraction t of the rows from each tail (0 <= t < 1/2).

Data-dependent, on values resized to a noisy count n^ (a count step first): smooth sensitivity with
Cauchy noise (default; Bun-Steinke 2019 section 4, docs/math/order-statistics.md §4.3), inverse
sensitivity, or Propose-Test-Release. Each call runs at ε / M (``unit_record_cost``).
"""

from __future__ import annotations

from typing import ClassVar

from dpsense.core.adjacency import Adjacency
from dpsense.query._aggregates import AggregateKind
from dpsense.query._ir import AggregateIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query._parts import StepPart
from dpsense.query.planner import PlanStep
from dpsense.statistics._base import M, Produced, Runner
from dpsense.statistics._smooth_default import SmoothDefault


class TrimmedMean(SmoothDefault):
    """A trimmed mean over a noisy n."""

    kind: ClassVar[AggregateKind] = AggregateKind.TRIMMED_MEAN
    mechanisms: ClassVar[tuple[Mechanism, ...]] = (
        M.SMOOTH_TRIMMED_MEAN,
        M.INVERSE_SENSITIVITY_TRIMMED_MEAN,
        M.PTR_TRIMMED_MEAN,
    )

    def parts(
        self, agg: AggregateIR, *, adjacency: Adjacency, public_n: int | None, grouped: bool
    ) -> tuple[StepPart, ...]:
        """A noisy count (the public n^ the values are resized to), then the value."""
        return (StepPart.COUNT, StepPart.VALUE)

    def run(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> Produced:
        """Per group: a noisy count as the public n, then the floor(t n^)-trimmed mean."""
        output, losses = runner.trimmed_mean(agg, steps)
        return [output], losses
