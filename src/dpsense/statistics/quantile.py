"""median and quantile: the q-quantile (median: q = 1/2) of a numeric column within the public bounds.

Data-dependent: no global sensitivity. Mechanisms (docs/math/order-statistics.md,
docs/math/exponential-mechanism.md): the exponential-mechanism quantile (the default at every ε under
both adjacencies, with Δu = max(q, 1 − q) under add/remove and 1 under replace, integer candidates for
integer columns and decimal points beside the cells of numeric ones), inverse sensitivity, smooth sensitivity
with Cauchy noise and Propose-Test-Release; the last two run on values resized to a noisy count, a
public n (a count step first). A unit's change costs M record changes over the groups
(``_planner_rules.unit_record_cost``): each call runs at ε / M, and group privacy gives ε for the unit.
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
from dpsense.query._planner_rules import Choice
from dpsense.query.planner import PlanStep
from dpsense.statistics._base import (
    NUMERIC_FIELDS,
    PTR_FIELDS,
    Fields,
    M,
    Produced,
    Runner,
    Statistic,
    bounds_field,
    common_fields,
    needs_public_n,
    public_n_weight,
)


class Quantile(Statistic):
    """The q-quantile (an order statistic of the private n values)."""

    kind: ClassVar[AggregateKind] = AggregateKind.QUANTILE
    mechanisms: ClassVar[tuple[Mechanism, ...]] = (
        M.EM_QUANTILE,
        M.INVERSE_SENSITIVITY_ORDER_STATISTIC,
        M.SMOOTH_QUANTILE,
        M.PTR_ORDER_STATISTIC,
    )
    data_dependent: ClassVar[bool] = True
    collects: ClassVar[bool] = True
    fields: ClassVar[Fields] = (NUMERIC_FIELDS | PTR_FIELDS | {"q"}, frozenset({"column", "q"}))

    def from_fields(self, f: Mapping[str, Any]) -> Aggregate:
        """``{kind: quantile, column, q, bounds?, proposed_bound?, max_rows_per_unit?, mechanism?}``."""
        return aggregates.quantile(
            f["column"], f["q"], bounds=bounds_field(f), proposed_bound=f.get("proposed_bound"), **common_fields(f)
        )

    def default(self, agg: AggregateIR, *, mechanism_epsilon: Fraction, adjacency: Adjacency) -> Choice:
        """The exponential-mechanism quantile at every ε, under both adjacencies.

        Under add/remove its rank utility has sensitivity max(q, 1 − q) (docs/math/exponential-mechanism.md
        §8.2), which halves its rank error for the median; inverse sensitivity's path length stays
        1-Lipschitz. Under replace (Δu = 1) the two are close on continuous data and the EM's integer
        candidates and decimal points release ties exactly (benchmarks/replace_median.py; docs/planner.md).
        """
        if adjacency is Adjacency.ADD_REMOVE:
            return Choice(M.EM_QUANTILE, "default", "the default for quantiles under add/remove adjacency")
        return Choice(M.EM_QUANTILE, "default", "the default for quantiles under replace adjacency")

    def budget_weight(self, part: StepPart) -> Fraction:
        """The value step takes 9/10 of the statistic's ε when a noisy count makes n public (``public_n_weight``)."""
        return public_n_weight(part)

    def parts(
        self, agg: AggregateIR, *, adjacency: Adjacency, public_n: int | None, grouped: bool
    ) -> tuple[StepPart, ...]:
        """A noisy count first for the resized (smooth, PTR) mechanisms; else the value alone."""
        return (StepPart.COUNT, StepPart.VALUE) if needs_public_n(agg) else (StepPart.VALUE,)

    def run(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> Produced:
        """Per group: the EM or inverse-sensitivity order statistic, or the resized release on a noisy n."""
        output, losses = runner.order_statistic(agg, steps)
        return [output], losses


class Median(Quantile):
    """The median: the quantile at q = 1/2 (lower median), with its own inverse-sensitivity form."""

    kind: ClassVar[AggregateKind] = AggregateKind.MEDIAN
    mechanisms: ClassVar[tuple[Mechanism, ...]] = (
        M.EM_QUANTILE,
        M.INVERSE_SENSITIVITY_MEDIAN,
        M.SMOOTH_MEDIAN,
        M.PTR_ORDER_STATISTIC,
    )
    fields: ClassVar[Fields] = (NUMERIC_FIELDS | PTR_FIELDS, frozenset({"column"}))

    def from_fields(self, f: Mapping[str, Any]) -> Aggregate:
        """``{kind: median, column, bounds?, proposed_bound?, max_rows_per_unit?, mechanism?}``."""
        return aggregates.median(
            f["column"], bounds=bounds_field(f), proposed_bound=f.get("proposed_bound"), **common_fields(f)
        )
