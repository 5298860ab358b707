"""triangle_count: the number of triangles of the graph on a public vertex set (edge-level DP).

Data-dependent (docs/math/triangles.md): smooth sensitivity with Cauchy noise (default), inverse
sensitivity, or Propose-Test-Release, edge-level; a unit's C edges (2C under replace) are the
record cost M, each call runs at ε / M (group privacy). Released for the whole graph.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from dpsense.core.errors import UnsupportedRequest
from dpsense.query import _aggregates as aggregates
from dpsense.query._aggregates import Aggregate, AggregateKind
from dpsense.query._ir import AggregateIR, QueryIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query.planner import Plan, PlanStep
from dpsense.statistics._base import PTR_FIELDS, SHARED_FIELDS, Fields, M, Produced, Runner, common_fields
from dpsense.statistics._smooth_default import SmoothDefault


class TriangleCount(SmoothDefault):
    """Triangles of the bounded edges."""

    kind: ClassVar[AggregateKind] = AggregateKind.TRIANGLE_COUNT
    mechanisms: ClassVar[tuple[Mechanism, ...]] = (
        M.SMOOTH_TRIANGLE_COUNT,
        M.INVERSE_SENSITIVITY_TRIANGLE_COUNT,
        M.PTR_TRIANGLE_COUNT,
    )
    fields: ClassVar[Fields] = (SHARED_FIELDS | PTR_FIELDS | {"columns"}, frozenset({"columns"}))

    def from_fields(self, f: Mapping[str, Any]) -> Aggregate:
        """``{kind: triangle_count, columns, proposed_bound?, max_rows_per_unit?, mechanism?}``."""
        return aggregates.triangle_count(f["columns"], proposed_bound=f.get("proposed_bound"), **common_fields(f))

    def check_executable(self, ir: QueryIR, agg: AggregateIR, plan: Plan) -> None:
        """Released for the whole graph, on a public vertex set."""
        if ir.group_by:
            raise UnsupportedRequest("a triangle count is released for the whole graph", agg.name, "drop group_by")
        if agg.keys is None:
            raise UnsupportedRequest(
                f"the triangle count {agg.name!r} needs the public vertex set",
                list(agg.columns),
                "declare it at registration as keys of both edge columns, e.g. keys={'src': ids, 'dst': ids}",
            )

    def run(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> Produced:
        """Over the whole graph: triangles of the bounded edges (edge-level)."""
        output, losses = runner.triangle_count(agg, steps[0])
        return [output], losses
