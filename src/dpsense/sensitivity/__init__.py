"""Layer 1: global sensitivities and contribution bounding, pure math over numbers and numpy arrays.

Every sensitivity is stated for one declared adjacency (``Adjacency.ADD_REMOVE`` or ``REPLACE``)
and for the privacy unit (a person owning up to C rows), never for a single row. Results are exact
``Fraction`` values; the irrational replace-L2 histogram sensitivity is a ``Sqrt`` that keeps its
exact square and rounds up on conversion.

* ``bounds``: public declarations (``Bounds``, ``ContributionBound``, ``window_max_rows``).
* ``global_``: count, distinct-unit count, sum, centered sum, public-n mean and histogram
  sensitivities (docs/math/global-sensitivity.md).
* ``mean``: the private-n mean as a noisy centered sum plus a noisy count, then post-processing.
* ``contribution``: clipping, random per-unit row bounding and exact summation on arrays.

Beyond global sensitivity (data-dependent; nothing computed by these modules may leave the process):

* ``smooth``: the monotone-family lemma: smooth upper bounds with the tail term, PTR distances,
  person-level families.
* ``order_statistics``, ``trimmed_mean``, ``closest_pair``, ``triangles``: exact local
  sensitivities (analysis only, never used alone to calibrate noise), monotone families and fast
  smooth sensitivities.
"""

from dpsense.sensitivity.bounds import Bounds, ContributionBound, window_max_rows
from dpsense.sensitivity.contribution import ExactSum, bound_rows_per_unit, clip, exact_clipped_sum
from dpsense.sensitivity.global_ import (
    Norm,
    Sqrt,
    centered_sum_sensitivity,
    count_rows_sensitivity,
    count_units_sensitivity,
    histogram_sensitivity,
    mean_sensitivity_public_n,
    sum_sensitivity,
)
from dpsense.sensitivity.mean import MeanPlan, mean_from_noisy, mean_private_n_plan

__all__ = [
    "Bounds",
    "ContributionBound",
    "ExactSum",
    "MeanPlan",
    "Norm",
    "Sqrt",
    "bound_rows_per_unit",
    "centered_sum_sensitivity",
    "clip",
    "count_rows_sensitivity",
    "count_units_sensitivity",
    "exact_clipped_sum",
    "histogram_sensitivity",
    "mean_from_noisy",
    "mean_private_n_plan",
    "mean_sensitivity_public_n",
    "sum_sensitivity",
    "window_max_rows",
]
