"""min_distance: the smallest distance between two points (coordinates in a public box), add/remove only.

Data-dependent (docs/math/closest-pair.md): smooth sensitivity with Cauchy noise (default), inverse
sensitivity, or Propose-Test-Release; the global sensitivity is the box's diameter, which is useless.
Released for the whole dataset; each call runs at ε / M (``unit_record_cost``).
"""

from __future__ import annotations

from typing import ClassVar

from dpsense.query._aggregates import AggregateKind
from dpsense.query._ir import AggregateIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query.planner import PlanStep
from dpsense.statistics._base import M, Produced, Runner
from dpsense.statistics._smooth_default import SmoothDefault


class MinDistance(SmoothDefault):
    """The closest pair's distance."""

    kind: ClassVar[AggregateKind] = AggregateKind.MIN_DISTANCE
    mechanisms: ClassVar[tuple[Mechanism, ...]] = (
        M.SMOOTH_MIN_DISTANCE,
        M.INVERSE_SENSITIVITY_MIN_DISTANCE,
        M.PTR_MIN_DISTANCE,
    )

    def run(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> Produced:
        """Over the whole view: the closest pair of the bounded points."""
        output, losses = runner.min_distance(agg, steps[0])
        return [output], losses
