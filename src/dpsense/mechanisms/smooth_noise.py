"""Admissible noise for smooth-sensitivity releases: exact calibrations and the clamped, gridded release.

Mechanism (NRS07 section 2; Bun-Steinke 2019 section 3; ALGORITHMS.md section 3.3)::

    M(x) = f(x) + (S(x)/s) * Z,   Z ~ h,   S a beta-smooth upper bound on LS_f (beta = t).

For adjacent x, x' the two output laws differ, in units of S(x)/s, by a shift |Delta| <= s and a
dilation e^lambda, |lambda| <= t (NRS07 "sliding" and "dilation", Def. 2.5 / Lemma 2.6). The plans:

=========== ================ =============================================================================
family      guarantee        exact constants (all chosen from epsilon/delta/rho and public facts only)
=========== ================ =============================================================================
cauchy      epsilon-DP       s = t = epsilon/2 (L_h = D_h = 1)
polynomial  epsilon-DP       h ~ 1/(1+|z|^gamma): s = epsilon/(2 L_h), t = epsilon/(2 D_h),
                             L_h = (gamma-1)^((gamma-1)/gamma), D_h = max(1, gamma-1)
student_t   epsilon-DP       s = epsilon/(2 L), t = epsilon/(2 D), L = (d+1)/(2 sqrt d), D = max(1, d)
laplace     (eps, delta)-DP  s = epsilon/2, beta = epsilon/(2 ln(2/delta)), refused unless
                             delta >= e^{eps/2} exp(-(eps/2 + beta)/(e^beta - 1))
gaussian    (eps, delta)-DP  s = epsilon/(5 sqrt(2 ln(2/delta))), beta = epsilon/(4 (d + ln(2/delta)))
lln         rho-zCDP         eps_c = sqrt(2 rho), t = tau eps_c, sigma = root of 5(eps_c/t)s^3 - 5s^2 - 1,
                             s = e^{-3 sigma^2/2} (eps_c - t/sigma)
uln         rho-zCDP         eps_c = sqrt(2 rho), sigma = sqrt 2, t = tau eps_c,
                             s = (eps_c - t/sigma) sigma sqrt(pi/2) e^{-3 sigma^2/2}
=========== ================ =============================================================================

Why the pure-DP splits hold (ALGORITHMS.md 3.3, re-derived): with u = s(y - f(x))/S(x),
log p_x(y) - log p_x'(y) = [log h(u) - log h(u + Delta)] + [log h(v) - lambda - log h(e^lambda v)],
and the brackets are at most s L_h and t D_h by the mean-value theorem, with
L_h = sup|(log h)'| and D_h = sup|1 + z (log h)'(z)|. So epsilon >= s L_h + t D_h suffices
(NRS07 Lemmas 2.6/2.7, usually so cited). For Student's t this tight split gives
(d+1)/(2 sqrt d) s + max(1, d) t = epsilon; BS19 Thm 31 states the looser epsilon = (d+1) t +
(d+1) s/(2 sqrt d), which our split does *not* satisfy for d >= 1 -- it is valid by the sufficient
condition above (and checked numerically in the tests), not by Thm 31.

Laplace (NRS07 Lemma 2.9) is checked against the exact sufficient condition derived in ALGORITHMS.md
3.3 and refused when it fails (e.g. epsilon = 3). Gaussian constants are NRS07 Lemma 2.10 as usually
cited, verified numerically (exact hockey-stick delta over the shift/dilation box; d = 1, 2, 5, 20).
LLN and ULN are BS19 section 3.1 (output (eps_c^2/2)-zCDP = rho-zCDP; the sigma root is BS19 3.1.1).
The ULN theorem is recalled as requiring sigma >= sqrt 2 (flagged F in ALGORITHMS.md): we use
sigma = sqrt 2 (the float just above it) and refuse smaller sigma; the Renyi divergence is checked
numerically in the tests. Pure-DP families also answer a rho budget: epsilon-DP implies
(epsilon^2/2)-zCDP (BS16 Prop 1.4), so they run at epsilon = sqrt(2 rho).

Every irrational constant is rounded in the safe direction (s and t down, the Laplace delta bound up)
to 20 significant digits, so each stated condition holds exactly for the rational constants stored.
The smoothing parameter tau for LLN/ULN is a public design choice (defaults below); it must never be
tuned on the private data (ALGORITHMS.md 3.3, pitfall 1) -- tune on public or synthetic data.

The release (``release_with_smooth_bound``) clamps to a public range and rounds to a coarse public
grid (at least max(|lo|, |hi|) 2**-20), the float-sampling mitigation described, with its heuristic
extra-delta estimate (~2**-30, no published proof), in ``dpsense.noise.continuous``. The stated loss
is that of the ideal real-arithmetic mechanism. The release never reports the smooth bound, the
noise scale S/s or the true value, and reports no accuracy: the error is proportional to the private
S(x). Adjacency: the guarantee holds for whatever adjacency S is a smooth bound under (the library's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal, localcontext
from fractions import Fraction
from math import isqrt
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from dpsense.core.errors import InvalidBounds, InvalidData, UnsupportedRequest, UsageError
from dpsense.core.numbers import NumberLike, to_fraction
from dpsense.core.privacy_loss import ZCDP, ApproxDP, PrivacyLoss, PureDP, check_delta, check_epsilon, check_rho
from dpsense.mechanisms._validate import as_float_values
from dpsense.mechanisms.result import MechanismResult
from dpsense.noise import continuous

Family = Literal["cauchy", "polynomial", "student_t", "laplace", "gaussian", "lln", "uln"]
FAMILIES: tuple[Family, ...] = ("cauchy", "polynomial", "student_t", "laplace", "gaussian", "lln", "uln")
PURE_FAMILIES = frozenset({"cauchy", "polynomial", "student_t"})

#: Default share of eps_c given to the smoothing parameter, t = tau * eps_c (public design constants).
#: LLN: noise sd / S is proportional to sd(Z)/(s tau) when S_t ~ 1/t (order statistics of dense data);
#: it is flat near its minimum for tau in [0.2, 0.25] (sd(Z)/s ~ 4.2/eps_c at tau = 1/5).
#: ULN (sigma = sqrt 2): the same model is minimised near tau = sigma/2; 1/2 is within 10 %.
DEFAULT_SMOOTHING_FRACTION: dict[str, Fraction] = {"lln": Fraction(1, 5), "uln": Fraction(1, 2)}
#: ULN sigma: the float just above sqrt 2 (float(sqrt 2) > sqrt 2), as in the reference code.
ULN_SIGMA = Fraction(math.sqrt(2.0))
#: The output grid must be at least max(|lo|, |hi|) * 2**-GRID_RATIO_BITS (float-rounding heuristic).
GRID_RATIO_BITS = 20
VERSION = "smooth_noise/{family}@1"

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


@dataclass(frozen=True)
class SmoothNoisePlan:
    """The public, data-independent plan of one smooth-sensitivity release.

    Attributes:
        family: the noise family of Z.
        beta: the smoothing parameter t: S must be a beta-smooth upper bound on the local sensitivity.
        scale_divisor: s; the release adds (S(x)/s) * Z.
        loss: the privacy loss of one release (PureDP, ApproxDP or ZCDP).
        constants: the exact constants of the calibration (e.g. L_h, D_h, gamma, sigma, the checked bound).
        theorem: the guarantee and the result it rests on.
        dimension: number of coordinates (only the Gaussian family supports more than one).

    """

    family: Family
    beta: Fraction
    scale_divisor: Fraction
    loss: PrivacyLoss
    constants: tuple[tuple[str, Fraction], ...]
    theorem: str
    dimension: int = 1

    @property
    def t(self) -> Fraction:
        """Alias of ``beta`` (Bun-Steinke's name)."""
        return self.beta

    @property
    def s(self) -> Fraction:
        """Alias of ``scale_divisor``."""
        return self.scale_divisor

    @property
    def beta_float(self) -> float:
        """The largest double <= beta: pass it to ``smooth_upper_bound(beta=...)`` (never a larger beta)."""
        b = float(self.beta)
        return b if Fraction(b) <= self.beta else float(np.nextafter(b, -math.inf))

    def constant(self, name: str) -> Fraction:
        """One named constant of the calibration."""
        return dict(self.constants)[name]


def _pure(
    family: Family, eps: Fraction, params: dict[str, Fraction]
) -> tuple[Fraction, Fraction, dict[str, Fraction], str]:
    """(s, t, constants, theorem) for the pure-DP families, with s L_h + t D_h <= eps exactly."""
    rule = "ε-DP: sufficient condition ε ≥ s·L_h + t·D_h (NRS07 Lemmas 2.6/2.7 sliding+dilation; ALGORITHMS.md 3.3)"
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
    """An upper bound on e^{ε_s} exp(-(ε_d + β)/(e^β - 1)), the δ of Laplace noise (ALGORITHMS.md 3.3).

    Derivation: the dilation term -λ + (e^λ - 1)|v| exceeds ε_d only when |v| > (ε_d + β)/(e^β - 1)
    (worst λ = β); |v| = |u + Δ| with |Δ| <= s = ε_s, so that event has probability at most
    e^{ε_s} exp(-(ε_d + β)/(e^β - 1)) under Laplace(1).
    """
    with localcontext(_CTX):
        b = _dec(beta)
        expo = (_dec(epsilon_dilation) + b) / (b.exp() - 1)
        return _up((_dec(epsilon_shift) - expo).exp())


def _approx(
    family: Family, eps: Fraction, delta: Fraction, dim: int
) -> tuple[Fraction, Fraction, dict[str, Fraction], str]:
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
            "sufficient condition δ ≥ e^{ε/2}·exp(-(ε/2+β)/(e^β-1)) checked (ALGORITHMS.md 3.3)"
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
    family: Family, eps_c: Fraction, sigma: Fraction | None, tau: Fraction | None
) -> tuple[Fraction, Fraction, dict[str, Fraction], str]:
    frac = DEFAULT_SMOOTHING_FRACTION[family] if tau is None else tau
    t = frac * eps_c
    if family == "lln":
        sig = _lln_sigma(frac) if sigma is None else sigma
    else:
        sig = ULN_SIGMA if sigma is None else sigma
        if sig < ULN_SIGMA:
            raise UnsupportedRequest(
                "the uniform log-normal theorem is used only with σ ≥ √2 (BS19 §3.1; ALGORITHMS.md flags it F)",
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
    value: NumberLike | None, name: str, family: Family, owners: tuple[str, ...], *, as_double: bool = True
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


def plan_smooth_noise(
    *,
    family: Family,
    epsilon: NumberLike | None = None,
    delta: NumberLike | None = None,
    rho: NumberLike | None = None,
    gamma: NumberLike | None = None,
    dof: NumberLike | None = None,
    sigma: NumberLike | None = None,
    smoothing_fraction: NumberLike | None = None,
    dimension: int = 1,
) -> SmoothNoisePlan:
    """The exact, data-independent calibration of a smooth-sensitivity release (table in the module docstring).

    Args:
        family: 'cauchy' | 'polynomial' | 'student_t' (pure ε, or ρ via ε = √(2ρ)), 'laplace' |
            'gaussian' ((ε, δ), δ > 0), 'lln' | 'uln' (ρ-zCDP).
        epsilon: ε for the pure and (ε, δ) families.
        delta: δ for 'laplace' and 'gaussian'.
        rho: ρ for 'lln', 'uln' and (converted) the pure families.
        gamma: tail exponent of 'polynomial', in [1.1, 16].
        dof: degrees of freedom of 'student_t', in [1/4, 10**6].
        sigma: log-normal σ of 'lln' (default: the BS19 optimum) or 'uln' (default √2; ≥ √2).
        smoothing_fraction: τ in t = τ·ε_c for 'lln'/'uln' (public; defaults 1/5 and 1/2).
        dimension: number of coordinates ('gaussian' only; 1 otherwise).

    Returns:
        A frozen ``SmoothNoisePlan``. Compute S with ``beta=plan.beta_float`` and release with
        ``release_with_smooth_bound``.

    Raises:
        UsageError: unknown family, a missing or superfluous parameter, out-of-range parameters.
        UnsupportedRequest: a combination without a proof here (e.g. Laplace at ε = 3).

    """
    if family not in FAMILIES:
        raise UsageError("unknown smooth-noise family", family, f"pass one of {', '.join(FAMILIES)}")
    if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
        raise UsageError("dimension must be an integer >= 1", dimension, "pass the number of coordinates")
    if dimension != 1 and family != "gaussian":
        raise UnsupportedRequest(
            f"family {family!r} is calibrated for one coordinate only", dimension, "use family='gaussian' or d=1"
        )
    g = _public_param(gamma, "gamma", family, ("polynomial",))
    d = _public_param(dof, "dof", family, ("student_t",))
    sig = _public_param(sigma, "sigma", family, ("lln", "uln"))
    tau = _public_param(smoothing_fraction, "smoothing_fraction", family, ("lln", "uln"), as_double=False)
    if family == "polynomial":
        if g is None:
            raise UsageError("family 'polynomial' needs gamma", None, "pass gamma, e.g. gamma=4")
        continuous.check_gamma(float(g))
    if family == "student_t":
        if d is None:
            raise UsageError("family 'student_t' needs dof", None, "pass dof, e.g. dof=3")
        continuous.check_dof(float(d))
    if sig is not None:
        continuous.check_sigma(float(sig))
    if tau is not None and not 0 < tau < 1:
        raise UsageError("smoothing_fraction must lie in (0, 1)", smoothing_fraction, "pass e.g. 1/5")
    params = {"gamma": g or Fraction(0), "dof": d or Fraction(0)}
    with localcontext(_CTX):  # every Decimal operator below works with 50 digits
        return _build(family, epsilon, delta, rho, params, sig, tau, dimension)


def _build(
    family: Family,
    epsilon: NumberLike | None,
    delta: NumberLike | None,
    rho: NumberLike | None,
    params: dict[str, Fraction],
    sigma: Fraction | None,
    tau: Fraction | None,
    dim: int,
) -> SmoothNoisePlan:
    loss: PrivacyLoss
    if family in PURE_FAMILIES:
        if delta is not None or (epsilon is None) == (rho is None):
            raise UsageError(
                f"family {family!r} is pure ε-DP: pass exactly one of epsilon or rho, and no delta",
                {"epsilon": epsilon, "delta": delta, "rho": rho},
                "pass epsilon=... (its ε-DP fits any (ε, δ) budget) or rho=...",
            )
        if rho is not None:
            r = check_rho(rho)
            eps = _sqrt_down(2 * r)
            loss = ZCDP(r)
        else:
            eps = check_epsilon(epsilon if epsilon is not None else 0)
            loss = PureDP(eps)
        s, t, consts, theorem = _pure(family, eps, params)
        if epsilon is None:
            theorem += "; ε = √(2ρ) and ε-DP ⇒ (ε²/2)-zCDP (BS16 Prop 1.4)"
        consts["epsilon"] = eps
    elif family in ("laplace", "gaussian"):
        if epsilon is None or delta is None or rho is not None:
            raise UsageError(
                f"family {family!r} is (ε, δ)-DP: pass epsilon and delta (> 0), no rho",
                {"epsilon": epsilon, "delta": delta, "rho": rho},
                "pass epsilon=..., delta=... (e.g. 1e-8)",
            )
        eps, dlt = check_epsilon(epsilon), check_delta(delta)
        if dlt == 0:
            raise UnsupportedRequest(f"family {family!r} needs δ > 0", delta, "pass delta > 0 or a pure-DP family")
        s, t, consts, theorem = _approx(family, eps, dlt, dim)
        loss = ApproxDP(eps, dlt)
    else:
        if rho is None or epsilon is not None or delta is not None:
            raise UsageError(
                f"family {family!r} is ρ-zCDP: pass rho only",
                {"epsilon": epsilon, "delta": delta, "rho": rho},
                "pass rho=... (convert an (ε, δ) target with the accounting module)",
            )
        r = check_rho(rho)
        s, t, consts, theorem = _zcdp(family, _sqrt_down(2 * r), sigma, tau)
        loss = ZCDP(r)
    if s <= 0 or t <= 0:
        raise UsageError("the calibration underflowed", {"s": s, "t": t}, "pass a larger privacy parameter")
    return SmoothNoisePlan(family, t, s, loss, tuple(sorted(consts.items())), theorem, dim)


def standard_noise(plan: SmoothNoisePlan, n: int) -> NDArray[np.float64]:
    """``n`` draws of the plan's standard noise Z (before the factor S/s), from ``dpsense.noise.continuous``."""
    f = plan.family
    if f == "cauchy":
        return continuous.standard_cauchy(n)
    if f == "polynomial":
        return continuous.polynomial(n, float(plan.constant("gamma")))
    if f == "student_t":
        return continuous.student_t(n, float(plan.constant("dof")))
    if f == "laplace":
        return continuous.standard_laplace(n)
    if f == "gaussian":
        return continuous.standard_normal(n)
    if f == "lln":
        return continuous.laplace_log_normal(n, float(plan.constant("sigma")))
    return continuous.uniform_log_normal(n, float(plan.constant("sigma")))


def noise_variance(plan: SmoothNoisePlan) -> float:
    """Var Z of the standard noise (per coordinate; ``inf`` when infinite). Public: it does not involve S."""
    f = plan.family
    if f == "cauchy":
        return math.inf
    if f == "polynomial":
        g = float(plan.constant("gamma"))
        return math.sin(math.pi / g) / math.sin(3 * math.pi / g) if g > 3 else math.inf
    if f == "student_t":
        d = float(plan.constant("dof"))
        return d / (d - 2) if d > 2 else math.inf
    if f == "laplace":
        return 2.0
    if f == "gaussian":
        return 1.0
    sig = float(plan.constant("sigma"))
    return 2 * math.exp(2 * sig * sig) if f == "lln" else math.exp(2 * sig * sig) / 3


def _check_output(output_grid: float, clamp: tuple[float, float] | None) -> tuple[float, tuple[float, float] | None]:
    g = float(output_grid)
    if not (math.isfinite(g) and g > 0):
        raise UsageError("output_grid must be a finite number > 0", output_grid, "pass a public grid, e.g. 2**-10")
    if clamp is None:
        return g, None
    lo, hi = float(clamp[0]), float(clamp[1])
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise InvalidBounds("clamp must be finite with lo < hi", clamp, "pass public bounds, e.g. (0, 120)")
    if g < max(abs(lo), abs(hi)) * 2.0**-GRID_RATIO_BITS:
        raise UnsupportedRequest(
            f"output_grid must be at least max(|lo|, |hi|)·2^-{GRID_RATIO_BITS} (coarse public grid)",
            output_grid,
            f"pass output_grid >= {max(abs(lo), abs(hi)) * 2.0**-GRID_RATIO_BITS:.3g}",
        )
    return g, (lo, hi)


def release_with_smooth_bound(
    value: Any,
    smooth_bound: float,
    plan: SmoothNoisePlan,
    *,
    output_grid: float,
    clamp: tuple[float, float] | None,
) -> MechanismResult:
    """Release clamp(round_grid(f(x) + (S(x)/s)·Z)) with the plan's guarantee.

    Args:
        value: f(x), a float (or, for a Gaussian plan with d > 1, d floats).
        smooth_bound: S(x), a ``plan.beta``-smooth upper bound on the local sensitivity of f at x
            under the library's adjacency (L2 for d > 1), computed with ``beta=plan.beta_float``.
            Private: it never appears in the result or in errors.
        plan: from ``plan_smooth_noise``.
        output_grid: the public grid the output is rounded to (coarse; never derived from S or the data).
        clamp: the public output range (lo, hi), or None for no clamping (then the float-sampling
            heuristic of ``dpsense.noise.continuous`` has no cell bound; a clamp is recommended).

    Returns:
        A ``MechanismResult`` with the plan's loss, ``accuracy=None`` (the error scales with the
        private S(x)) and only public constants in ``details``.

    """
    if not isinstance(plan, SmoothNoisePlan):
        raise UsageError("plan must come from plan_smooth_noise", type(plan).__name__, "call plan_smooth_noise")
    g, bounds = _check_output(output_grid, clamp)
    values, scalar = as_float_values(value)
    if values.size != plan.dimension:
        raise InvalidData("the value must have the plan's dimension", values.size, f"pass {plan.dimension} number(s)")
    try:
        bound = float(smooth_bound)
    except (TypeError, ValueError):
        bound = math.nan
    if not (math.isfinite(bound) and bound >= 0):
        raise InvalidData(
            "the smooth bound must be finite and >= 0",
            "<withheld: data-dependent>",
            "check the smooth-bound computation",
        )
    inv_s = float(1 / plan.scale_divisor)
    if Fraction(inv_s) < 1 / plan.scale_divisor:
        inv_s = float(np.nextafter(inv_s, math.inf))
    scale = float(np.nextafter(bound * inv_s, math.inf)) if bound > 0 else 0.0  # never below S/s
    noisy = values + scale * standard_noise(plan, values.size)
    out = np.rint(noisy / g) * g
    if bounds is not None:
        out = np.clip(out, bounds[0], bounds[1])
    return MechanismResult(
        value=float(out[0]) if scalar else out,
        loss=plan.loss,
        accuracy=None,
        mechanism=VERSION.format(family=plan.family),
        guarantee=plan.theorem + "; S must be a β-smooth upper bound on the local sensitivity (β = plan.beta)",
        details={
            "family": plan.family,
            "beta": plan.beta,
            "scale_divisor": plan.scale_divisor,
            "constants": dict(plan.constants),
            "noise_variance_of_Z": noise_variance(plan),
            "output_grid": g,
            "clamp": bounds,
            "accuracy": "not reported: the noise is (S(x)/s)·Z and the smooth bound S(x) is private",
            "sampling": "float64 noise from the OS CSPRNG, clamped and rounded to the public grid; the loss "
            "is that of the ideal mechanism, the float mitigation is a heuristic without published proof "
            "(dpsense.noise.continuous)",
        },
    )
