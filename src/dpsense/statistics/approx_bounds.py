"""approx_bounds: private approximate bounds [low, high] of a numeric column, for choosing a clip.

A geometric-noise histogram over public log2 bins (L1 sensitivity C, 2C under replace: the count
vector of ``histogram``), thresholded by post-processing (``dpsense.mechanisms.approx_bounds``;
pure ε-DP; docs/math/global-sensitivity.md). Released ungrouped, as two columns ``<name>_low`` and
``<name>_high`` (powers of two, or null when no bin had enough rows).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpsense import mechanisms as mech
from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import InternalError, UnsupportedRequest, UsageError
from dpsense.core.privacy_loss import PrivacyLoss
from dpsense.mechanisms.approx_bounds import LARGEST_EXPONENT, SMALLEST_EXPONENT
from dpsense.query import _aggregates as aggregates
from dpsense.query._aggregates import Aggregate, AggregateKind
from dpsense.query._ir import AggregateIR, QueryIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query._parts import StepPart
from dpsense.query._planner_rules import Choice, count_sensitivity
from dpsense.query._rules import Facts
from dpsense.query.planner import Plan, PlanStep
from dpsense.sensitivity import Sqrt
from dpsense.statistics._base import SHARED_FIELDS, Fields, Produced, Runner, Statistic, common_fields
from dpsense.statistics._steps import Output, check_result_loss


class ApproxBounds(Statistic):
    """The log2 histogram of one column's values, thresholded."""

    kind: ClassVar[AggregateKind] = AggregateKind.APPROX_BOUNDS
    mechanisms: ClassVar[tuple[Mechanism, ...]] = (Mechanism.APPROX_BOUNDS,)
    collects: ClassVar[bool] = True
    fields: ClassVar[Fields] = (SHARED_FIELDS | {"column"}, frozenset({"column"}))

    def from_fields(self, f: Mapping[str, Any]) -> Aggregate:
        """``{kind: approx_bounds, column, max_rows_per_unit?, mechanism?}``."""
        return aggregates.approx_bounds(f["column"], **common_fields(f))

    def default(self, agg: AggregateIR, *, mechanism_epsilon: Fraction, adjacency: Adjacency) -> Choice:
        """Its only mechanism."""
        return Choice(Mechanism.APPROX_BOUNDS, "default", "the only mechanism for approximate bounds")

    def sensitivity(self, agg: AggregateIR, part: StepPart, facts: Facts) -> Fraction | Sqrt:
        """The log2 bins' count vector (a histogram over public bins)."""
        return count_sensitivity(
            adjacency=facts.adjacency, rows=facts.bounded_rows(agg), groups=facts.groups, grouped=True, norm=facts.norm
        )

    def check_executable(self, ir: QueryIR, agg: AggregateIR, plan: Plan) -> None:
        """Released for the whole dataset, as two columns whose names must be free."""
        if ir.group_by:
            raise UnsupportedRequest(
                "approx_bounds is released for the whole dataset", agg.name, "drop group_by (bounds are per column)"
            )
        taken = {a.name for a in ir.aggregates}
        clash = [n for n in bounds_output_names(agg.name) if n in taken]
        if clash:
            raise UsageError(
                f"approx_bounds {agg.name!r} releases the columns {' and '.join(bounds_output_names(agg.name))}",
                clash[0],
                "rename one of the two aggregates",
            )

    def run(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> Produced:
        """The mechanism on the column's present values (one group: released ungrouped)."""
        values = runner.present_values(agg, steps[0])[0]
        return release_bounds(agg, steps[0], values, runner.plan.adjacency)


#: The public success probability: the chance that no empty bin passes the threshold.
SUCCESS_PROBABILITY = 0.95


def bounds_output_names(name: str) -> tuple[str, str]:
    """The two output columns of ``approx_bounds`` named ``name``."""
    return f"{name}_low", f"{name}_high"


def release_bounds(
    agg: AggregateIR, step: PlanStep, values: NDArray[np.float64], adjacency: Adjacency
) -> tuple[list[Output], list[PrivacyLoss]]:
    """Run the approximate-bounds mechanism on one column's bounded values at the step's budget."""
    rows = step.max_rows_per_unit
    if rows is None or step.sensitivity != Fraction(2 * rows if adjacency is Adjacency.REPLACE else rows):
        raise InternalError(f"step {step.output!r} is not the planned log2 histogram of C rows per unit")
    result = mech.approx_bounds(
        values,
        epsilon=step.loss.epsilon,
        max_rows_per_unit=rows,
        replace=adjacency is Adjacency.REPLACE,
        success_probability=SUCCESS_PROBABILITY,
    )
    check_result_loss(result, step.loss, step)
    note = (
        f"approx_bounds: public log2 bins from ±2^{SMALLEST_EXPONENT} to ±2^{LARGEST_EXPONENT}, each with discrete "
        f"Laplace noise of scale {step.sensitivity}/ε; a bound is the outer edge of the outermost bin whose noisy "
        f"count reaches {result.threshold} (with probability {SUCCESS_PROBABILITY:g} no empty bin does); rows in "
        "sparser bins (outliers) lie outside the bounds on purpose; null when no bin reached the threshold"
    )
    post = ["the bounds are bin edges (powers of two): post-processing of the noisy histogram"]
    low_name, high_name = bounds_output_names(agg.name)
    return [
        Output(low_name, [result.low], [None], note, post),
        Output(high_name, [result.high], [None], note, list(post)),
    ], [result.loss]
