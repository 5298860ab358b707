"""histogram: counts per value of a categorical column over public keys (released alone, keys as rows).

A unit's C rows fall in at most C keys: the per-key count vector has ``histogram_sensitivity``
(docs/math/global-sensitivity.md §1.3; L1 min(C, C0 C_inf), doubled under replace). Mechanisms: Laplace (default),
Gaussian, geometric. Keys must be public (declared); private key selection is for grouped counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any, ClassVar

from dpsense.core.errors import UnsupportedRequest
from dpsense.query import _aggregates as aggregates
from dpsense.query._aggregates import Aggregate, AggregateKind
from dpsense.query._ir import AggregateIR, QueryIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query._parts import StepPart
from dpsense.query._planner_rules import count_sensitivity
from dpsense.query.planner import Plan
from dpsense.sensitivity import Sqrt
from dpsense.statistics._base import COUNTING, SHARED_FIELDS, Facts, Fields, common_fields
from dpsense.statistics.count import Count


class Histogram(Count):
    """Counts per public key of one column."""

    kind: ClassVar[AggregateKind] = AggregateKind.HISTOGRAM
    mechanisms: ClassVar[tuple[Mechanism, ...]] = COUNTING
    fields: ClassVar[Fields] = (SHARED_FIELDS | {"column", "keys"}, frozenset({"column"}))

    def from_fields(self, f: Mapping[str, Any]) -> Aggregate:
        """``{kind: histogram, column, keys?, max_rows_per_unit?, mechanism?}``."""
        return aggregates.histogram(f["column"], f.get("keys"), **common_fields(f))

    def sensitivity(self, agg: AggregateIR, part: StepPart, facts: Facts) -> Fraction | Sqrt:
        """The count vector over the public keys (always grouped: the keys are its groups)."""
        return count_sensitivity(
            adjacency=facts.adjacency, rows=facts.bounded_rows(agg), groups=facts.groups, grouped=True, norm=facts.norm
        )

    def check_executable(self, ir: QueryIR, agg: AggregateIR, plan: Plan) -> None:
        """A histogram is released alone: its public keys are the rows."""
        if ir.group_by or len(ir.aggregates) > 1:
            raise UnsupportedRequest(
                "a histogram is released on its own (one row per public key)",
                agg.name,
                f"release it alone, or use group_by({agg.columns[0]!r}, keys=[...]).agg({agg.name}=count())",
            )
