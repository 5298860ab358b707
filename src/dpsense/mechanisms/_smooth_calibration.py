"""Exact constants of the smooth-sensitivity noise calibrations (used by ``smooth_noise``).

Decimal helpers that round in the safe direction (s and t down, delta bounds up) and the per-family
calibrations of docs/math/smooth-sensitivity.md §3.3 (pure ε, (ε, δ), zCDP); see ``smooth_noise`` for the table.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal, localcontext
from fractions import Fraction
from math import isqrt

from dpsense.core.errors import InvalidPrivacyParameter, UnsupportedRequest, UsageError
from dpsense.core.numbers import NumberLike, to_fraction

#: Default share of eps_c given to the smoothing parameter, t = tau * eps_c (public design constants).
#: LLN: noise sd / S is proportional to sd(Z)/(s tau) when S_t ~ 1/t (order statistics of dense data);
#: it is flat near its minimum for tau in [0.2, 0.25] (sd(Z)/s ~ 4.2/eps_c at tau = 1/5).
#: ULN (sigma = sqrt 2): the same model is minimised near tau = sigma/2; 1/2 is within 10 %.
DEFAULT_SMOOTHING_FRACTION: dict[str, Fraction] = {"lln": Fraction(1, 5), "uln": Fraction(1, 2)}
#: ULN sigma: the float just above sqrt 2 (float(sqrt 2) > sqrt 2), as in the reference code.
ULN_SIGMA = Fraction(math.sqrt(2.0))

_CTX = Context(prec=50)
_DIGITS = 20
_REL_SLACK = Decimal("1e-40")
_PI = Decimal("3.14159265358979323846264338327950288419716939937510")  # truncated: a lower bound


def _dec(q: Fraction) -> Decimal:
    return _CTX.divide(Decimal(q.numerator), Decimal(q.denominator))


def _down(x: Decimal) -> Fraction:
    """A rational lower bound on ``x`` (50-digit value, relative slack, 20 significant digits)."""
    bumped = _CTX.subtract(x, _CTX.multiply(abs(x), _REL_SLACK))
    return Fraction(Context(prec=_DIGITS, rounding=ROUND_FLOOR).plus(bumped))


def _up(x: Decimal) -> Fraction:
    """A rational upper bound on ``x``."""
    bumped = _CTX.add(x, _CTX.multiply(abs(x), _REL_SLACK))
    return Fraction(Context(prec=_DIGITS, rounding=ROUND_CEILING).plus(bumped))


def _round_down(q: Fraction) -> Fraction:
    """``q`` itself when its denominator is small, else its floor at 20 significant digits (exact)."""
    if q.denominator <= 10**12 or q <= 0:
        return q
    # decimal exponent of q, possibly one too small (then 21 digits are kept: still a floor)
    exponent = len(str(q.numerator // q.denominator)) - 1 if q >= 1 else -len(str(q.denominator // q.numerator))
    scale = Fraction(10) ** (_DIGITS - 1 - exponent)
    return Fraction(math.floor(q * scale)) / scale


def _exact_sqrt(q: Fraction) -> Fraction | None:
    """sqrt(q) when it is rational, else None."""
    a, b = isqrt(q.numerator), isqrt(q.denominator)
    return Fraction(a, b) if a * a == q.numerator and b * b == q.denominator else None


def _sqrt_down(q: Fraction) -> Fraction:
    exact = _exact_sqrt(q)
    return exact if exact is not None else _down(_CTX.sqrt(_dec(q)))


def _pure(
    family: str, eps: Fraction, params: dict[str, Fraction]
) -> tuple[Fraction, Fraction, dict[str, Fraction], str]:
    """(s, t, constants, theorem) for the pure-DP families, with s L_h + t D_h <= eps exactly."""
    rule = (
        "ε-DP: sufficient condition ε ≥ s·L_h + t·D_h (NRS07 Lemmas 2.6/2.7 sliding+dilation; "
        "docs/math/smooth-sensitivity.md §3.3)"
    )
    if family == "cauchy":
        return eps / 2, eps / 2, {"L_h": Fraction(1), "D_h": Fraction(1)}, rule + ", Cauchy L_h = D_h = 1, s = t = ε/2"
    if family == "polynomial":
        g = params["gamma"]
        L = Fraction(1) if g == 2 else _up(_CTX.exp(_CTX.multiply(_dec((g - 1) / g), _CTX.ln(_dec(g - 1)))))
        D = max(Fraction(1), g - 1)
        consts = {"gamma": g, "L_h": L, "D_h": D}
        return _round_down(eps / (2 * L)), eps / (2 * D), consts, rule + ", h ∝ 1/(1+|z|^γ), tight split"
    d = params["dof"]
    root_d = _sqrt_down(d)
    L = (d + 1) / (2 * root_d)  # an upper bound on (d+1)/(2 sqrt d)
    D = max(Fraction(1), d)
    consts = {"dof": d, "L_h": L, "D_h": D}
    theorem = rule + ", Student's t: L = (d+1)/(2√d), D = max(1,d) (tight split; BS19 Thm 31's ε is looser)"
    return _round_down(eps / (2 * L)), eps / (2 * D), consts, theorem


def laplace_delta_bound(epsilon_shift: Fraction, epsilon_dilation: Fraction, beta: Fraction) -> Fraction:
    """An upper bound on e^{ε_s} exp(-(ε_d + β)/(e^β - 1)), the δ of Laplace noise.

    See docs/math/smooth-sensitivity.md §3.3.

    Derivation: the dilation term -λ + (e^λ - 1)|v| exceeds ε_d only when |v| > (ε_d + β)/(e^β - 1)
    (worst λ = β); |v| = |u + Δ| with |Δ| <= s = ε_s, so that event has probability at most
    e^{ε_s} exp(-(ε_d + β)/(e^β - 1)) under Laplace(1).
    """
    with localcontext(_CTX):
        b = _dec(beta)
        expo = (_dec(epsilon_dilation) + b) / (b.exp() - 1)
        return _up((_dec(epsilon_shift) - expo).exp())


def check_laplace_delta(delta: Fraction) -> None:
    """Refuse δ > 2/e for smooth Laplace noise: NRS07 Lemma 2.9 needs ln(2/δ) >= 1 in β = ε/(2 ln(2/δ)).

    Decided exactly: δ <= 2/e iff δ e <= 2, checked against a rational upper bound on e, so a δ is
    accepted only when it is certainly at most 2/e.

    Raises:
        InvalidPrivacyParameter: when δ e may exceed 2.

    """
    e_up = _up(_CTX.exp(Decimal(1)))
    if delta * e_up > 2:
        raise InvalidPrivacyParameter(
            "Laplace noise with a smooth scale needs δ ≤ 2/e ≈ 0.7358 (NRS07 Lemma 2.9: ln(2/δ) ≥ 1 in "
            "β = ε/(2 ln(2/δ)))",
            f"δ={float(delta):g}",
            "pass a smaller delta (e.g. delta=1e-8), or a pure-DP family ('cauchy' or 'student_t')",
        )


def _approx(
    family: str, eps: Fraction, delta: Fraction, dim: int
) -> tuple[Fraction, Fraction, dict[str, Fraction], str]:
    if family == "laplace":
        check_laplace_delta(delta)
    log_term = _CTX.ln(_dec(2 / delta))
    if family == "laplace":
        s = eps / 2
        beta = _down(_CTX.divide(_dec(eps), 2 * log_term))
        bound = laplace_delta_bound(s, eps / 2, beta)
        if bound > delta:
            raise UnsupportedRequest(
                "Laplace noise with a smooth scale is proven (ε, δ)-DP only when "
                "δ ≥ e^{ε/2}·exp(-(ε/2 + β)/(e^β - 1)) with β = ε/(2 ln(2/δ)); it fails here",
                f"ε={float(eps):g}, δ={float(delta):g}, bound={float(bound):.3g}",
                "use ε ≤ 1.5 per release (or ε ≤ 2 with δ ≤ 0.1), or a pure-DP family "
                "('cauchy' or 'student_t', whose ε-DP also satisfies (ε, δ)), or 'gaussian'",
            )
        theorem = (
            "(ε, δ)-DP: NRS07 Lemma 2.9 (Laplace admissible), s = ε/2, β = ε/(2 ln(2/δ)), with the exact "
            "sufficient condition δ ≥ e^{ε/2}·exp(-(ε/2+β)/(e^β-1)) checked (docs/math/smooth-sensitivity.md §3.3)"
        )
        return s, beta, {"delta_bound": bound}, theorem
    s = _down(_CTX.divide(_dec(eps), 5 * _CTX.sqrt(2 * log_term)))
    beta = _down(_CTX.divide(_dec(eps), 4 * (dim + log_term)))
    theorem = (
        "(ε, δ)-DP: NRS07 Lemma 2.10 (Gaussian admissible), s = ε/(5√(2 ln(2/δ))), β = ε/(4(d + ln(2/δ))); "
        "S must bound the L2 local sensitivity; constants verified numerically by exact hockey-stick δ"
    )
    return s, beta, {}, theorem


def _lln_sigma(tau: Fraction) -> Fraction:
    """The positive root of 5 σ³/τ - 5 σ² - 1 = 0 (BS19 3.1.1), as the exact value of a double.

    f(σ) < 0 on (0, τ] and f is increasing beyond 2τ/3, so the root is unique and lies in (τ, τ + 1).
    Any σ > τ gives a valid calibration; the root only minimises Var(Z)/s².
    """
    t = float(tau)
    lo, hi = t, t + 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if 5 * mid**3 / t - 5 * mid * mid - 1 < 0:
            lo = mid
        else:
            hi = mid
    return Fraction(hi)


def _zcdp(
    family: str, eps_c: Fraction, sigma: Fraction | None, tau: Fraction | None
) -> tuple[Fraction, Fraction, dict[str, Fraction], str]:
    frac = DEFAULT_SMOOTHING_FRACTION[family] if tau is None else tau
    t = frac * eps_c
    if family == "lln":
        sig = _lln_sigma(frac) if sigma is None else sigma
    else:
        sig = ULN_SIGMA if sigma is None else sigma
        if sig < ULN_SIGMA:
            raise UnsupportedRequest(
                "the uniform log-normal theorem is used only with σ ≥ √2 (BS19 section 3.1; "
                "docs/math/smooth-sensitivity.md §3.3)",
                float(sig),
                "omit sigma (σ = √2) or pass sigma >= 1.4142135623730951",
            )
    if t >= eps_c * sig:
        raise UnsupportedRequest(
            f"the {family.upper()} calibration needs t < ε_c·σ, i.e. smoothing_fraction < σ",
            f"fraction={float(frac):g}, σ={float(sig):g}",
            "pass a larger sigma or a smaller smoothing_fraction",
        )
    sig_d = _dec(sig)
    margin = _CTX.subtract(_dec(eps_c), _CTX.divide(_dec(t), sig_d))
    decay = _CTX.exp(_CTX.multiply(Decimal("-1.5"), _CTX.multiply(sig_d, sig_d)))
    consts = {"sigma": sig, "smoothing_fraction": frac, "epsilon_c": eps_c}
    if family == "lln":
        s = _down(_CTX.multiply(decay, margin))
        theorem = "ρ-zCDP: BS19 §3.1 Laplace log-normal, ε_c = t/σ + e^{3σ²/2}·s, output (ε_c²/2)-zCDP; σ from §3.1.1"
    else:
        s = _down(margin * decay * sig_d * (_PI / 2).sqrt())
        theorem = (
            "ρ-zCDP: BS19 §3.1 uniform log-normal, ε_c = t/σ + e^{3σ²/2}·√(2/(πσ²))·s, output (ε_c²/2)-zCDP; "
            "σ = √2 (the theorem is recalled as needing σ ≥ √2, flagged F; checked numerically)"
        )
    return s, t, consts, theorem


def _public_param(
    value: NumberLike | None, name: str, family: str, owners: tuple[str, ...], *, as_double: bool = True
) -> Fraction | None:
    """A public parameter; shape parameters are stored as the exact value of the double the sampler uses."""
    if value is None:
        return None
    if family not in owners:
        raise UsageError(
            f"{name} applies only to family {' or '.join(map(repr, owners))}", value, f"drop {name} for {family!r}"
        )
    exact = to_fraction(value, name=name)
    return Fraction(float(exact)) if as_double else exact
