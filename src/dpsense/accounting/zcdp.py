"""zCDP to (ε, δ)-DP: the tight conversion of Canonne-Kamath-Steinke 2020.

Theorem used (docs/math/composition.md; CKS 2020, the conversion implemented by their reference
``cdp2adp.py``): a ρ-zCDP mechanism is (ε, δ(ε))-DP with

    δ(ε) = inf_{α > 1} exp((α - 1)(αρ - ε)) · (1 - 1/α)^α / (α - 1).

Every α > 1 gives a valid upper bound, so a numerically imperfect minimisation can only make δ
larger, never unsafe, provided the bound at the chosen α is itself rounded up (``_cks_delta``
evaluates it in x = α - 1, a form without cancellation, and rounds it up). The exponent is convex
in α; its derivative (2α - 1)ρ - ε + ln(1 - 1/α) is increasing, so the minimiser is found by
bisection on the derivative. Each factor
(1 - 1/α)^α / (α - 1) = (1 - 1/α)^{α-1} / α is below 1, so the bound is never worse than the
Bun-Steinke 2016 (Prop 1.3) bound ε = ρ + 2 sqrt(ρ ln(1/δ)); the ε returned here is also capped
by it. The (ε for a target δ) inversion is a bisection in ε, rounded up.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpsense.accounting._checks import epsilon_query, positive_delta
from dpsense.core.numbers import DELTA_SLACK, NumberLike, round_up
from dpsense.core.privacy_loss import ZCDP, ApproxDP, check_rho

#: Relative error allowance (about 90 ulps) when the CKS bound is evaluated at a chosen α: the
#: evaluation is rounded up by it, so the returned δ is an upper bound despite float rounding.
_EVAL_SLACK = 1e-14
_FLOAT_MAX = math.ldexp(1.0 - math.ldexp(1.0, -53), 1024)


def approx_delta_of_zcdp(rho: NumberLike | ZCDP, epsilon: NumberLike) -> float:
    """The CKS 2020 δ(ε) of a ρ-zCDP mechanism at a given ε >= 0.

    δ(ε) = inf_{α>1} exp((α-1)(αρ-ε) + α ln(1-1/α)) / (α-1), capped at 1 (CKS 2020; cdp2adp.py).

    Args:
        rho: the zCDP parameter ρ >= 0 (a ``ZCDP`` is accepted as well).
        epsilon: the ε >= 0 at which to evaluate δ.

    Returns:
        δ(ε) as a float, rounded up: an upper bound on the infimum despite float64 rounding
        (larger than it by about 1e-11 relative at most), and at least the smallest positive
        float for ρ > 0.

    Raises:
        InvalidPrivacyParameter: on an invalid ρ or ε.

    """
    r = float(_rho(rho))
    eps = float(epsilon_query(epsilon))
    return _cks_delta(r, eps)


def zcdp_to_approx_tight(rho: NumberLike | ZCDP, delta: NumberLike) -> ApproxDP:
    """The smallest ε (rounded up) with ρ-zCDP => (ε, δ)-DP by the CKS 2020 bound.

    Solves δ(ε) <= δ (1 − DELTA_SLACK) (``dpsense.core.numbers``) by bisection in ε on
    [0, ρ + 2 sqrt(ρ ln(1/δ))] with δ(ε) as in ``approx_delta_of_zcdp``; the result is rounded up to a
    rational and is never larger than the Bun-Steinke 2016 (Prop 1.3) ε = ρ + 2 sqrt(ρ ln(1/δ)) (also
    rounded up).

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
    rf, target = float(r), float(d) * (1.0 - DELTA_SLACK)
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
    """CKS δ(ε) for floats, rounded up: a proven upper bound on the infimum over α > 1.

    With x = α - 1 > 0 the log of the bound is
    f(x) = x(1+x)ρ - xε - x ln(1 + 1/x) - ln(1 + x)
    (the same expression: α ln(1 - 1/α) - ln(α - 1) = -x ln(1 + 1/x) - ln(1 + x)). The last two
    terms are both negative, so unlike ln(1 - 1/α) near α = 1 (large ρ: the old α form returned a
    δ below the infimum there) and ln x - ln(1 + x) at large x (small ρ), nothing cancels. f is
    convex in x, so the minimiser is found by bisection on its increasing derivative. Any x > 0
    gives a valid bound, so only the evaluation at the chosen x must be rounded up: each term is
    within a few ulps (glibc exp/log/log1p are within 1 ulp), so the float sum is within
    1e-15 of the sum of the terms' absolute values plus an ulp of the result; ``_EVAL_SLACK`` (ten
    times that) of it is added before exp, and the exp is then enlarged relatively by
    ``_EVAL_SLACK``. For ρ > 0 the infimum is positive, so an underflow returns the smallest
    positive float rather than 0.
    """
    if rho == 0.0:
        return 0.0
    x = _cks_minimiser(rho, eps)
    if x == 0.0:  # the minimiser is below the float range: f(x) ≈ -x, so δ rounds to 1
        return 1.0
    log_inv = math.log1p(1.0 / x) if x >= 1.0 else math.log1p(x) - math.log(x)  # ln(1 + 1/x)
    terms = ((x * rho) * (1.0 + x), -x * eps, -x * log_inv, -math.log1p(x))
    exponent = math.fsum(terms)
    exponent += _EVAL_SLACK * (math.fsum(abs(t) for t in terms) + abs(exponent))
    if not exponent < 0:  # also catches an overflowed (inf or nan) evaluation: δ <= 1 always
        return 1.0
    delta = math.exp(exponent) * (1.0 + _EVAL_SLACK)
    return min(1.0, max(delta, math.ulp(0.0)))


def _cks_minimiser(rho: float, eps: float) -> float:
    """The x = α - 1 > 0 minimising the CKS exponent, to float precision, by bisection in t = ln x.

    The derivative of f, (1 + 2x)ρ - ε - ln(1 + 1/x), is increasing; in t it is computed as
    (1 + 2e^t)ρ - ε - (-t + ln(1 + e^t)) for t < 0 and with ln(1 + e^-t) for t >= 0, so neither a
    tiny nor a huge x loses it to cancellation or overflow. It is negative at t = -ρ - ε - 800 and
    positive at x_hi = (ε + 1)/(2ρ) + 1 (there it is >= 1 + 3ρ - ln 2). The returned x may
    underflow to 0.0 (a minimiser below the float range; the caller then returns δ = 1).
    """
    x_hi = min((eps + 1.0) / (2.0 * rho) + 1.0, _FLOAT_MAX)
    lo, hi = -rho - eps - 800.0, math.log(x_hi)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        x = math.exp(mid)
        log_inv = math.log1p(x) - mid if mid < 0 else math.log1p(math.exp(-mid))
        if (rho + 2.0 * x * rho) - eps - log_inv < 0:
            lo = mid
        else:
            hi = mid
    return min(math.exp(hi), x_hi)
