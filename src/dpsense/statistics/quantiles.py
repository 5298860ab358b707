"""quantiles: several quantiles of a numeric column in one release (the quartiles, the deciles, ...).

Data-dependent: no global sensitivity. The default and only mechanism, ``recursive_quantiles``
(Kaplan-Schnapp-Stemmer 2022; ``dpsense.mechanisms.joint_quantiles``): the middle quantile by the
exponential-mechanism quantile on all values, then the lower ones on the values at or below it and the
upper ones on those above, recursively; the splits of one level are disjoint (parallel composition), so
each of the m quantiles runs at ε/⌈log2(m + 1)⌉ (half that under replace) instead of the ε/m of m
separate ``quantile`` aggregates: for the quartiles 1.5x, the deciles 2.25x the ε per quantile. The
released values are sorted. Measured: benchmarks/joint_quantiles.py (median |error| 0.61x the independent
EMs' for the quartiles, 0.23x for the deciles; docs/planner.md, "Several quantiles at once"); proof:
docs/math/exponential-mechanism.md §8.4. A unit's change costs M record changes over the groups
(``_planner_rules.unit_record_cost``), as for ``quantile``: each call runs at ε/M.

One output column per quantile, ``<name>_p<100 q>`` (``_aggregates.quantile_label``).
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
from dpsense.query._planner_rules import Choice
from dpsense.query.planner import PlanStep
from dpsense.statistics._base import NUMERIC_FIELDS, Fields, M, Produced, Runner, Statistic, bounds_field, common_fields


class Quantiles(Statistic):
    """m quantiles at once, by recursive splitting (one plan step, one charge)."""

    kind: ClassVar[AggregateKind] = AggregateKind.QUANTILES
    mechanisms: ClassVar[tuple[Mechanism, ...]] = (M.RECURSIVE_QUANTILES,)
    data_dependent: ClassVar[bool] = True
    collects: ClassVar[bool] = True
    fields: ClassVar[Fields] = (NUMERIC_FIELDS | {"qs"}, frozenset({"column", "qs"}))

    def from_fields(self, f: Mapping[str, Any]) -> Aggregate:
        """``{kind: quantiles, column, qs: [0.25, 0.5, 0.75], bounds?, max_rows_per_unit?, mechanism?}``."""
        return aggregates.quantiles(f["column"], f["qs"], bounds=bounds_field(f), **common_fields(f))

    def default(self, agg: AggregateIR, *, mechanism_epsilon: Fraction, adjacency: Adjacency) -> Choice:
        """Recursive splitting at every ε, under both adjacencies (its only mechanism)."""
        return Choice(
            M.RECURSIVE_QUANTILES,
            "default",
            "several quantiles share one release: ε/⌈log2(m + 1)⌉ per quantile instead of ε/m",
        )

    def run(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> Produced:
        """Per group, the m quantiles; one output column per quantile."""
        outputs, losses = runner.joint_quantiles(agg, steps[0])
        return outputs, losses
