"""The public clipping-bias bound of an adaptive mean or sum, on hand-computed cases (docs/math §1.5a).

A bin outside the released clip had a noisy count below τ; with probability >= 0.975 each of the M bins
the declared bounds meet then holds at most m = τ - 1 + t rows, t the least integer >= 0 with
M a^(t+1) / (1 + a) <= 0.025 = ``BINS_FAILURE``, a = exp(-ε/Δ). The sum's bias is at most max(B_up, B_low) with
B_up = m Σ (min(U, u_j) - b) over the bins above b and B_low = m Σ (a - max(L, l_j)) over those below a.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from dpsense import mechanisms as mech
from dpsense.core import PureDP
from dpsense.core.errors import UsageError
from dpsense.mechanisms.approx_bounds import skipped_bin_rows
from dpsense.sensitivity import Bounds
from dpsense.statistics._adaptive import (
    BINS_FAILURE,
    JOINT_CONFIDENCE,
    NOISE_CONFIDENCE,
    AdaptiveClip,
    clip_bias,
    clip_of,
    g_up,
)
from dpsense.statistics._steps import CONFIDENCE

#: ε = ln 2 with Δ = 1: a = exp(-ε/Δ) = 1/2, so the tails are powers of two (computed by hand below).
LN2 = Fraction(math.log(2)).limit_denominator(10**9)


def _found(low: float | None, high: float | None, threshold: int, epsilon: Fraction = LN2) -> mech.ApproxBounds:
    return mech.ApproxBounds(low, high, threshold, PureDP(epsilon), "approx_bounds/log2@1", "test")


def _clip(found: mech.ApproxBounds, declared: Bounds, sensitivity: int = 1) -> AdaptiveClip:
    clip = clip_of(found, declared)
    above, below, m, bins = clip_bias(found, declared, clip, sensitivity=sensitivity)
    return AdaptiveClip(clip, declared, found, 1, above, below, m, bins)


def test_the_confidence_split_keeps_each_column_at_its_confidence() -> None:
    """The error column at 0.95 (as every statistic); the mean's bias column on the bins' and its count's events."""
    assert NOISE_CONFIDENCE == CONFIDENCE
    assert pytest.approx(1 - CONFIDENCE) == BINS_FAILURE + (1 - CONFIDENCE) / 2
    assert pytest.approx(0.925) == JOINT_CONFIDENCE == 1 - BINS_FAILURE - (1 - CONFIDENCE)


def test_m_is_tau_minus_one_plus_the_least_t_of_the_union_bound() -> None:
    # a = 1/2, 2 bins: 2 (1/2)^(t+1) / (3/2) <= 0.01 first at t + 1 = 8 ((4/3)/128 = 0.0104 > 0.01 at t + 1 = 7)
    assert skipped_bin_rows(threshold=5, epsilon=LN2, sensitivity=1, bins=2, failure_probability=0.01) == 5 - 1 + 7
    # 49 bins: (49/1.5) (1/2)^(t+1) <= 0.01 first at t + 1 = 12 (0.0080; 0.0160 at 11)
    assert skipped_bin_rows(threshold=3, epsilon=LN2, sensitivity=1, bins=49, failure_probability=0.01) == 3 - 1 + 11
    # Δ = 2 halves the rate: a = 2^(-1/2), 2 a^(t+1) / (1 + a) is 0.0092 at t + 1 = 14 and 0.0129 at 13
    a = 2**-0.5
    assert 2 * a**14 / (1 + a) <= 0.01 < 2 * a**13 / (1 + a)
    assert skipped_bin_rows(threshold=5, epsilon=LN2, sensitivity=2, bins=2, failure_probability=0.01) == 5 - 1 + 13
    # a large ε: a bin with τ rows or more stays below τ with probability a/(1 + a) < 0.01 already: t = 0
    assert skipped_bin_rows(threshold=2, epsilon=10, sensitivity=1, bins=2, failure_probability=0.01) == 1


def test_the_tail_of_the_noise_is_the_one_the_bound_uses() -> None:
    """P[Z <= -s] = a^s / (1 + a) for P(z) = (1 - a)/(1 + a) a^|z| (summed here), the event of a bin of τ + t rows."""
    a = 0.5
    pmf = {z: (1 - a) / (1 + a) * a ** abs(z) for z in range(-200, 201)}
    for s in (1, 3, 8):
        assert sum(p for z, p in pmf.items() if z <= -s) == pytest.approx(a**s / (1 + a), rel=1e-12)


def test_no_bounds_found_is_the_declared_clip_and_no_bias() -> None:
    clip = _clip(_found(None, None, 5), Bounds(64, 250))
    assert clip.bounds == Bounds(64, 250) and not clip.cuts
    assert (clip.above, clip.below, clip.rows_per_bin, clip.bins) == (0, 0, None, 0)
    assert clip.sum_bias() == 0.0 and clip.mean_bias(100.0, 10.0) == 0.0


def test_bounds_that_hold_the_declared_ones_clip_nothing() -> None:
    """The data lie inside the clip whatever they are: [L, U] ⊆ [lo, hi] gives [L, U] and a bias of 0."""
    clip = _clip(_found(32.0, 256.0, 5), Bounds(64, 250))
    assert clip.bounds == Bounds(64, 250) and clip.sum_bias() == 0.0
    # [lo, hi] outside [L, U] (a bin an empty bin's noise passed): no overlap, the declared bounds
    assert _clip(_found(512.0, 1024.0, 5), Bounds(64, 250)).bounds == Bounds(64, 250)


def test_one_bin_above_the_clip() -> None:
    """[L, U] = [64, 250], released [64, 128]: the bins of [L, U] are [64, 128) and [128, 256) (M = 2).

    At β_b = 0.025: 2 (1/2)^(t+1) / (3/2) <= 0.025 first at t + 1 = 6 (0.0208; 0.0417 at 5), so m = 5 - 1 + 5
    = 9; the only bin above b = 128 is [128, 256), whose values move by at most min(250, 256) - 128 = 122:
    B_up = 9 x 122 = 1098, and a = L: B_low = 0.
    """
    clip = _clip(_found(64.0, 128.0, 5), Bounds(64, 250))
    assert clip.bounds == Bounds(64, 128) and clip.cuts
    assert (clip.rows_per_bin, clip.bins, clip.above, clip.below) == (9, 2, 1098, 0)
    assert clip.sum_bias() == 1098.0
    # the mean: n_lo = max(1, ceil(100.4 - 10.2)) = 91, bias <= min(1098/91, 250 - 128)
    assert clip.mean_bias(100.4, 10.2) == pytest.approx(1098 / 91, rel=1e-15)
    assert clip.mean_bias(100.4, 10.2) >= 1098 / 91  # rounded up
    assert clip.mean_bias(5.0, 10.0) == 122.0  # n_lo = 1: the distance from b to U caps it
    assert clip.mean_bias(5.0, None) == 122.0  # no count bound: n_lo = 1 too
    assert clip.widest_mean_error() == 250 - 64


def test_both_sides_and_negative_bins() -> None:
    """[L, U] = [-10, 10], released [-4, 8]: bins -24 ((-16, -8]) to 24 ([8, 16)), M = 49, m = 3 - 1 + 10 = 12.

    (49/1.5) (1/2)^(t+1) <= 0.025 first at t + 1 = 11 (0.0160; 0.0319 at 10). Above b = 8: bin [8, 16) moves
    by min(10, 16) - 8 = 2: B_up = 24. Below a = -4: bin (-8, -4] by -4 - (-8) = 4 and bin (-16, -8] by
    -4 - max(-10, -16) = 6: B_low = 12 x 10 = 120.
    """
    clip = _clip(_found(-4.0, 8.0, 3), Bounds(-10, 10))
    assert clip.bounds == Bounds(-4, 8)
    assert (clip.rows_per_bin, clip.bins, clip.above, clip.below) == (12, 49, 24, 120)
    assert clip.sum_bias() == 120.0  # the two sides' biases have opposite signs: the larger bounds |bias|
    # n_lo = 10: max(min(2.4, 10 - 8), min(12, -4 + 10)) = max(2, 6)
    assert clip.mean_bias(12.5, 2.5) == 6.0
    assert clip.mean_bias(102.5, 2.5) == pytest.approx(1.2)  # n_lo = 100: max(0.24, 1.2)
    assert clip.widest_mean_error() == 18  # max(10 - (-4), 8 - (-10))


def test_the_zero_bin_and_bins_beyond_the_declared_bounds() -> None:
    """[L, U] = [0, 3], released [2^-20, 2]: the zero bin [-2^-20, 2^-20] is below a; only [2, 4) is above.

    Bins from 0 (L = 0) to [2, 4) (U = 3): 0 and +1..+22, M = 23. Below a = 2^-20: the zero bin, moved by at most
    a - max(0, -2^-20) = 2^-20. Above b = 2: [2, 4), by min(3, 4) - 2 = 1; bins beyond U hold no value.
    """
    tiny = Fraction(1, 2**20)
    clip = _clip(_found(float(tiny), 2.0, 4), Bounds(0, 3))
    m = skipped_bin_rows(threshold=4, epsilon=LN2, sensitivity=1, bins=23, failure_probability=BINS_FAILURE)
    assert (clip.bins, clip.rows_per_bin) == (23, m)
    assert (clip.above, clip.below) == (m * 1, m * tiny)


def test_an_outermost_bin_that_reached_tau_clips_nothing_on_its_side() -> None:
    """Bin +K holds every value >= 2^61, beyond its reported edge 2^62: a declared U = 2^70 stays the clip's b."""
    declared = Bounds(0, 2**70)
    clip = clip_of(_found(1.0, float(2**62), 5), declared)
    assert clip == Bounds(1, 2**70)
    above, below, m, _ = clip_bias(_found(1.0, float(2**62), 5), declared, clip, sensitivity=1)
    assert above == 0 and below > 0 and m is not None
    low_side = clip_of(_found(-float(2**62), 4.0, 5), Bounds(-(2**70), 10))
    assert low_side == Bounds(-(2**70), 4)
    # below 2^62 the released edge is the clip: [1, 2^40]
    assert clip_of(_found(1.0, float(2**40), 5), declared) == Bounds(1, 2**40)


def test_the_bound_is_checked_and_printed_upwards() -> None:
    with pytest.raises(UsageError):
        skipped_bin_rows(threshold=0, epsilon=1, sensitivity=1, bins=2, failure_probability=0.01)
    with pytest.raises(UsageError):
        skipped_bin_rows(threshold=3, epsilon=1, sensitivity=1, bins=2, failure_probability=1.5)
    assert g_up(2928.0) == "2928" and g_up(1234567.0) == "1.23457e+06" and g_up(1234561.0) == "1.23457e+06"
    assert g_up(0.0) == "0"
