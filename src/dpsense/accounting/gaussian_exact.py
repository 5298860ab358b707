"""Exact (ε, δ) curves of the Gaussian and discrete Gaussian mechanisms, and noise calibration.

Theorems used (docs/math/index.md sections 9 and 10):

* Balle-Wang 2018, Thm 8 (analytic Gaussian mechanism): f(x) + N(0, σ²) with L2 sensitivity Δ is
  (ε, δ)-DP if and only if δ >= Φ(Δ/(2σ) - εσ/Δ) - e^ε Φ(-Δ/(2σ) - εσ/Δ). Evaluated as
  Φ(u) · (-expm1(ε + ln Φ(v) - ln Φ(u))), u = Δ/(2σ) - εσ/Δ, v = -Δ/(2σ) - εσ/Δ, with
  ``scipy.special.log_ndtr`` (no cancellation, no underflow of the difference). k Gaussian
  releases compose exactly like one with sensitivity Δ sqrt(k). The classic calibration
  σ = Δ sqrt(2 ln(1.25/δ))/ε (Dwork-Roth Thm A.1) is only proven for ε < 1 and fails for large ε.
* Canonne-Kamath-Steinke 2020, Thm 7 (discrete Gaussian): for an integer query with sensitivity
  Δ (an integer) and Y ~ N_Z(0, σ²), P(y) ∝ exp(-y²/(2σ²)), the mechanism is (ε, δ)-DP with
  δ = P[Y > εσ²/Δ - Δ/2] - e^ε P[Y > εσ²/Δ + Δ/2]. For integer Y, "Y > a" is Y >= floor(a)+1 =: m
  (floor taken exactly in rational arithmetic), so δ = Σ_{y>=m} (p_y - e^ε p_{y+Δ})
  = Σ_{y>=m} p_y (1 - exp(ε - (2yΔ + Δ²)/(2σ²))), a sum of non-negative terms (no cancellation).
  The normaliser is summed over |y| <= 40σ + 10 (beyond it every term underflows float64), in
  vectorised chunks with pairwise summation (relative error ~1e-10 at σ = 10^6); a call at
  σ = 3·10^4 takes about 15 ms, and σ² above ``MAX_DISCRETE_SIGMA2`` is refused.

The calibrations return the smallest noise (found by bisection) whose δ is at most the target,
with a relative slack of 1e-9 on δ that covers float64 rounding.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from dpsense.accounting._checks import (
    epsilon_query,
    epsilon_target,
    integer_sensitivity,
    positive_delta,
    positive_float,
    sensitivity_float,
)
from dpsense.core.errors import InternalError, UnsupportedRequest
from dpsense.core.numbers import DELTA_SLACK, NumberLike, to_fraction

#: Largest discrete-Gaussian σ² whose δ is summed (about 8·10^7 terms, a second or two).
MAX_DISCRETE_SIGMA2 = 10**12
#: Terms per vectorised chunk (8 MiB per float64 array).
_CHUNK = 1 << 20

FloatArray = NDArray[np.float64]


def balle_wang_delta(*, epsilon: NumberLike, sigma: NumberLike, sensitivity: NumberLike) -> float:
    """The exact δ(ε) of the Gaussian mechanism (Balle-Wang 2018, Thm 8).

    δ(ε) = Φ(Δ/(2σ) - εσ/Δ) - e^ε Φ(-Δ/(2σ) - εσ/Δ), computed with log Φ (``log_ndtr``).

    Args:
        epsilon: the ε >= 0 at which to evaluate δ.
        sigma: the noise standard deviation σ > 0.
        sensitivity: the L2 sensitivity Δ >= 0 under the declared adjacency.

    Returns:
        δ(ε) as a float in [0, 1] (0 when Δ = 0).

    """
    eps = float(epsilon_query(epsilon))
    s = positive_float(sigma, name="sigma", example="sigma=2.0")
    d = sensitivity_float(sensitivity)
    if d == 0.0:
        return 0.0
    return _bw_delta(eps, s / d)


def balle_wang_sigma(*, epsilon: NumberLike, delta: NumberLike, sensitivity: NumberLike) -> float:
    """The smallest Gaussian σ with δ(ε) <= δ by Balle-Wang 2018, Thm 8 (bisection, rounded up).

    δ(ε) depends on σ only through σ/Δ and decreases in it; the bisection keeps an upper end with
    ``balle_wang_delta(epsilon, σ, Δ) <= δ (1 - 1e-9)``, so the returned σ is safe; it is the
    smallest σ for that slightly reduced target to a relative 1e-13.

    Args:
        epsilon: the target ε > 0.
        delta: the target δ in (0, 1).
        sensitivity: the L2 sensitivity Δ > 0.

    Returns:
        σ as a float.

    """
    eps = float(epsilon_target(epsilon))
    target = float(positive_delta(delta)) * (1.0 - DELTA_SLACK)
    d = sensitivity_float(sensitivity, allow_zero=False)
    ratio = _bw_ratio(eps, target)
    sigma = ratio * d
    while _bw_delta(eps, sigma / d) > target:  # the product may round down by one ulp
        sigma = math.nextafter(sigma, math.inf)
    return sigma


def discrete_gaussian_delta(*, epsilon: NumberLike, sigma2: NumberLike, sensitivity: int) -> float:
    """The exact δ(ε) of the discrete Gaussian mechanism (Canonne-Kamath-Steinke 2020, Thm 7).

    δ = P[Y >= m] - e^ε P[Y >= m + Δ], m = floor(εσ²/Δ - Δ/2) + 1, Y ~ N_Z(0, σ²), summed as
    Σ_{y>=m} p_y (1 - exp(ε - (2yΔ + Δ²)/(2σ²))) in vectorised float64 (O(σ) work).

    Args:
        epsilon: the ε >= 0 at which to evaluate δ.
        sigma2: the discrete Gaussian's parameter σ² > 0 (an int or a rational).
        sensitivity: the integer L1 = L2 sensitivity Δ >= 0 of the integer-valued query.

    Returns:
        δ(ε) as a float in [0, 1] (0 when Δ = 0).

    """
    eps = epsilon_query(epsilon)
    positive_float(sigma2, name="sigma2", example="sigma2=100")
    s2 = to_fraction(sigma2, name="sigma2")
    d = integer_sensitivity(sensitivity)
    if d == 0:
        return 0.0
    return _dg_delta(eps, s2, d)


def discrete_gaussian_sigma2(*, epsilon: NumberLike, delta: NumberLike, sensitivity: int) -> int:
    """The smallest integer σ² whose discrete Gaussian δ(ε) is <= δ (1 - 1e-9) (CKS 2020, Thm 7).

    Integer bisection on σ², started from the continuous Balle-Wang σ²; results are cached.

    Args:
        epsilon: the target ε > 0.
        delta: the target δ in (0, 1).
        sensitivity: the integer sensitivity Δ >= 1.

    Returns:
        σ² as an int >= 1.

    """
    eps = epsilon_target(epsilon)
    d = positive_delta(delta)
    sens = integer_sensitivity(sensitivity, allow_zero=False)
    return _dg_sigma2(eps, d, sens)


def _bw_delta(eps: float, ratio: float) -> float:
    """Balle-Wang δ(ε) with ratio = σ/Δ."""
    half = 0.5 / ratio
    shift = eps * ratio
    from scipy.special import log_ndtr  # imported when first used (the ledger imports this module)

    log_u = float(log_ndtr(half - shift))
    log_v = float(log_ndtr(-half - shift))
    exponent = eps + log_v - log_u
    if exponent >= 0.0:
        return 0.0
    return min(1.0, math.exp(log_u) * -math.expm1(exponent))


def _bw_ratio(eps: float, target: float) -> float:
    """The smallest σ/Δ (upper end of a bisection) with Balle-Wang δ(ε) <= target."""
    hi = 1.0
    while _bw_delta(eps, hi) > target:
        hi *= 2.0
    lo = hi
    while _bw_delta(eps, lo) <= target:
        lo *= 0.5
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi) or hi - lo <= 1e-13 * hi:
            break
        if _bw_delta(eps, mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def _dg_delta(eps: Fraction, sigma2: Fraction, sensitivity: int) -> float:
    """CKS Thm 7 δ for validated arguments (exact floor, float64 tail sums)."""
    start = math.floor(eps * sigma2 / sensitivity - Fraction(sensitivity, 2)) + 1
    s2 = float(sigma2)
    reach = math.ceil(40.0 * math.sqrt(s2) + 10.0)
    if start > reach:
        return 0.0
    if s2 > MAX_DISCRETE_SIGMA2:
        raise UnsupportedRequest(
            f"discrete Gaussian δ is summed term by term, up to sigma2 = {MAX_DISCRETE_SIGMA2:.0e}",
            float(sigma2),
            "use a larger epsilon, or account this release with its zCDP rho = Δ²/(2σ²) instead",
        )
    # Σ_{|y| <= reach} exp(-y²/(2σ²)) = 2 Σ_{j=0..reach} w_j - w_0 with w_0 = 1.
    normaliser = 2.0 * math.fsum(chunk.sum() for chunk, _ in _weight_chunks(0, reach, s2)) - 1.0
    shift = float(eps) - 0.5 * sensitivity * sensitivity / s2
    tail_parts = []
    for weights, ys in _weight_chunks(max(start, -reach), reach, s2):
        # factor(y) = -expm1(ε - yΔ/σ² - Δ²/(2σ²)) >= 0 for y >= m (clamped against float rounding).
        ys *= -sensitivity / s2
        ys += shift
        np.expm1(ys, out=ys)
        np.minimum(ys, 0.0, out=ys)
        ys *= weights
        tail_parts.append(-float(ys.sum()))
    return min(1.0, math.fsum(tail_parts) / normaliser)


def _weight_chunks(first: int, last: int, s2: float) -> Iterator[tuple[FloatArray, FloatArray]]:
    """(exp(-y²/(2σ²)), y) for y = first..last, in chunks that bound the memory used."""
    for lo in range(first, last + 1, _CHUNK):
        ys = np.arange(lo, min(lo + _CHUNK, last + 1), dtype=np.float64)
        weights = ys * ys
        weights *= -0.5 / s2
        np.exp(weights, out=weights)
        yield weights, ys


@lru_cache(maxsize=256)
def _dg_sigma2(eps: Fraction, delta: Fraction, sensitivity: int) -> int:
    target = float(delta) * (1.0 - DELTA_SLACK)

    def ok(s2: int) -> bool:
        return _dg_delta(eps, Fraction(s2), sensitivity) <= target

    guess = max(1, math.ceil((_bw_ratio(float(eps), target) * sensitivity) ** 2))
    hi = guess
    while not ok(hi):
        hi *= 2
    lo = max(0, (hi * 9) // 10)
    while lo > 0 and ok(lo):
        hi, lo = lo, lo // 2
    while hi - lo > 1:  # invariant: ok(hi), and lo == 0 or not ok(lo)
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    if not ok(hi):
        raise InternalError("discrete_gaussian_sigma2 lost its feasible upper end")
    return hi
