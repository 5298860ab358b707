"""zCDP to (ε, δ)-DP: the tight conversion of Canonne-Kamath-Steinke 2020.

Theorem used (ALGORITHMS.md section 10; CKS 2020, the conversion implemented by their reference
``cdp2adp.py``): a ρ-zCDP mechanism is (ε, δ(ε))-DP with

    δ(ε) = inf_{α > 1} exp((α - 1)(αρ - ε)) · (1 - 1/α)^α / (α - 1).

Every α > 1 gives a valid upper bound, so a numerically imperfect minimisation can only make δ
larger, never unsafe. The exponent is convex in α; its derivative (2α - 1)ρ - ε + ln(1 - 1/α) is
increasing, so the minimiser is found by bisection on the derivative. Each factor
(1 - 1/α)^α / (α - 1) = (1 - 1/α)^{α-1} / α is below 1, so the bound is never worse than the
Bun-Steinke 2016 (Prop 1.3) bound ε = ρ + 2 sqrt(ρ ln(1/δ)); the ε returned here is also capped
by it. The (ε for a target δ) inversion is a bisection in ε, rounded up.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpsense.accounting._checks import epsilon_query, positive_delta, round_up
from dpsense.core.numbers import NumberLike
from dpsense.core.privacy_loss import ZCDP, ApproxDP, check_rho

#: Relative slack on δ that absorbs float64 error in exp/log (~1e-14 relative) with a wide margin.
_DELTA_SLACK = 1e-10


def approx_delta_of_zcdp(rho: NumberLike | ZCDP, epsilon: NumberLike) -> float:
    """The CKS 2020 δ(ε) of a ρ-zCDP mechanism at a given ε >= 0.

    δ(ε) = inf_{α>1} exp((α-1)(αρ-ε) + α ln(1-1/α)) / (α-1), capped at 1 (CKS 2020; cdp2adp.py).

    Args:
        rho: the zCDP parameter ρ >= 0 (a ``ZCDP`` is accepted as well).
        epsilon: the ε >= 0 at which to evaluate δ.

    Returns:
        δ(ε) as a float (an upper bound up to float64 rounding, about 1e-14 relative).

    Raises:
        InvalidPrivacyParameter: on an invalid ρ or ε.

    """
    r = float(_rho(rho))
    eps = float(epsilon_query(epsilon))
    return _cks_delta(r, eps)


def zcdp_to_approx_tight(rho: NumberLike | ZCDP, delta: NumberLike) -> ApproxDP:
    """The smallest ε (rounded up) with ρ-zCDP => (ε, δ)-DP by the CKS 2020 bound.

    Solves δ(ε) <= δ (1 - 1e-10) by bisection in ε on [0, ρ + 2 sqrt(ρ ln(1/δ))] with δ(ε) as in
    ``approx_delta_of_zcdp``; the result is rounded up to a rational and is never larger than the
    Bun-Steinke 2016 (Prop 1.3) ε = ρ + 2 sqrt(ρ ln(1/δ)) (also rounded up).

    Args:
        rho: the zCDP parameter ρ >= 0 (a ``ZCDP`` is accepted as well).
        delta: the target δ in (0, 1).

    Returns:
        ``ApproxDP(ε, δ)``.

    Raises:
        InvalidPrivacyParameter: on an invalid ρ, or δ outside (0, 1).

    """
    r = _rho(rho)
    d = positive_delta(delta)
    if r == 0:
        return ApproxDP(0, d)
    bs16 = ZCDP(r).to_approx(d)
    rf, target = float(r), float(d) * (1.0 - _DELTA_SLACK)
    lo, hi = 0.0, float(bs16.epsilon)
    if _cks_delta(rf, lo) <= target:
        return ApproxDP(0, d)
    while _cks_delta(rf, hi) > target:  # guard: float rounding in the BS16 bracket
        hi = hi * 1.0001 + 1e-12
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if _cks_delta(rf, mid) <= target:
            hi = mid
        else:
            lo = mid
    return ApproxDP(min(round_up(hi), bs16.epsilon), d)


def _rho(rho: NumberLike | ZCDP) -> Fraction:
    if isinstance(rho, ZCDP):
        return rho.rho
    return check_rho(rho, allow_zero=True)


def _cks_delta(rho: float, eps: float) -> float:
    """CKS δ(ε) for floats; bisection on the derivative of the convex exponent in α."""
    if rho == 0.0:
        return 0.0
    lo, hi = 1.0, (eps + 1.0) / (2.0 * rho) + 2.0
    for _ in range(200):
        alpha = 0.5 * (lo + hi)
        if alpha in (lo, hi):
            break
        derivative = (2.0 * alpha - 1.0) * rho - eps + math.log1p(-1.0 / alpha)
        if derivative < 0:
            lo = alpha
        else:
            hi = alpha
    alpha = hi
    exponent = (alpha - 1.0) * (alpha * rho - eps) + alpha * math.log1p(-1.0 / alpha) - math.log(alpha - 1.0)
    if exponent >= 0:
        return 1.0
    return min(1.0, math.exp(exponent) * (1.0 + _DELTA_SLACK / 100))
