"""Smooth-sensitivity noise: exact plans, refusals, a release that hides S(x), and numerical privacy checks.

The plans rest on sufficient conditions (docs/math/smooth-sensitivity.md §3.3); here every calibration is checked
numerically against the adversary's whole box: a shift |Delta| <= s and a dilation |lambda| <= t in
units of S(x)/s. For x, x' adjacent, the law of the output under x' in those units is c + e^lambda Z
with |c| <= s min(1, e^lambda) (because |f(x) - f(x')| <= min(S(x), S(x'))), a subset of the box that
is closed under swapping x and x'; so bounding the divergence of (Z, c + e^lambda Z) over the box in
one direction bounds it for every adjacent ordered pair.
"""

from __future__ import annotations

import io
import itertools
import math
import re
import tokenize
from decimal import Context, Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import special, stats

import dpsense
from dpsense.core import ZCDP, ApproxDP, InvalidBounds, InvalidData, PureDP, UnsupportedRequest, UsageError
from dpsense.mechanisms.smooth_noise import (
    SmoothNoisePlan,
    laplace_delta_bound,
    noise_variance,
    plan_smooth_noise,
    release_with_smooth_bound,
    standard_noise,
)
from dpsense.noise import continuous
from dpsense.noise.testing import deterministic_entropy

# ---------------------------------------------------------------------------------------------
# Numerical oracles
# ---------------------------------------------------------------------------------------------

_U = np.concatenate([-np.logspace(-4, 9, 20_000)[::-1], [0.0], np.logspace(-4, 9, 20_000)])


def worst_pure_loss(logh, s: float, t: float, n: int = 11) -> float:
    """max over the (Delta, lambda) box and a wide z-grid of |log p_x - log p_x'| (unnormalised log h)."""
    best = 0.0
    base = logh(_U)
    for delta in np.linspace(-s, s, n):
        for lam in np.linspace(-t, t, n):
            best = max(best, float(np.max(np.abs(base - lam - logh(np.exp(lam) * (_U + delta))))))
    return best


def log_poly(gamma: float):
    return lambda z: -np.log1p(np.abs(z) ** gamma)


def log_student(d: float):
    return lambda z: -(d + 1) / 2 * np.log1p(z * z / d)


def _int_exp(a: float, b: float, lo: float, hi: float) -> float:
    """Integral of exp(a u + b) over [lo, hi] (a != 0 or a finite interval)."""
    if hi <= lo:
        return 0.0
    if a == 0:
        return math.exp(b) * (hi - lo)

    def prim(u: float) -> float:
        if math.isinf(u):
            return 0.0
        return math.exp(a * u + b) / a

    return prim(hi) - prim(lo)


def laplace_hockey_stick(eps: float, c: float, lam: float) -> float:
    """Exact delta(eps) of Laplace(0, 1) against Laplace(c, e^lam): piecewise log-linear, integrated exactly."""
    sig = math.exp(lam)
    edges = [-math.inf, *sorted({0.0, c}), math.inf]
    total = 0.0
    for lo, hi in itertools.pairwise(edges):
        mid = (lo + hi) / 2 if math.isfinite(lo) and math.isfinite(hi) else (hi - 1 if math.isfinite(hi) else lo + 1)
        sp, sq = (1.0 if mid > 0 else -1.0), (1.0 if mid > c else -1.0)
        ap, bp = -sp, math.log(0.5)
        aq, bq = -sq / sig, sq * c / sig + math.log(0.5 / sig)
        k, m = ap - aq, bp - bq - eps  # log p - log q - eps = k u + m on this piece
        if k == 0:
            rlo, rhi = (lo, hi) if m > 0 else (0.0, 0.0)
        elif k > 0:
            rlo, rhi = max(lo, -m / k), hi
        else:
            rlo, rhi = lo, min(hi, -m / k)
        if rhi > rlo:
            total += _int_exp(ap, bp, rlo, rhi) - math.exp(eps) * _int_exp(aq, bq, rlo, rhi)
    return total


def _normal_mass(intervals: list[tuple[float, float]], mu: float, sd: float) -> float:
    return sum(float(stats.norm.cdf((hi - mu) / sd) - stats.norm.cdf((lo - mu) / sd)) for lo, hi in intervals)


def _quadratic_region(a: float, b: float, c0: float) -> list[tuple[float, float]]:
    """{u : a u^2 + b u + c0 > 0} as a list of intervals."""
    if a == 0:
        if b == 0:
            return [(-math.inf, math.inf)] if c0 > 0 else []
        return [(-c0 / b, math.inf)] if b > 0 else [(-math.inf, -c0 / b)]
    disc = b * b - 4 * a * c0
    if disc <= 0:
        return [(-math.inf, math.inf)] if a > 0 else []
    r1, r2 = sorted(((-b - math.sqrt(disc)) / (2 * a), (-b + math.sqrt(disc)) / (2 * a)))
    return [(-math.inf, r1), (r2, math.inf)] if a > 0 else [(r1, r2)]


def gaussian_hockey_stick(eps: float, c: float, lam: float, d: int = 1) -> float:
    """Exact delta(eps) of N(0, I_d) against N(c e_1, e^{2 lam} I_d).

    log p - log q = A R + phi(u_1) with R = |u_2..d|^2 and A = (e^{-2 lam} - 1)/2. When d = 1 or
    A = 0 the event {phi(u_1) > eps} is a quadratic region (closed form); otherwise quadrature over
    u_1 with the chi-square law of R.
    """
    sig = math.exp(lam)
    A = (1 / sig**2 - 1) / 2
    if d == 1 or lam == 0:
        # phi(u) - eps = A u^2 - (c/sig^2) u + c^2/(2 sig^2) + d lam - eps
        region = _quadratic_region(A, -c / sig**2, c * c / (2 * sig**2) + d * lam - eps)
        return _normal_mass(region, 0.0, 1.0) - math.exp(eps) * _normal_mass(region, c, sig)

    def phi(u1: np.ndarray) -> np.ndarray:
        return -(u1**2) / 2 + (u1 - c) ** 2 / (2 * sig**2) + d * lam

    def p_event(u1: np.ndarray, scale_r: float) -> np.ndarray:
        k = eps - phi(u1)  # the event is A * scale_r * chi2_{d-1} > k
        a = A * scale_r
        if a > 0:
            return np.asarray(stats.chi2.sf(np.maximum(k / a, 0), d - 1))
        return np.where(k / a > 0, stats.chi2.cdf(np.maximum(k / a, 0), d - 1), 0.0)

    x = np.linspace(-40, 40, 40_001)
    w = stats.norm.pdf(x) * (x[1] - x[0])
    under_p = float(np.sum(w * p_event(x, 1.0)))
    under_q = float(np.sum(w * p_event(c + sig * x, sig**2)))
    return under_p - math.exp(eps) * under_q


def worst_delta(hockey, eps: float, s: float, t: float, n: int = 21) -> float:
    return max(hockey(eps, float(c), float(lam)) for c in np.linspace(-s, s, n) for lam in np.linspace(-t, t, n))


_LOG_HALF = math.log(0.5)


def lln_logpdf(z: np.ndarray, sigma: float, h: float = 0.05, k: int = 200) -> np.ndarray:
    """log density of X e^{sigma Y}: a log-concave integral over y, summed around its (bisected) peak."""
    z = np.abs(np.asarray(z, dtype=float))
    out = np.empty_like(z)
    for i in range(0, z.size, 2000):
        a = z[i : i + 2000]
        lo = np.full(a.shape, -sigma - 1.0)
        hi = np.abs(np.log(np.maximum(a, 1e-300))) / sigma + 10 + sigma
        for _ in range(80):  # psi'(y) = -y - sigma + sigma a e^{-sigma y} is decreasing
            mid = (lo + hi) / 2
            pos = -mid - sigma + sigma * a * np.exp(-sigma * mid) > 0
            lo, hi = np.where(pos, mid, lo), np.where(pos, hi, mid)
        y = lo[:, None] + h * np.arange(-k, k + 1)[None, :]
        psi = -0.5 * y * y - sigma * y - a[:, None] * np.exp(-sigma * y)
        out[i : i + 2000] = special.logsumexp(psi, axis=1) + math.log(h) - 0.5 * math.log(2 * math.pi) + _LOG_HALF
    return out


def uln_logpdf(z: np.ndarray, sigma: float) -> np.ndarray:
    """log density of U e^{sigma Y}: (1/2) e^{sigma^2/2} Phi(-ln|z|/sigma - sigma)."""
    z = np.abs(np.asarray(z, dtype=float))
    with np.errstate(divide="ignore"):
        arg = -np.log(z) / sigma - sigma
    return _LOG_HALF + sigma * sigma / 2 + special.log_ndtr(arg)


ALPHAS = (1.25, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 20.0, 30.0, 40.0)


def worst_renyi_rate(logpdf, s: float, t: float, w_max: float = 30.0, hw: float = 0.01) -> tuple[float, float]:
    """(log of the total mass, max over corners and ALPHAS of D_alpha(Z || c + e^lam Z)/alpha), u = sinh(w)."""
    w = np.arange(-w_max, w_max + hw / 2, hw)
    u = np.sinh(w)
    log_jac = np.log(np.cosh(w)) + math.log(hw)
    lp = logpdf(u)
    worst = 0.0
    for c in (0.0, s):  # Z is symmetric, so c and -c give the same divergences
        for lam in (-t, 0.0, t):
            if c == 0 and lam == 0:
                continue
            lq = -lam + logpdf((u - c) * math.exp(-lam))
            for a in ALPHAS:
                worst = max(worst, float(special.logsumexp(a * lp + (1 - a) * lq + log_jac)) / ((a - 1) * a))
    return float(special.logsumexp(lp + log_jac)), worst


# ---------------------------------------------------------------------------------------------
# Plans: exact constants
# ---------------------------------------------------------------------------------------------


def test_cauchy_plan_is_the_tight_split() -> None:
    plan = plan_smooth_noise(family="cauchy", epsilon="0.8")
    assert plan.s == plan.t == plan.beta == Fraction(2, 5)
    assert plan.loss == PureDP("0.8")
    assert plan.constant("L_h") == plan.constant("D_h") == 1
    assert "ε ≥ s·L_h + t·D_h" in plan.theorem


@pytest.mark.parametrize("gamma", ["1.1", "1.5", "2", "3", "4", "8", "16"])
def test_polynomial_plan_meets_the_condition_exactly(gamma: str) -> None:
    eps = Fraction(1)
    plan = plan_smooth_noise(family="polynomial", epsilon=1, gamma=gamma)
    g = float(plan.constant("gamma"))
    L, D = plan.constant("L_h"), plan.constant("D_h")
    exact_L = (g - 1) ** ((g - 1) / g)
    assert float(L) == pytest.approx(exact_L, rel=1e-15)
    assert Fraction(exact_L) * (1 - Fraction(1, 10**14)) <= L  # rounded up, not down
    assert max(1, Fraction(g) - 1) == D
    assert plan.s * L + plan.t * D <= eps
    assert float(plan.s * L + plan.t * D) == pytest.approx(1, rel=1e-15)


@pytest.mark.parametrize("dof", ["0.25", "1", "2", "3", "4", "10", "1000"])
def _dec(q: Fraction) -> Decimal:
    return Context(prec=60).divide(Decimal(q.numerator), Decimal(q.denominator))


@pytest.mark.parametrize("dof", ["0.25", "1", "2", "3", "4", "10", "1000"])
def test_student_plan_meets_the_condition_exactly(dof: str) -> None:
    plan = plan_smooth_noise(family="student_t", epsilon=2, dof=dof)
    d = plan.constant("dof")
    root_d = Context(prec=60).sqrt(_dec(d))
    lhs = _dec(plan.s) * _dec(d + 1) / (2 * root_d) + _dec(plan.t) * _dec(max(Fraction(1), d))
    assert lhs <= 2
    assert float(lhs) == pytest.approx(2, rel=1e-15)
    if d == 1:
        assert plan.s == plan.t == 1  # Student's t(1) is Cauchy: s = t = eps/2


def test_laplace_plan_constants_and_bound() -> None:
    plan = plan_smooth_noise(family="laplace", epsilon=1, delta="1e-6")
    assert plan.s == Fraction(1, 2)
    assert float(plan.beta) == pytest.approx(1 / (2 * math.log(2e6)), rel=1e-15)
    assert plan.beta <= Fraction(1) / (2 * Fraction(math.log(2e6)) * (1 - Fraction(1, 10**15)))
    bound = plan.constant("delta_bound")
    assert bound <= Fraction("1e-6")
    ref = math.exp(0.5) * math.exp(-(0.5 + float(plan.beta)) / math.expm1(float(plan.beta)))
    assert float(bound) == pytest.approx(ref, rel=1e-12)
    assert plan.loss == ApproxDP(1, "1e-6")


@pytest.mark.parametrize(("eps", "delta"), [("3", "1e-6"), ("2", "0.5"), ("2.5", "1e-10")])
def test_laplace_refused_when_the_sufficient_condition_fails(eps: str, delta: str) -> None:
    with pytest.raises(UnsupportedRequest, match="cauchy"):
        plan_smooth_noise(family="laplace", epsilon=eps, delta=delta)


@pytest.mark.parametrize(("eps", "delta"), [("1.5", "0.5"), ("1.5", "1e-15"), ("2", "0.1"), ("0.01", "1e-12")])
def test_laplace_accepted_where_the_doc_says(eps: str, delta: str) -> None:
    plan = plan_smooth_noise(family="laplace", epsilon=eps, delta=delta)
    assert plan.constant("delta_bound") <= Fraction(delta)


@pytest.mark.parametrize("dim", [1, 3])
def test_gaussian_plan_constants(dim: int) -> None:
    plan = plan_smooth_noise(family="gaussian", epsilon="0.5", delta="1e-8", dimension=dim)
    L = math.log(2e8)
    assert float(plan.s) == pytest.approx(0.5 / (5 * math.sqrt(2 * L)), rel=1e-15)
    assert float(plan.beta) == pytest.approx(0.5 / (4 * (dim + L)), rel=1e-15)
    assert plan.dimension == dim


def _lln_epsilon(plan: SmoothNoisePlan) -> Decimal:
    ctx = Context(prec=60)
    sig, t, s = _dec(plan.constant("sigma")), _dec(plan.t), _dec(plan.s)
    growth = ctx.exp(Decimal("1.5") * sig * sig)
    if plan.family == "lln":
        return t / sig + growth * s
    pi = Decimal("3.1415926535897932384626433832795028841971693993751058")
    return t / sig + growth * ctx.sqrt(2 / (pi * sig * sig)) * s


@pytest.mark.parametrize("rho", ["0.005", "0.125", "0.5", "2"])
@pytest.mark.parametrize("family", ["lln", "uln"])
def test_zcdp_plans_meet_the_bs19_condition(rho: str, family: str) -> None:
    plan = plan_smooth_noise(family=family, rho=rho)  # type: ignore[arg-type]
    eps_c = (2 * Decimal(rho)).sqrt(Context(prec=60))
    got = _lln_epsilon(plan)
    assert got <= eps_c
    assert float(got) == pytest.approx(float(eps_c), rel=1e-15)
    assert plan.loss == ZCDP(rho)
    sig = float(plan.constant("sigma"))
    tau = float(plan.constant("smoothing_fraction"))
    assert float(plan.t) == pytest.approx(tau * float(eps_c), rel=1e-15)
    if family == "lln":
        assert tau == 0.2
        assert 5 * sig**3 / tau - 5 * sig**2 - 1 == pytest.approx(0, abs=1e-12)  # BS19 3.1.1 optimum
    else:
        assert sig == math.sqrt(2) and Fraction(sig) ** 2 >= 2


def test_lln_sigma_and_fraction_are_public_knobs() -> None:
    plan = plan_smooth_noise(family="lln", rho="0.5", sigma="0.6", smoothing_fraction="0.1")
    assert plan.constant("sigma") == Fraction(0.6)
    assert plan.t == Fraction(1, 10)
    assert _lln_epsilon(plan) <= 1
    with pytest.raises(UnsupportedRequest, match="t < ε_c·σ"):
        plan_smooth_noise(family="lln", rho="0.5", sigma="0.1", smoothing_fraction="0.2")
    with pytest.raises(UnsupportedRequest, match="σ ≥ √2"):
        plan_smooth_noise(family="uln", rho="0.5", sigma="1.4")


def test_pure_families_answer_a_rho_budget() -> None:
    plan = plan_smooth_noise(family="student_t", rho="0.5", dof=3)
    assert plan.loss == ZCDP("0.5")
    assert plan.constant("epsilon") <= 1 and float(plan.constant("epsilon")) == pytest.approx(1, rel=1e-15)
    rho = Fraction(9, 8)  # sqrt(2 rho) = 1.5 exactly
    cauchy = plan_smooth_noise(family="cauchy", rho=rho)
    assert float(cauchy.s) == pytest.approx(0.75, rel=1e-15) and cauchy.s <= Fraction(3, 4)


def test_beta_float_never_exceeds_beta() -> None:
    for plan in (
        plan_smooth_noise(family="laplace", epsilon="0.3", delta="1e-9"),
        plan_smooth_noise(family="polynomial", epsilon="0.7", gamma=3),
        plan_smooth_noise(family="lln", rho="0.3"),
    ):
        assert Fraction(plan.beta_float) <= plan.beta
        assert plan.beta_float == pytest.approx(float(plan.beta), rel=1e-15)


def test_plan_does_not_depend_on_the_ambient_decimal_context() -> None:
    import decimal

    kwargs = [
        {"family": "uln", "rho": "0.3"},
        {"family": "gaussian", "epsilon": 1, "delta": "1e-7", "dimension": 3},
        {"family": "laplace", "epsilon": "1.2", "delta": "1e-9"},
        {"family": "polynomial", "epsilon": "0.9", "gamma": "3.5"},
    ]
    plans = [plan_smooth_noise(**kw) for kw in kwargs]  # type: ignore[arg-type]
    with decimal.localcontext() as ctx:
        ctx.prec = 5
        assert [plan_smooth_noise(**kw) for kw in kwargs] == plans  # type: ignore[arg-type]


def test_plan_is_frozen() -> None:
    plan = plan_smooth_noise(family="cauchy", epsilon=1)
    with pytest.raises(AttributeError):
        plan.beta = Fraction(1)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"family": "median"}, UsageError),
        ({"family": "cauchy"}, UsageError),
        ({"family": "cauchy", "epsilon": 1, "delta": "1e-6"}, UsageError),
        ({"family": "cauchy", "epsilon": 1, "rho": 1}, UsageError),
        ({"family": "cauchy", "epsilon": 0}, UsageError),
        ({"family": "cauchy", "epsilon": 1, "gamma": 3}, UsageError),
        ({"family": "polynomial", "epsilon": 1}, UsageError),
        ({"family": "polynomial", "epsilon": 1, "gamma": 1}, UsageError),
        ({"family": "polynomial", "epsilon": 1, "gamma": 40}, UsageError),
        ({"family": "student_t", "epsilon": 1}, UsageError),
        ({"family": "student_t", "epsilon": 1, "dof": "0.1"}, UsageError),
        ({"family": "laplace", "epsilon": 1}, UsageError),
        ({"family": "laplace", "epsilon": 1, "delta": 0}, UnsupportedRequest),
        ({"family": "gaussian", "epsilon": 1, "delta": 1}, UsageError),
        ({"family": "lln", "epsilon": 1}, UsageError),
        ({"family": "lln", "rho": 1, "smoothing_fraction": 1}, UsageError),
        ({"family": "cauchy", "epsilon": 1, "smoothing_fraction": "0.1"}, UsageError),
        ({"family": "cauchy", "epsilon": 1, "sigma": "0.5"}, UsageError),
        ({"family": "cauchy", "epsilon": 1, "dimension": 2}, UnsupportedRequest),
        ({"family": "gaussian", "epsilon": 1, "delta": "1e-6", "dimension": 0}, UsageError),
        ({"family": "lln", "rho": 1, "sigma": 9}, UsageError),
    ],
)
def test_bad_requests_are_refused(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        plan_smooth_noise(**kwargs)  # type: ignore[arg-type]


def test_laplace_delta_bound_matches_the_closed_form() -> None:
    b = laplace_delta_bound(Fraction(1, 2), Fraction(1, 2), Fraction(1, 10))
    assert float(b) == pytest.approx(math.exp(0.5 - 0.6 / math.expm1(0.1)), rel=1e-15)


# ---------------------------------------------------------------------------------------------
# Numerical privacy checks of every calibration
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "logh"),
    [
        ({"family": "cauchy", "epsilon": "0.1"}, log_poly(2)),
        ({"family": "cauchy", "epsilon": "1"}, log_poly(2)),
        ({"family": "cauchy", "epsilon": "5"}, log_poly(2)),
        ({"family": "polynomial", "epsilon": 1, "gamma": "1.1"}, log_poly(1.1)),
        ({"family": "polynomial", "epsilon": 1, "gamma": "1.5"}, log_poly(1.5)),
        ({"family": "polynomial", "epsilon": 1, "gamma": "4"}, log_poly(4)),
        ({"family": "polynomial", "epsilon": 1, "gamma": "10"}, log_poly(10)),
        ({"family": "polynomial", "epsilon": 2, "gamma": "16"}, log_poly(16)),
        ({"family": "student_t", "epsilon": 1, "dof": "0.25"}, log_student(0.25)),
        ({"family": "student_t", "epsilon": 1, "dof": "1"}, log_student(1)),
        ({"family": "student_t", "epsilon": 1, "dof": "3"}, log_student(3)),
        ({"family": "student_t", "epsilon": 1, "dof": "2.5"}, log_student(2.5)),
        ({"family": "student_t", "epsilon": 3, "dof": "30"}, log_student(30)),
    ],
)
def test_pure_plans_keep_the_log_ratio_below_epsilon(kwargs: dict[str, object], logh) -> None:
    plan = plan_smooth_noise(**kwargs)  # type: ignore[arg-type]
    eps = float(plan.constant("epsilon"))
    worst = worst_pure_loss(logh, float(plan.s), float(plan.t))
    assert worst <= eps * (1 + 1e-9)
    assert worst >= 0.6 * eps  # and the split is not wastefully loose


def test_bs19_theorem_31_student_calibration_is_valid_and_looser() -> None:
    eps, d = 1.0, 3.0
    t = 0.1 * eps / (d + 1)
    s = 2 * math.sqrt(d) * (eps / (d + 1) - t)  # (d+1) t + (d+1) s/(2 sqrt d) = eps
    assert worst_pure_loss(log_student(d), s, t) <= eps
    tight = plan_smooth_noise(family="student_t", epsilon=1, dof=3)
    assert (d + 1) * float(tight.t) + (d + 1) * float(tight.s) / (2 * math.sqrt(d)) > eps  # tight split is not Thm 31's


def test_literature_split_eps_over_4gamma_fails_for_large_gamma() -> None:
    # alpha = eps/(4 gamma), beta = eps/gamma (docs/math/smooth-sensitivity.md §3.3): exceeds eps from gamma = 8 on
    assert worst_pure_loss(log_poly(10), 1 / 40, 1 / 10) > 1.04


@pytest.mark.parametrize(
    ("eps", "delta"), [("0.1", "1e-9"), ("0.5", "1e-6"), ("1", "1e-8"), ("1.5", "0.5"), ("2", "0.1"), ("1", "1e-12")]
)
def test_laplace_plan_exact_delta_is_below_target(eps: str, delta: str) -> None:
    plan = plan_smooth_noise(family="laplace", epsilon=eps, delta=delta)
    worst = worst_delta(laplace_hockey_stick, float(eps), float(plan.s), float(plan.t))
    assert 0 < worst <= float(delta)


def test_seed_claim_laplace_with_beta_eps_over_2ln2_over_eps_is_not_pure() -> None:
    """docs/math/smooth-sensitivity.md §3.4: beta = eps/(2 ln(2/eps)) with (2S/eps) Lap(1) is not eps-DP.

    delta ~ 0.15 at eps = 1.
    """
    eps = 1.0
    beta = eps / (2 * math.log(2 / eps))
    worst = worst_delta(laplace_hockey_stick, eps, eps / 2, beta)
    assert worst == pytest.approx(0.1525, abs=5e-4)
    # and the unbounded ratio: a dilation by e^beta makes -beta + (e^beta - 1)|z| exceed any epsilon
    assert -beta + math.expm1(beta) * 1e3 > 100


def test_laplace_hockey_stick_oracle_matches_pure_shift_formula() -> None:
    # Laplace(0,1) vs Laplace(1,1): delta(eps) = 1 - exp((eps - 1)/2) (docs/math/composition.md)
    for e in (0.0, 0.3, 0.9):
        assert laplace_hockey_stick(e, 1.0, 0.0) == pytest.approx(1 - math.exp((e - 1) / 2), rel=1e-12)


@pytest.mark.parametrize(("eps", "delta"), [("0.1", "1e-12"), ("1", "1e-6"), ("3", "1e-6"), ("5", "0.5")])
def test_gaussian_plan_exact_delta_is_below_target_d1(eps: str, delta: str) -> None:
    plan = plan_smooth_noise(family="gaussian", epsilon=eps, delta=delta)
    worst = worst_delta(gaussian_hockey_stick, float(eps), float(plan.s), float(plan.t), n=9)
    assert worst <= float(delta) * 0.1  # very loose, as docs/math/smooth-sensitivity.md §3.3 says


@pytest.mark.parametrize("eps", [1.0, 3.0])
@pytest.mark.parametrize("dim", [2, 5, 20])
def test_gaussian_plan_exact_delta_is_below_target_multidim(dim: int, eps: float) -> None:
    plan = plan_smooth_noise(family="gaussian", epsilon=eps, delta="1e-6", dimension=dim)
    s, t = float(plan.s), float(plan.t)  # worst shift along e_1 (the law is rotation invariant)
    worst = max(gaussian_hockey_stick(eps, c, lam, dim) for c in (0.0, s) for lam in (-t, 0.0, t))
    assert worst <= 1e-6


def test_gaussian_oracle_matches_balle_wang_for_a_pure_shift() -> None:
    # N(0,1) vs N(c,1): delta = Phi(c/2 - eps/c) - e^eps Phi(-c/2 - eps/c)
    for d in (1, 3):
        c, e = 0.8, 0.4
        ref = stats.norm.cdf(c / 2 - e / c) - math.exp(e) * stats.norm.cdf(-c / 2 - e / c)
        assert gaussian_hockey_stick(e, c, 0.0, d) == pytest.approx(ref, rel=1e-9)


def test_gaussian_oracle_quadrature_matches_chi_square_for_a_pure_dilation() -> None:
    # d > 1 with a dilation only (c = 0): the event is A R_total > eps - d lam with R_total ~ chi2_d
    lam, e, d = 0.3, 0.2, 4
    sig = math.exp(lam)
    A = (1 / sig**2 - 1) / 2  # < 0
    k = e - d * lam
    under_p = stats.chi2.cdf(k / A, d) if k / A > 0 else 0.0
    under_q = stats.chi2.cdf(k / (A * sig**2), d) if k / A > 0 else 0.0
    ref = under_p - math.exp(e) * under_q
    assert gaussian_hockey_stick(e, 0.0, lam, d) == pytest.approx(ref, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("rho", ["0.02", "0.5", "2"])
def test_lln_plan_renyi_rate_is_below_rho(rho: str) -> None:
    plan = plan_smooth_noise(family="lln", rho=rho)
    sig = float(plan.constant("sigma"))
    log_mass, worst = worst_renyi_rate(lambda z: lln_logpdf(z, sig), float(plan.s), float(plan.t))
    assert abs(log_mass) < 1e-4  # the quadrature integrates the density to 1
    assert worst <= float(rho)


@pytest.mark.parametrize("rho", ["0.02", "0.5", "2"])
def test_uln_plan_renyi_rate_is_below_rho(rho: str) -> None:
    plan = plan_smooth_noise(family="uln", rho=rho)
    sig = float(plan.constant("sigma"))
    log_mass, worst = worst_renyi_rate(lambda z: uln_logpdf(z, sig), float(plan.s), float(plan.t))
    assert abs(log_mass) < 1e-4
    assert worst <= float(rho)


@pytest.mark.parametrize("family", ["lln", "uln"])
def test_renyi_check_has_power(family: str) -> None:
    """Tripling s and t (9x the loss to first order) must break the rho bound: the check is not vacuous."""
    plan = plan_smooth_noise(family=family, rho="0.5")  # type: ignore[arg-type]
    sig = float(plan.constant("sigma"))
    logpdf = (lambda z: lln_logpdf(z, sig)) if family == "lln" else (lambda z: uln_logpdf(z, sig))
    assert worst_renyi_rate(logpdf, 3 * float(plan.s), 3 * float(plan.t))[1] > 0.5


def test_lln_density_oracle_against_direct_quadrature() -> None:
    from scipy import integrate

    sig = 0.5
    for z in (0.0, 0.3, 2.0, 15.0):
        ref = integrate.quad(
            lambda y, z=z: stats.norm.pdf(y) * 0.5 * math.exp(-sig * y) * math.exp(-z * math.exp(-sig * y)), -30, 30
        )[0]
        assert math.exp(lln_logpdf(np.array([z]), sig)[0]) == pytest.approx(ref, rel=1e-8)


# ---------------------------------------------------------------------------------------------
# The release
# ---------------------------------------------------------------------------------------------


def _walk(obj: object) -> list[object]:
    if isinstance(obj, dict):
        return [x for k, v in obj.items() for x in (*_walk(k), *_walk(v))]
    if isinstance(obj, (list, tuple)):
        return [x for v in obj for x in _walk(v)]
    return [obj]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"family": "cauchy", "epsilon": 1},
        {"family": "polynomial", "epsilon": 1, "gamma": 4},
        {"family": "student_t", "epsilon": 1, "dof": 3},
        {"family": "laplace", "epsilon": 1, "delta": "1e-6"},
        {"family": "gaussian", "epsilon": 1, "delta": "1e-6"},
        {"family": "lln", "rho": "0.5"},
        {"family": "uln", "rho": "0.5"},
    ],
)
def test_release_reveals_neither_the_bound_nor_the_value(kwargs: dict[str, object]) -> None:
    plan = plan_smooth_noise(**kwargs)  # type: ignore[arg-type]
    value, bound = 37.123456789, 0.987654321
    res = release_with_smooth_bound(value, bound, plan, output_grid=0.25, clamp=(0.0, 120.0))
    assert res.loss == plan.loss
    assert res.accuracy is None
    assert "private" in res.details["accuracy"]
    assert res.value % 0.25 == 0 and 0 <= res.value <= 120
    secrets_ = {value, bound, bound / float(plan.s), bound * float(1 / plan.s)}
    text = repr(res)
    for secret in secrets_:
        assert repr(secret) not in text and f"{secret:.6g}" not in text
    for leaf in [*_walk(res.details), res.guarantee, res.mechanism]:
        if isinstance(leaf, (float, Fraction)):
            assert all(not math.isclose(float(leaf), x, rel_tol=1e-9) for x in secrets_)


def test_release_rounds_and_clamps() -> None:
    plan = plan_smooth_noise(family="cauchy", epsilon=1)
    outs = [release_with_smooth_bound(5.0, 50.0, plan, output_grid=0.5, clamp=(0.0, 10.0)).value for _ in range(200)]
    assert all(o % 0.5 == 0 and 0 <= o <= 10 for o in outs)
    assert {0.0, 10.0} <= set(outs)  # noise of scale 100 hits both ends


def test_release_with_zero_bound_is_the_rounded_value() -> None:
    plan = plan_smooth_noise(family="student_t", epsilon=1, dof=3)
    res = release_with_smooth_bound(3.3, 0.0, plan, output_grid=0.5, clamp=None)
    assert res.value == 3.5


def test_release_multidimensional_gaussian() -> None:
    plan = plan_smooth_noise(family="gaussian", epsilon=1, delta="1e-6", dimension=3)
    res = release_with_smooth_bound([1.0, 2.0, 3.0], 0.01, plan, output_grid=2**-10, clamp=(-10.0, 10.0))
    assert np.shape(res.value) == (3,)
    with pytest.raises(InvalidData):
        release_with_smooth_bound(1.0, 0.01, plan, output_grid=2**-10, clamp=(-10.0, 10.0))


@pytest.mark.parametrize("bound", [-1.0, math.nan, math.inf, "0.5x"])
def test_bad_smooth_bound_is_refused_without_echoing_it(bound: float) -> None:
    plan = plan_smooth_noise(family="cauchy", epsilon=1)
    with pytest.raises(InvalidData) as info:
        release_with_smooth_bound(1.0, bound, plan, output_grid=0.5, clamp=(0.0, 2.0))
    assert "withheld" in str(info.value) and str(bound) not in str(info.value)


def test_bad_value_is_refused_without_echoing_it() -> None:
    plan = plan_smooth_noise(family="cauchy", epsilon=1)
    messages = set()
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(InvalidData) as info:
            release_with_smooth_bound(bad, 1.0, plan, output_grid=0.5, clamp=(0.0, 2.0))
        messages.add(str(info.value))
    assert len(messages) == 1  # the message does not depend on the value


@pytest.mark.parametrize(
    ("grid", "clamp", "error"),
    [
        (0.0, (0.0, 1.0), UsageError),
        (math.inf, (0.0, 1.0), UsageError),
        (0.1, (1.0, 0.0), InvalidBounds),
        (0.1, (0.0, math.inf), InvalidBounds),
        (1e-4, (0.0, 1e3), UnsupportedRequest),  # finer than max|clamp| * 2^-20: not a coarse grid
    ],
)
def test_public_output_parameters_are_checked(grid: float, clamp: tuple[float, float], error: type[Exception]) -> None:
    plan = plan_smooth_noise(family="cauchy", epsilon=1)
    with pytest.raises(error):
        release_with_smooth_bound(0.5, 0.1, plan, output_grid=grid, clamp=clamp)


def test_release_is_reproducible_under_test_entropy() -> None:
    plan = plan_smooth_noise(family="lln", rho="0.5")
    with deterministic_entropy(7):
        a = [release_with_smooth_bound(1.0, 1.0, plan, output_grid=2**-8, clamp=None).value for _ in range(5)]
    with deterministic_entropy(7):
        b = [release_with_smooth_bound(1.0, 1.0, plan, output_grid=2**-8, clamp=None).value for _ in range(5)]
    assert a == b


def test_noise_variance_is_public_and_correct() -> None:
    assert noise_variance(plan_smooth_noise(family="cauchy", epsilon=1)) == math.inf
    assert noise_variance(plan_smooth_noise(family="student_t", epsilon=1, dof=5)) == pytest.approx(5 / 3)
    g = 5.0
    var = noise_variance(plan_smooth_noise(family="polynomial", epsilon=1, gamma=g))
    from scipy import integrate

    num = integrate.quad(lambda z: z * z / (1 + z**g), 0, np.inf)[0]
    den = integrate.quad(lambda z: 1 / (1 + z**g), 0, np.inf)[0]
    assert var == pytest.approx(num / den, rel=1e-8)
    lln = plan_smooth_noise(family="lln", rho="0.5")
    sig = float(lln.constant("sigma"))
    assert noise_variance(lln) == pytest.approx(2 * math.exp(2 * sig * sig))


def test_standard_noise_dispatches_to_every_family() -> None:
    for kwargs in (
        {"family": "cauchy", "epsilon": 1},
        {"family": "polynomial", "epsilon": 1, "gamma": 3},
        {"family": "student_t", "epsilon": 1, "dof": 3},
        {"family": "laplace", "epsilon": 1, "delta": "1e-6"},
        {"family": "gaussian", "epsilon": 1, "delta": "1e-6"},
        {"family": "lln", "rho": "0.5"},
        {"family": "uln", "rho": "0.5"},
    ):
        z = standard_noise(plan_smooth_noise(**kwargs), 1000)  # type: ignore[arg-type]
        assert z.shape == (1000,) and np.isfinite(z).all()


# ---------------------------------------------------------------------------------------------
# Sampler hygiene
# ---------------------------------------------------------------------------------------------


def test_uniform_is_on_the_2_pow_minus_53_lattice_and_never_zero() -> None:
    u = continuous.uniform_open(100_000)
    assert (u > 0).all() and (u < 1).all()
    assert np.array_equal(np.ldexp(u, 53), np.floor(np.ldexp(u, 53)))


def test_uniform_zero_word_is_redrawn() -> None:
    class ZeroThenRandom:
        def __init__(self) -> None:
            self.calls = 0

        def read(self, n_bytes: int) -> bytes:
            self.calls += 1
            return bytes(n_bytes) if self.calls == 1 else bytes([0xFF]) * n_bytes

    from dpsense.noise import entropy

    src = ZeroThenRandom()
    entropy._install(src)
    try:
        u = continuous.uniform_open(4)
    finally:
        entropy._install(None)
    assert np.all(u == 1 - 2.0**-53)


def test_laplace_is_on_the_2_pow_minus_48_grid() -> None:
    z = continuous.standard_laplace(10_000)
    assert np.abs(z).max() < 32  # all exact lattice points (|K| < 2^53)
    assert np.array_equal(np.ldexp(z, 48), np.rint(np.ldexp(z, 48)))
    assert len(np.unique(z)) == z.size  # a fine lattice: no repeats in 10^4 draws


def test_samplers_refuse_out_of_range_parameters() -> None:
    with pytest.raises(UsageError):
        continuous.polynomial(10, 1.0)
    with pytest.raises(UsageError):
        continuous.student_t(10, 0.0)
    with pytest.raises(UsageError):
        continuous.laplace_log_normal(10, -1.0)
    with pytest.raises(UsageError):
        continuous.standard_normal(-1)


def test_extreme_tails_are_finite() -> None:
    # the smallest and largest uniforms map to finite values for every family at its range limits
    u = np.array([2.0**-53, 0.5, 1 - 2.0**-53])
    for g in continuous.GAMMA_RANGE:
        odds = continuous._beta_odds(1 / g, 1 - 1 / g, u)
        assert np.isfinite(odds).all() and (odds > 0).all()
    for d in continuous.DOF_RANGE:
        odds = continuous._beta_odds(0.5, d / 2, u)
        assert np.isfinite(odds).all() and (odds > 0).all()


_TEXTBOOK = re.compile(r"log1?p?\(\s*1?\s*-\s*2")


def test_no_textbook_log_laplace_sampler_in_code() -> None:
    """The -b sign(u) log(1 - 2|u|) sampler must not exist in code (docstrings may name it)."""
    src = Path(dpsense.__file__).parent
    offenders = []
    for path in src.rglob("*.py"):
        toks = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
        code = "".join(t.string for t in toks if t.type not in (tokenize.STRING, tokenize.COMMENT))
        if _TEXTBOOK.search(code.replace(" ", "")):
            offenders.append(str(path))
    assert offenders == []


def test_an_exact_half_grid_tie_is_broken_by_a_fair_bit() -> None:
    # issue 13 finding 6: 0.25 / 0.5 is exactly a half-integer; rint sent it to the even cell 0.0 always
    plan = plan_smooth_noise(family="cauchy", epsilon=1)
    with deterministic_entropy(13):
        outs = [release_with_smooth_bound(0.25, 0.0, plan, output_grid=0.5, clamp=None).value for _ in range(64)]
    assert set(outs) == {0.0, 0.5}


def test_the_half_grid_corner_with_the_smooth_bound_at_its_floor_is_not_deterministic() -> None:
    # issue 13 finding 6: all records at a half-grid point of a far-from-zero public range, so the
    # smooth bound sits at its floor; a floor of G 2^-52 gave noise far below one ulp of f(x), the
    # float sum was f(x) itself and the release was one cell with certainty (the ideal mechanism
    # releases either neighbour with probability 1/2). An exact tie now takes a fresh fair bit.
    from dpsense.mechanisms.smooth import smooth_median

    low = 2.0**20
    bounds = (low, low + 1.0)  # default grid: max(|L|, |U|) 2^-20 rounded up to a power of two = 2
    grid = float(2.0 ** math.ceil(math.log2(max(abs(b) for b in bounds) * 2.0**-20)))
    values = np.full(1001, low + grid / 2)  # f(x) on a half-grid point: a tie of two cells
    with deterministic_entropy(6):
        outs = [smooth_median(values, bounds=bounds, epsilon=1, adjacency="replace").value for _ in range(40)]
    assert len(set(outs)) > 1


@pytest.mark.parametrize("delta", ["0.74", "0.9", "0.999", repr(2 / math.e)])
def test_smooth_laplace_refuses_delta_above_two_over_e_before_any_data_access(delta: str) -> None:
    # issue 13: NRS07 Lemma 2.9 needs ln(2/δ) >= 1, i.e. δ <= 2/e; the old check let δ = 0.9 through
    from dpsense.core import InvalidPrivacyParameter
    from dpsense.mechanisms.smooth import smooth_median

    assert float(delta) >= 2 / math.e
    with pytest.raises(InvalidPrivacyParameter, match=r"2/e.*Fix:"):
        plan_smooth_noise(family="laplace", epsilon=1, delta=delta)

    class Untouchable:
        def __array__(self, *args: object, **kwargs: object) -> np.ndarray:
            raise AssertionError("the data were read before the parameters were checked")

    with pytest.raises(InvalidPrivacyParameter, match="2/e"):
        smooth_median(Untouchable(), bounds=(0.0, 1.0), noise="laplace", epsilon=1, delta=delta, adjacency="replace")  # type: ignore[arg-type]


def test_smooth_laplace_accepts_delta_just_below_two_over_e() -> None:
    delta = Fraction(7357, 10**4)  # below 2/e = 0.73575888...
    assert float(delta) < 2 / math.e
    plan = plan_smooth_noise(family="laplace", epsilon=1, delta=delta)
    assert plan.loss == ApproxDP(1, delta)
