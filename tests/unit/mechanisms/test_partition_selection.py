"""Private partition selection: the threshold's δ bound, its minimality, and release frequencies with power."""

from __future__ import annotations

import itertools
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


def _release_law(counts: list[int], tau: int, scale: float) -> dict[frozenset[int], float]:
    """The exact law of the released key set (each key independently; count 0 = absent, never released)."""
    probs = [0.0 if c == 0 else tail(tau, c, scale) for c in counts]
    law: dict[frozenset[int], float] = {}
    for kept in itertools.product((False, True), repeat=len(counts)):
        mass = math.prod(p if keep else 1 - p for p, keep in zip(probs, kept, strict=True))
        law[frozenset(i for i, keep in enumerate(kept) if keep)] = mass
    return law


def _hockey_stick(p: dict[frozenset[int], float], q: dict[frozenset[int], float], eps: float) -> float:
    """max over output sets S of P(S) - e^eps Q(S): the smallest δ for this ordered pair."""
    return sum(max(0.0, p[o] - math.exp(eps) * q[o]) for o in p)


def _neighbour_pairs(k: int, replace: bool, base: list[int]) -> list[tuple[list[int], list[int]]]:
    """(x, x') unit counts on the touched keys: u's <= k keys lose one (1 -> 0: gone), v's gain one (0 -> 1: new)."""
    pairs = []
    levels = [0, *base]
    for gain in itertools.product(levels, repeat=k):  # the added (or replacing) unit's k keys, before it joins
        if not replace:
            pairs.append((list(gain), [c + 1 for c in gain]))
            continue
        for lose in itertools.product([c for c in levels if c > 0], repeat=k):  # the replaced unit's keys
            pairs.append(([*lose, *gain], [*(c - 1 for c in lose), *(c + 1 for c in gain)]))
    return pairs


@pytest.mark.parametrize(
    ("k", "eps", "delta", "replace"),
    [
        (1, Fraction(1, 10), Fraction(3, 10), False),  # δ > k (1 - e^(-ε/Δ)) = 0.095
        (2, Fraction(1, 5), Fraction(1, 2), False),  # 2 (1 - e^(-1/10)) = 0.19 < δ
        (1, Fraction(1, 2), Fraction(1, 2), True),  # Δ = 2: 1 - e^(-1/4) = 0.22 < δ
        (2, Fraction(1), Fraction(1, 10**3), True),
        (1, Fraction(2), Fraction(1, 10**6), False),
    ],
)
def test_both_directions_hold_exactly_also_when_x_prime_gains_keys(
    k: int, eps: Fraction, delta: Fraction, replace: bool
) -> None:
    """The exact hockey-stick divergence of the released key sets is <= δ in both directions (module proof)."""
    sens = 2 * k if replace else k
    tau = partition_threshold(sensitivity=sens, max_partitions_per_unit=k, epsilon=eps, delta=delta)
    scale = sens / float(eps)
    worst = 0.0
    for x, x_prime in _neighbour_pairs(k, replace, base=[1, tau - 1, tau, tau + 2]):
        law_x, law_xp = _release_law(x, tau, scale), _release_law(x_prime, tau, scale)
        worst = max(worst, _hockey_stick(law_x, law_xp, float(eps)), _hockey_stick(law_xp, law_x, float(eps)))
    assert worst <= float(delta) * (1 + 1e-9)
    # power: one threshold lower, a unit's single new key is released with probability > δ (k = 1)
    if k == 1:
        lower = _release_law([0], tau - 1, scale), _release_law([1], tau - 1, scale)
        assert _hockey_stick(lower[1], lower[0], float(eps)) > float(delta)
