"""The mean when the number of values is private: a noisy centered sum and a noisy count, then post-processing.

Under add/remove adjacency n is private and the mean's own global sensitivity, (U - L)/2 over
datasets with n >= 1, is useless. Instead (docs/math/global-sensitivity.md, "Mean with n private"):

1. release S~ = sum(clip(x_i) - m) + noise calibrated to the centered-sum sensitivity with eps_1,
2. release n~ = n + noise calibrated to the row-count sensitivity with eps_2,
3. output clamp_[L, U](m + S~ / max(n~, d)) for a public floor d > 0.

Steps 1 and 2 together are (eps_1 + eps_2)-DP by basic composition (Dwork-Roth Thm 3.16); step 3
reads no data, so it is free post-processing (DR Prop 2.1). This module plans step 1-2 (the
sensitivities and the exact epsilon split) and performs step 3; the noise is added elsewhere.
See also NIST SP 800-226, appendix B.5 (cited by seed lesson 14.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import InvalidData, InvalidPrivacyParameter, UsageError
from dpsense.core.numbers import NumberLike
from dpsense.core.privacy_loss import check_epsilon
from dpsense.sensitivity.bounds import Bounds, ContributionBound, exact_number
from dpsense.sensitivity.global_ import centered_sum_sensitivity, count_rows_sensitivity


@dataclass(frozen=True)
class MeanPlan:
    """The two releases a private-n mean needs, with their sensitivities and exact epsilon shares.

    Attributes:
        bounds: the public clipping bounds [L, U].
        midpoint: m = (L + U)/2, subtracted from every clipped value before summing.
        centered_sum_sensitivity: L1 (= L2) sensitivity of sum(clip(x_i) - m) per unit.
        count_sensitivity: L1 (= L2) sensitivity of the row count per unit.
        epsilon_sum: eps_1, spent on the centered sum.
        epsilon_count: eps_2, spent on the count; eps_1 + eps_2 equals the requested epsilon exactly.
        adjacency: the adjacency both sensitivities are stated for.

    """

    bounds: Bounds
    midpoint: Fraction
    centered_sum_sensitivity: Fraction
    count_sensitivity: Fraction
    epsilon_sum: Fraction
    epsilon_count: Fraction
    adjacency: Adjacency

    @property
    def epsilon(self) -> Fraction:
        """Total pure-DP cost by basic composition: eps_1 + eps_2."""
        return self.epsilon_sum + self.epsilon_count

    def finish(
        self, noisy_centered_sum: NumberLike, noisy_count: NumberLike, *, min_denominator: NumberLike = 1
    ) -> Fraction:
        """Post-process the two noisy releases into the mean (see ``mean_from_noisy``)."""
        return mean_from_noisy(noisy_centered_sum, noisy_count, self.bounds, min_denominator=min_denominator)


#: The centred sum's share of a private-n mean's ε (the count takes the rest): 13/22, so ε_sum/ε_count = 13/9
#: ≈ 3^(1/3), the split that minimises the error variance averaged over a mean uniform in [L, U]
#: (docs/math/global-sensitivity.md §1.5, "Budget split"; 0.85-1.05x the even split's standard deviation).
SUM_SHARE = Fraction(13, 22)


def mean_private_n_plan(
    bounds: Bounds,
    *,
    epsilon: NumberLike,
    adjacency: Adjacency | str,
    contribution: ContributionBound,
    split: NumberLike = SUM_SHARE,
) -> MeanPlan:
    """Plan a mean with private n: sensitivities of the centered sum and the count, and the epsilon split.

    ADD_REMOVE (the intended use): centered sum C (U - L)/2, count C. REPLACE is accepted too
    (centered sum C (U - L), count C), although with a public n ``mean_sensitivity_public_n`` is better.

    Source: docs/math/global-sensitivity.md ("Mean with n private"); basic composition, Dwork-Roth Thm 3.16.

    Args:
        bounds: public clipping bounds [L, U].
        epsilon: total pure-DP budget for the mean, > 0.
        adjacency: the adjacency the sensitivities must hold for.
        contribution: the enforced per-unit bound (C rows).
        split: share of epsilon given to the centered sum, strictly between 0 and 1 (default
            ``SUM_SHARE`` = 13/22, the Session's). It changes accuracy only, never the total cost:
            eps_1 = split * eps, eps_2 = eps - eps_1.

    Raises:
        InvalidPrivacyParameter: if epsilon is not > 0 or split is not in (0, 1).

    """
    eps = check_epsilon(epsilon)
    share = exact_number(split, name="split", error=InvalidPrivacyParameter)
    if not 0 < share < 1:
        raise InvalidPrivacyParameter(
            "split (the centered sum's share of epsilon) must lie strictly between 0 and 1",
            split,
            "pass e.g. split=0.5; a larger share usually helps when n is large",
        )
    adj = Adjacency.parse(adjacency)
    eps_sum = eps * share
    return MeanPlan(
        bounds=bounds,
        midpoint=bounds.midpoint,
        centered_sum_sensitivity=centered_sum_sensitivity(bounds, adjacency=adj, contribution=contribution),
        count_sensitivity=count_rows_sensitivity(adjacency=adj, contribution=contribution),
        epsilon_sum=eps_sum,
        epsilon_count=eps - eps_sum,
        adjacency=adj,
    )


def mean_from_noisy(
    noisy_centered_sum: NumberLike, noisy_count: NumberLike, bounds: Bounds, *, min_denominator: NumberLike = 1
) -> Fraction:
    """Post-process a noisy centered sum and a noisy count into a mean: clamp_[L,U](m + S~ / max(n~, d)).

    Pure post-processing of already-private values (no privacy cost, Dwork-Roth Prop 2.1). The floor
    d must be public and fixed in advance; it keeps a small or negative noisy count from blowing up
    the ratio. Small groups still have large error: evaluate it, do not hide it.

    Source: docs/math/global-sensitivity.md ("Mean with n private").

    Args:
        noisy_centered_sum: S~, the released noisy sum(clip(x_i) - m).
        noisy_count: n~, the released noisy row count (may be <= 0).
        bounds: the public bounds the sum was clipped to.
        min_denominator: d > 0, the public floor of the denominator (default 1).

    Returns:
        The mean as an exact ``Fraction`` in [L, U] (floats are read through their decimal string).

    Raises:
        InvalidData: if a noisy input is not a finite number.
        UsageError: if min_denominator is not > 0.

    """
    s = exact_number(noisy_centered_sum, name="noisy_centered_sum", error=InvalidData)
    n = exact_number(noisy_count, name="noisy_count", error=InvalidData)
    floor = exact_number(min_denominator, name="min_denominator", error=UsageError)
    if floor <= 0:
        raise UsageError("min_denominator must be > 0", min_denominator, "pass a public floor such as 1")
    estimate = bounds.midpoint + s / max(n, floor)
    return min(max(estimate, bounds.lower), bounds.upper)
