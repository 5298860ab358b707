"""Private partition selection: the threshold's δ bound, its minimality, and release frequencies with power."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpsense.core.errors import UsageError
from dpsense.core.privacy_loss import ApproxDP
from dpsense.mechanisms import select_partitions
from dpsense.mechanisms.partition_selection import partition_threshold


def tail(threshold: int, count: int, scale: float) -> float:
    """P[count + Z >= threshold] for two-sided geometric Z with P(z) ∝ exp(-|z| / scale)."""
    a = math.exp(-1 / scale)
    m = threshold - count
    if m <= 0:
        return 1 - a ** (1 - m) / (1 + a)
    return a**m / (1 + a)


@pytest.mark.parametrize("k", [1, 2, 5, 40])
@pytest.mark.parametrize("eps", [Fraction(1, 10), Fraction(1), Fraction(3)])
@pytest.mark.parametrize("delta", [Fraction(1, 10**9), Fraction(1, 10**5)])
@pytest.mark.parametrize("replace", [False, True])
def test_the_threshold_bounds_the_release_of_a_units_own_keys_by_delta_and_is_minimal(
    k: int, eps: Fraction, delta: Fraction, replace: bool
) -> None:
    sens = 2 * k if replace else k
    tau = partition_threshold(sensitivity=sens, max_partitions_per_unit=k, epsilon=eps, delta=delta)
    scale = sens / float(eps)
    assert k * tail(tau, 1, scale) <= float(delta)  # the unit's at most k own keys (count 1 each)
    assert tau == 1 or k * tail(tau - 1, 1, scale) > float(delta)  # one lower would not do


@pytest.mark.statistical
def test_release_frequencies_match_the_true_scale_and_reject_30_percent_off() -> None:
    eps, delta, k = Fraction(1), Fraction(1, 10), 1
    tau = partition_threshold(sensitivity=k, max_partitions_per_unit=k, epsilon=eps, delta=delta)
    counts = np.array([1, 2, tau, tau + 3] * 25_000)
    kept = select_partitions(counts, max_partitions_per_unit=k, replace=False, epsilon=eps, delta=delta).keep
    for c in (1, 2, tau, tau + 3):
        observed = kept[counts == c]
        n = observed.size
        freq = observed.mean()
        true = tail(tau, c, 1.0)
        se = math.sqrt(true * (1 - true) / n)
        assert abs(freq - true) < 5 * se, (c, freq, true)
        if c <= 2:  # the tail probabilities that decide δ: a scale 30 % off is rejected
            for off in (0.7, 1.3):
                wrong = tail(tau, c, off)
                assert abs(freq - wrong) > 5 * math.sqrt(wrong * (1 - wrong) / n), (c, off)


def test_the_selection_states_its_loss_and_refuses_bad_parameters() -> None:
    result = select_partitions([5, 1, 300], max_partitions_per_unit=3, replace=True, epsilon=1, delta=1e-6)
    assert result.keep.shape == (3,) and result.keep[2]  # 300 units is far above the threshold
    assert result.loss == ApproxDP(Fraction(1), Fraction(1, 10**6))
    assert "Korolova" in result.guarantee
    assert select_partitions([], max_partitions_per_unit=1, replace=False, epsilon=1, delta=1e-6).keep.size == 0
    with pytest.raises(UsageError, match="delta > 0"):
        select_partitions([3], max_partitions_per_unit=1, replace=False, epsilon=1, delta=0)
    with pytest.raises(UsageError, match="max_partitions_per_unit"):
        select_partitions([3], max_partitions_per_unit=0, replace=False, epsilon=1, delta=1e-6)
    with pytest.raises(UsageError, match="present"):
        select_partitions([0, 3], max_partitions_per_unit=1, replace=False, epsilon=1, delta=1e-6)


@pytest.mark.statistical
def test_empirical_privacy_of_the_selection_at_the_threshold_with_a_control() -> None:
    """Neighbours at the threshold: one more unit on a key (count τ-1 vs τ) is the tightest pair.

    P[not kept | τ - 1] / P[not kept | τ] = e^(ε/Δ) exactly, so the audit's lower bound must stay
    under ε (Δ = k = 1) and a selection whose noise is 30 % too small must be caught.
    """
    from dpsense.audit.empirical import epsilon_lower_bound
    from dpsense.mechanisms import partition_selection as ps

    eps, delta, samples = Fraction(1), Fraction(1, 10**6), 200_000
    tau = partition_threshold(sensitivity=1, max_partitions_per_unit=1, epsilon=eps, delta=delta)

    def kept(count: int, sensitivity_scale: float = 1.0) -> np.ndarray:
        counts = np.full(samples, count)
        if sensitivity_scale == 1.0:
            chosen = select_partitions(counts, max_partitions_per_unit=1, replace=False, epsilon=eps, delta=delta)
            return chosen.keep.astype(np.float64)
        noisy = ps.geometric(counts, sensitivity=1, epsilon=eps / Fraction(sensitivity_scale)).value
        return (np.asarray(noisy) >= tau).astype(np.float64)

    bound = epsilon_lower_bound(kept(tau - 1), kept(tau), alpha=1e-9).epsilon_lower_bound
    assert bound <= float(eps)
    assert bound > 0.9  # the pair is tight: the audit sees almost all of ε
    leaky = epsilon_lower_bound(kept(tau - 1, 0.7), kept(tau, 0.7), alpha=1e-9).epsilon_lower_bound
    assert leaky > float(eps)
