"""Admissible noise for smooth-sensitivity releases: exact calibrations and the clamped, gridded release.

Provides the plans for M(x) = f(x) + (S(x)/s) Z, S a beta-smooth upper bound on LS_f, and
``release_with_smooth_bound``. Guarantee, under whatever adjacency S is a smooth bound for:
epsilon-DP for Cauchy, polynomial tails and Student's t (the shift/dilation condition
epsilon >= s L_h + t D_h, NRS07 Lemmas 2.6/2.7 as usually cited, re-derived); (epsilon, delta)-DP for
Laplace (NRS07 Lemma 2.9) and Gaussian (Lemma 2.10); rho-zCDP for LLN and ULN (Bun-Steinke 2019,
section 3.1). Constants, the table and the notes in docs/math/smooth-sensitivity.md §3.3. Refused:
Laplace unless delta <= 2/e and the exact delta condition holds; ULN with sigma < sqrt 2. tau is a
public design choice, never tuned on the data. The release rounds to a public grid and clamps (a
heuristic float mitigation, ``dpsense.noise.continuous``) and reports neither S, the scale, the true
value nor an accuracy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import localcontext
from fractions import Fraction
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from dpsense.core.checks import integer_in
from dpsense.core.errors import InvalidBounds, InvalidData, UnsupportedRequest, UsageError
from dpsense.core.numbers import NumberLike
from dpsense.core.privacy_loss import ZCDP, ApproxDP, PrivacyLoss, PureDP, check_delta, check_epsilon, check_rho
from dpsense.mechanisms._smooth_calibration import (
    _CTX,
    _approx,
    _public_param,
    _pure,
    _sqrt_down,
    _zcdp,
)
from dpsense.mechanisms._smooth_calibration import DEFAULT_SMOOTHING_FRACTION as DEFAULT_SMOOTHING_FRACTION
from dpsense.mechanisms._smooth_calibration import ULN_SIGMA as ULN_SIGMA
from dpsense.mechanisms._smooth_calibration import laplace_delta_bound as laplace_delta_bound
from dpsense.mechanisms._validate import as_float_values
from dpsense.mechanisms.result import MechanismResult
from dpsense.noise import continuous

Family = Literal["cauchy", "polynomial", "student_t", "laplace", "gaussian", "lln", "uln"]
FAMILIES: tuple[Family, ...] = ("cauchy", "polynomial", "student_t", "laplace", "gaussian", "lln", "uln")
PURE_FAMILIES = frozenset({"cauchy", "polynomial", "student_t"})

#: The output grid must be at least max(|lo|, |hi|) * 2**-GRID_RATIO_BITS (float-rounding heuristic).
GRID_RATIO_BITS = 20
VERSION = "smooth_noise/{family}@1"


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
    """The exact, data-independent calibration of a smooth release (docs/math/smooth-sensitivity.md §3.3 table).

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
    if not integer_in(dimension, 1):
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


def gridded_noisy_values(
    values: NDArray[np.float64],
    smooth_bound: float,
    plan: SmoothNoisePlan,
    *,
    output_grid: float,
    clamp: tuple[float, float] | None,
) -> NDArray[np.float64]:
    """The arithmetic of one release per entry of ``values``: clamp(round_g(f + (S/s) Z)), ties by a fair bit.

    1/s and the scale S/s are rounded up (the scale is never below S/s); one Z per entry from
    ``standard_noise``; the sum is divided by the grid g and rounded to the nearest integer, an exact
    tie (a quotient on a half-integer) going up or down by a fresh fair bit from
    ``dpsense.noise.continuous.fair_bits`` (drawn for every entry, tie or not, so the draws do not
    depend on the data); then the clamp. Inputs are checked by the caller (``release_with_smooth_bound``;
    the audit's ``SmoothLaw.sample`` runs the same function).
    """
    inv_s = float(1 / plan.scale_divisor)
    if Fraction(inv_s) < 1 / plan.scale_divisor:
        inv_s = float(np.nextafter(inv_s, math.inf))
    scale = float(np.nextafter(smooth_bound * inv_s, math.inf)) if smooth_bound > 0 else 0.0  # never below S/s
    noisy = values + scale * standard_noise(plan, values.size)
    coin = continuous.fair_bits(values.size)
    quotient = noisy / output_grid
    below = np.floor(quotient)
    cells = np.where(quotient - below == 0.5, below + coin, np.rint(quotient))
    out = cells * output_grid
    if clamp is not None:
        out = np.clip(out, clamp[0], clamp[1])
    return np.asarray(out, dtype=np.float64)


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
    out = gridded_noisy_values(values, bound, plan, output_grid=g, clamp=bounds)
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
