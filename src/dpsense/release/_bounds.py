"""The release step of ``approx_bounds``: two output columns from one charged noisy log2 histogram.

The values are the bounded rows of the statistic's column (at most C per unit, the release's salted
bound); ``dpsense.mechanisms.approx_bounds`` noises every public bin at the step's ε with the plan's
L1 sensitivity (C, or 2C under replace) and keeps what the threshold lets through. Only the two
bounds (powers of two, or None) and public constants leave this module.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpsense import mechanisms as mech
from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import InternalError
from dpsense.core.privacy_loss import PrivacyLoss
from dpsense.mechanisms.approx_bounds import LARGEST_EXPONENT, SMALLEST_EXPONENT
from dpsense.query import AggregateIR, PlanStep
from dpsense.release._steps import Output, check_result_loss

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
