"""Layer 1: mechanisms. Each returns a ``MechanismResult`` (noisy value, privacy loss, public accuracy).

Every mechanism states its guarantee, the adjacency it holds under and its theorem in its module
docstring; all randomness comes from ``dpsense.noise``.
"""

from dpsense.mechanisms.approx_bounds import ApproxBounds, approx_bounds
from dpsense.mechanisms.clipped_mean import clipped_mean
from dpsense.mechanisms.discrete import discrete_gaussian, geometric, geometric_accuracy
from dpsense.mechanisms.exponential import exponential_mechanism, report_noisy_max
from dpsense.mechanisms.gaussian import gaussian, gaussian_accuracy
from dpsense.mechanisms.inverse_family import (
    inverse_sensitivity_min_distance,
    inverse_sensitivity_triangle_count,
    inverse_sensitivity_trimmed_mean,
    inverse_sensitivity_with_family,
)
from dpsense.mechanisms.inverse_sensitivity import inverse_sensitivity_median, inverse_sensitivity_order_statistic
from dpsense.mechanisms.joint_quantiles import recursive_quantiles
from dpsense.mechanisms.laplace import laplace, laplace_accuracy
from dpsense.mechanisms.local import (
    k_ary_randomized_response,
    optimized_unary_encoding,
    randomized_response,
)
from dpsense.mechanisms.local_estimators import (
    estimate_counts_grr,
    estimate_counts_oue,
    estimate_proportion_rr,
)
from dpsense.mechanisms.partition_selection import PartitionSelection, select_partitions
from dpsense.mechanisms.ptr import Refusal, propose_test_release, ptr_with_family
from dpsense.mechanisms.ptr_statistics import (
    ptr_min_distance,
    ptr_order_statistic,
    ptr_triangle_count,
    ptr_trimmed_mean,
)
from dpsense.mechanisms.quantile import em_quantile, em_quantile_groups, em_quantiles
from dpsense.mechanisms.result import Accuracy, MechanismResult
from dpsense.mechanisms.smooth import (
    smooth_median,
    smooth_min_distance,
    smooth_quantile,
    smooth_triangle_count,
    smooth_trimmed_mean,
)
from dpsense.mechanisms.subsample_aggregate import subsample_and_aggregate

__all__ = [
    "Accuracy",
    "ApproxBounds",
    "MechanismResult",
    "PartitionSelection",
    "Refusal",
    "approx_bounds",
    "clipped_mean",
    "discrete_gaussian",
    "em_quantile",
    "em_quantile_groups",
    "em_quantiles",
    "estimate_counts_grr",
    "estimate_counts_oue",
    "estimate_proportion_rr",
    "exponential_mechanism",
    "gaussian",
    "gaussian_accuracy",
    "geometric",
    "geometric_accuracy",
    "inverse_sensitivity_median",
    "inverse_sensitivity_min_distance",
    "inverse_sensitivity_order_statistic",
    "inverse_sensitivity_triangle_count",
    "inverse_sensitivity_trimmed_mean",
    "inverse_sensitivity_with_family",
    "k_ary_randomized_response",
    "laplace",
    "laplace_accuracy",
    "optimized_unary_encoding",
    "propose_test_release",
    "ptr_min_distance",
    "ptr_order_statistic",
    "ptr_triangle_count",
    "ptr_trimmed_mean",
    "ptr_with_family",
    "randomized_response",
    "recursive_quantiles",
    "report_noisy_max",
    "select_partitions",
    "smooth_median",
    "smooth_min_distance",
    "smooth_quantile",
    "smooth_triangle_count",
    "smooth_trimmed_mean",
    "subsample_and_aggregate",
]
