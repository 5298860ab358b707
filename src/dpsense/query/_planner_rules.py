"""The planner's public rule tables: which mechanisms each statistic may use, the defaults, the theorems.

Everything here is a function of public facts only (the statistic, the declared adjacency, the schema's
bounds, the contribution bounds, the budget share); nothing reads data. Mechanisms are named, not
imported: the planner is L3 and ``release/`` maps the names to ``dpsense.mechanisms`` when it executes.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import UsageError
from dpsense.query._aggregates import AggregateKind
from dpsense.query._ir import AggregateIR
from dpsense.sensitivity import (
    Bounds,
    ContributionBound,
    Norm,
    Sqrt,
    centered_sum_sensitivity,
    count_rows_sensitivity,
    count_units_sensitivity,
    histogram_sensitivity,
    mean_sensitivity_public_n,
    sum_sensitivity,
)

_COUNTING = ("laplace", "gaussian", "geometric")
_ADDITIVE = ("laplace", "gaussian")

#: The mechanisms an analyst may name per statistic (names of ``dpsense.mechanisms`` functions); the
#: first entry of the additive statistics is the default.
ALLOWED_MECHANISMS: dict[AggregateKind, tuple[str, ...]] = {
    AggregateKind.COUNT: _COUNTING,
    AggregateKind.CLIPPED_COUNT: _COUNTING,
    AggregateKind.COUNT_UNITS: _COUNTING,
    AggregateKind.HISTOGRAM: _COUNTING,
    AggregateKind.SUM: _ADDITIVE,
    AggregateKind.MEAN: _ADDITIVE,
    AggregateKind.MEDIAN: ("em_quantile", "inverse_sensitivity_median", "smooth_median", "ptr_order_statistic"),
    AggregateKind.QUANTILE: (
        "em_quantile",
        "inverse_sensitivity_order_statistic",
        "smooth_quantile",
        "ptr_order_statistic",
    ),
    AggregateKind.TRIMMED_MEAN: ("smooth_trimmed_mean", "inverse_sensitivity_trimmed_mean", "ptr_trimmed_mean"),
    AggregateKind.MIN_DISTANCE: ("smooth_min_distance", "inverse_sensitivity_min_distance", "ptr_min_distance"),
    AggregateKind.TRIANGLE_COUNT: (
        "smooth_triangle_count",
        "inverse_sensitivity_triangle_count",
        "ptr_triangle_count",
    ),
    AggregateKind.VARIANCE: _ADDITIVE,
    AggregateKind.APPROX_BOUNDS: ("approx_bounds",),
}

#: Mechanisms whose noise is calibrated to the global sensitivity the planner computes (approximate
#: bounds: the L1 sensitivity of its log-binned histogram).
GLOBAL_MECHANISMS = frozenset((*_COUNTING, "approx_bounds"))

#: benchmarks/accuracy.py DEFAULTS: ("median", 0.1) -> "em", ("median", 1.0) -> "invsens". The
#: exponential-mechanism quantile wins below ε = 1 and inverse sensitivity from ε = 1 on the synthetic
#: panel; the same threshold is used for other quantiles (the order-statistic form of the same mechanism).
QUANTILE_INVSENS_FROM_EPSILON = Fraction(1)

#: benchmarks/accuracy.py DEFAULTS: "smooth_cauchy" for min_distance and triangles at ε = 0.1 and 1.0
#: (and for the mean row, which there is a trimmed mean): smooth sensitivity with Cauchy noise, pure ε-DP.
_SMOOTH_DEFAULT = {
    AggregateKind.TRIMMED_MEAN: "smooth_trimmed_mean",
    AggregateKind.MIN_DISTANCE: "smooth_min_distance",
    AggregateKind.TRIANGLE_COUNT: "smooth_triangle_count",
}

_PTR = "Propose-Test-Release with a distance-to-instability test, Dwork-Lei 2009 (ALGORITHMS.md section 5)"

THEOREMS: dict[str, str] = {
    "laplace": "Laplace mechanism, Dwork-Roth Thm 3.6",
    "geometric": "geometric mechanism, Ghosh-Roughgarden-Sundararajan 2009",
    "gaussian": "analytic Gaussian mechanism, Balle-Wang 2018 Thm 8",
    "em_quantile": "exponential-mechanism quantile, Smith 2011 and Dwork-Roth Thm 3.10",
    "inverse_sensitivity_median": "inverse sensitivity mechanism, Asi-Duchi 2020",
    "inverse_sensitivity_order_statistic": "inverse sensitivity mechanism, Asi-Duchi 2020",
    "inverse_sensitivity_trimmed_mean": "inverse sensitivity mechanism, Asi-Duchi 2020",
    "inverse_sensitivity_min_distance": "inverse sensitivity mechanism, Asi-Duchi 2020",
    "inverse_sensitivity_triangle_count": "inverse sensitivity mechanism, Asi-Duchi 2020",
    "smooth_median": "smooth sensitivity with Cauchy noise, Nissim-Raskhodnikova-Smith 2007",
    "smooth_quantile": "smooth sensitivity with Cauchy noise, Nissim-Raskhodnikova-Smith 2007",
    "smooth_trimmed_mean": "smooth sensitivity with Cauchy noise, Nissim-Raskhodnikova-Smith 2007",
    "smooth_min_distance": "smooth sensitivity with Cauchy noise, Nissim-Raskhodnikova-Smith 2007",
    "smooth_triangle_count": "smooth sensitivity with Cauchy noise, Nissim-Raskhodnikova-Smith 2007",
    "approx_bounds": "noisy log2-binned histogram (geometric mechanism, Ghosh-Roughgarden-Sundararajan 2009) "
    "thresholded by post-processing, as Google's ApproxBounds",
    "ptr_order_statistic": _PTR,
    "ptr_trimmed_mean": _PTR,
    "ptr_min_distance": _PTR,
    "ptr_triangle_count": _PTR,
}


@dataclass(frozen=True)
class Choice:
    """A mechanism for one statistic, who chose it and why."""

    mechanism: str
    chosen_by: str
    reason: str

    @property
    def uses_delta(self) -> bool:
        """True for the (ε, δ) mechanisms (Gaussian, Propose-Test-Release); every other one is pure ε-DP."""
        return self.mechanism == "gaussian" or self.is_ptr

    @property
    def is_ptr(self) -> bool:
        """True for Propose-Test-Release (it answers or refuses, and needs δ > 0)."""
        return self.mechanism.startswith("ptr_")

    @property
    def noise(self) -> str | None:
        """The noise family of a smooth-sensitivity release (Cauchy: pure ε-DP), else ``None``."""
        return "cauchy" if self.mechanism.startswith("smooth_") else None


def choose(agg: AggregateIR, *, mechanism_epsilon: Fraction, delta: Fraction) -> Choice:
    """The analyst's valid override, else the public default for this statistic and ε."""
    allowed = ALLOWED_MECHANISMS[agg.kind]
    if agg.mechanism is not None:
        if agg.mechanism not in allowed:
            raise UsageError(
                f"mechanism {agg.mechanism!r} is not valid for {agg.kind.value} {agg.name!r}",
                agg.mechanism,
                f"use one of: {', '.join(allowed)}, or omit mechanism= for the default",
            )
        if agg.mechanism == "gaussian" and delta == 0:
            raise UsageError(
                f"the Gaussian mechanism for {agg.name!r} needs delta > 0",
                agg.mechanism,
                "pass delta > 0 to the release, or use mechanism='laplace' for pure ε-DP",
            )
        if agg.mechanism.startswith("ptr_") and delta == 0:
            raise UsageError(
                f"Propose-Test-Release for {agg.name!r} needs delta > 0 (its test fails to refuse with chance δ)",
                agg.mechanism,
                "pass delta > 0 to the release, or omit mechanism= for a pure ε-DP default",
            )
        return Choice(agg.mechanism, "analyst", "requested by the analyst")
    if agg.kind in (AggregateKind.MEDIAN, AggregateKind.QUANTILE):
        if mechanism_epsilon >= QUANTILE_INVSENS_FROM_EPSILON:
            name = "inverse_sensitivity_median" if agg.kind is AggregateKind.MEDIAN else allowed[1]
            return Choice(name, "default", "the accuracy benchmark's default for quantiles at ε >= 1")
        return Choice("em_quantile", "default", "the accuracy benchmark's default for quantiles at ε < 1")
    if agg.kind is AggregateKind.APPROX_BOUNDS:
        return Choice("approx_bounds", "default", "the only mechanism for approximate bounds")
    if agg.kind in _SMOOTH_DEFAULT:
        return Choice(_SMOOTH_DEFAULT[agg.kind], "default", "the accuracy benchmark's default (Cauchy noise)")
    return Choice("laplace", "default", "pure ε-DP default for additive statistics")


def norm_for(choice: Choice) -> Norm:
    """L2 for Gaussian noise, L1 for Laplace-type noise."""
    return Norm.L2 if choice.uses_delta else Norm.L1


def count_sensitivity(
    *, adjacency: Adjacency, rows: int, groups: int | None, grouped: bool, norm: Norm
) -> Fraction | Sqrt:
    """Rows counted (overall, or per public group, a unit touching at most ``groups`` groups)."""
    contribution = ContributionBound(max_rows_per_unit=rows, max_groups_per_unit=groups)
    if grouped:
        return histogram_sensitivity(norm, adjacency=adjacency, contribution=contribution)
    return count_rows_sensitivity(adjacency=adjacency, contribution=contribution)


def units_sensitivity(*, adjacency: Adjacency, groups: int | None, grouped: bool, norm: Norm) -> Fraction | Sqrt:
    """Distinct units (overall: 1; per group: one per group touched, at most ``groups`` groups)."""
    if not grouped:
        return count_units_sensitivity(adjacency=adjacency)
    if groups is None:  # guarded by the planner
        raise UsageError("a grouped count_units needs max_groups_per_unit", None, "declare max_groups_per_unit")
    contribution = ContributionBound(max_rows_per_unit=groups, max_rows_per_group=1)
    return histogram_sensitivity(norm, adjacency=adjacency, contribution=contribution)


def sum_sensitivity_for(bounds: Bounds, *, adjacency: Adjacency, rows: int, grouped: bool) -> Fraction:
    """A clipped sum (overall, or per public group).

    Per group the L1 and L2 sensitivities are at most the add/remove value C max(|L|, |U|) (all rows in
    one group is the worst case), and twice that under replace (remove one unit, add another, possibly
    in other groups).
    """
    contribution = ContributionBound(max_rows_per_unit=rows)
    if not grouped:
        return sum_sensitivity(bounds, adjacency=adjacency, contribution=contribution)
    factor = 2 if adjacency is Adjacency.REPLACE else 1
    return factor * sum_sensitivity(bounds, adjacency=Adjacency.ADD_REMOVE, contribution=contribution)


def centered_sensitivity_for(bounds: Bounds, *, adjacency: Adjacency, rows: int) -> Fraction:
    """The centered sum of a private-n mean: C(U-L)/2 add/remove, C(U-L) replace, also per group."""
    contribution = ContributionBound(max_rows_per_unit=rows)
    return centered_sum_sensitivity(bounds, adjacency=adjacency, contribution=contribution)


def squares_sensitivity(bounds: Bounds, *, rows: int) -> Fraction:
    """The sum of squared centered values (x - m)^2, m = (L + U)/2, each in [0, ((U - L)/2)^2]: C ((U - L)/2)^2.

    Add/remove: one unit adds or removes at most C terms, each in [0, h^2] with h = (U - L)/2. Replace:
    the unit's at most C terms are removed and at most C others added; both sums lie in [0, C h^2], so
    the difference is at most C h^2 as well (the terms are non-negative). Per public group the same
    bound holds (a unit's terms in all groups together are at most C).
    """
    half = (bounds.upper - bounds.lower) / 2
    return rows * half * half


def public_n_mean_sensitivity(bounds: Bounds, *, n: int, adjacency: Adjacency, rows: int) -> Fraction:
    """The mean as sum/n with a public n (replace adjacency): min(C, n)(U-L)/n."""
    contribution = ContributionBound(max_rows_per_unit=rows)
    return mean_sensitivity_public_n(bounds, n, adjacency=adjacency, contribution=contribution)
