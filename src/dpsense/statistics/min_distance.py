"""min_distance: the smallest distance between two points (coordinates in a public box), add/remove only.

Data-dependent (docs/math/closest-pair.md): smooth sensitivity with Cauchy noise (default), inverse
sensitivity, or Propose-Test-Release; the global sensitivity is the box's diameter, which is useless.
Released for the whole dataset; each call runs at ε / M (``unit_record_cost``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import UnsupportedRequest
from dpsense.query import _aggregates as aggregates
from dpsense.query._aggregates import Aggregate, AggregateKind
from dpsense.query._ir import AggregateIR, QueryIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query.planner import Plan, PlanStep
from dpsense.statistics._base import PTR_FIELDS, SHARED_FIELDS, Fields, M, Produced, Runner, bounds_field, common_fields
from dpsense.statistics._smooth_default import SmoothDefault


class MinDistance(SmoothDefault):
    """The closest pair's distance."""

    kind: ClassVar[AggregateKind] = AggregateKind.MIN_DISTANCE
    mechanisms: ClassVar[tuple[Mechanism, ...]] = (
        M.SMOOTH_MIN_DISTANCE,
        M.INVERSE_SENSITIVITY_MIN_DISTANCE,
        M.PTR_MIN_DISTANCE,
    )
    fields: ClassVar[Fields] = (SHARED_FIELDS | PTR_FIELDS | {"columns", "bounds"}, frozenset({"columns"}))

    def from_fields(self, f: Mapping[str, Any]) -> Aggregate:
        """``{kind: min_distance, columns, bounds?, proposed_bound?, max_rows_per_unit?, mechanism?}``."""
        return aggregates.min_distance(
            f["columns"], bounds=bounds_field(f), proposed_bound=f.get("proposed_bound"), **common_fields(f)
        )

    def check_executable(self, ir: QueryIR, agg: AggregateIR, plan: Plan) -> None:
        """Add/remove only, for the whole dataset, in a box (equal bounds on every coordinate)."""
        if plan.adjacency is not Adjacency.ADD_REMOVE:
            raise UnsupportedRequest(
                "min_distance runs per record under add/remove; replacing a unit's rows changes the number "
                "of records, so the release system runs it only on add/remove datasets",
                agg.name,
                "register the dataset with adjacency='add_remove', or call dpsense.mechanisms."
                "smooth_min_distance on an array with a public n",
            )
        if ir.group_by:
            raise UnsupportedRequest("min_distance is released for the whole dataset", agg.name, "drop group_by")
        if len(set(agg.bounds)) != 1:
            raise UnsupportedRequest(
                "min_distance needs the same public bounds on every coordinate (a box)",
                agg.name,
                "declare equal bounds for the point columns, or pass bounds=(L, U)",
            )

    def run(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> Produced:
        """Over the whole view: the closest pair of the bounded points."""
        output, losses = runner.min_distance(agg, steps[0])
        return [output], losses
