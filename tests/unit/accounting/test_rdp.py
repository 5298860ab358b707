import math
from decimal import Context, Decimal
from fractions import Fraction

import pytest
from dp_accounting import (
    GaussianDpEvent,
    LaplaceDpEvent,
    NeighboringRelation,
    RandomizedResponseDpEvent,
    SelfComposedDpEvent,
)
from dp_accounting.rdp import RdpAccountant
from scipy.integrate import quad
from scipy.optimize import brentq
from scipy.stats import norm

from dpsense.accounting import (
    DEFAULT_ORDERS,
    RdpCurve,
    gaussian_rdp,
    laplace_rdp,
    pure_dp_rdp,
    randomized_response_rdp,
)
from dpsense.core import InvalidPrivacyParameter, InvalidSensitivity, UsageError

ALPHAS = [1.01, 1.1, 1.5, 2.0, 3.7, 10.0, 64.0, 1024.0]


def laplace_renyi_by_integration(alpha: float, b: float, shift: float) -> float:
    def integrand(y):
        log_p = -abs(y) / b
        log_q = -abs(y - shift) / b
        return math.exp(alpha * log_p + (1 - alpha) * log_q) / (2 * b)

    pieces = [(-math.inf, 0.0), (0.0, shift), (shift, math.inf)]
    total = sum(quad(integrand, lo, hi, epsabs=0, epsrel=1e-12, limit=200)[0] for lo, hi in pieces)
    return math.log(total) / (alpha - 1)


def dp_accounting_rdp(event, orders, relation=NeighboringRelation.ADD_OR_REMOVE_ONE):
    accountant = RdpAccountant(list(orders), neighboring_relation=relation)
    accountant.compose(event)
    return accountant


@pytest.mark.parametrize("alpha", ALPHAS)
def test_gaussian_curve_matches_dp_accounting(alpha):
    ours = gaussian_rdp(alpha, sigma=3.0, sensitivity=2.0)
    theirs = dp_accounting_rdp(GaussianDpEvent(1.5), [alpha]).rdp[0]
    assert ours == pytest.approx(theirs, rel=1e-12)
    assert ours == pytest.approx(alpha * 4 / 18, rel=1e-15)


@pytest.mark.parametrize("alpha", [1.01, 1.5, 2.0, 5.0, 20.0])
@pytest.mark.parametrize(("b", "shift"), [(1.0, 1.0), (0.5, 1.0), (4.0, 2.0), (1.0, 0.01)])
def test_laplace_curve_matches_numerical_integration(alpha, b, shift):
    ours = laplace_rdp(alpha, scale=b, sensitivity=shift)
    expected = laplace_renyi_by_integration(alpha, b, shift)
    assert ours == pytest.approx(expected, rel=1e-7, abs=1e-12)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize(("b", "shift"), [(1.0, 1.0), (0.3, 2.0), (10.0, 1.0)])
def test_laplace_curve_matches_dp_accounting(alpha, b, shift):
    ours = laplace_rdp(alpha, scale=b, sensitivity=shift)
    theirs = dp_accounting_rdp(LaplaceDpEvent(b / shift), [alpha]).rdp[0]
    assert ours == pytest.approx(theirs, rel=1e-9)


def two_point_renyi(alpha: float, p: Fraction) -> float:
    """D_α((p, 1-p) || (1-p, p)) from the definition, in 60-digit decimals (no overflow)."""
    ctx = Context(prec=60)
    a, dp = Decimal(repr(alpha)), Decimal(p.numerator) / Decimal(p.denominator)
    dq = Decimal(p.denominator - p.numerator) / Decimal(p.denominator)
    total = ctx.power(dp, a) * ctx.power(dq, 1 - a) + ctx.power(dq, a) * ctx.power(dp, 1 - a)
    return float(ctx.ln(total) / (a - 1))


def keep_probability(eps: float) -> Fraction:
    """e^ε/(1+e^ε) to 60 digits, as an exact rational."""
    ctx = Context(prec=60)
    e = ctx.exp(Decimal(repr(eps)))
    return Fraction(e / (1 + e))


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("p", [0.51, 0.75, 0.9, 0.999, 0.2])
def test_randomized_response_curve_matches_two_point_divergence(alpha, p):
    ours = randomized_response_rdp(alpha, p=p)
    assert ours == pytest.approx(two_point_renyi(alpha, Fraction(repr(p))), rel=1e-9)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("p", [0.51, 0.75, 0.9, 0.999])
def test_randomized_response_curve_matches_dp_accounting(alpha, p):
    # dp_accounting: with probability `noise` output a uniform bucket; keep-probability p = 1 - noise/2.
    event = RandomizedResponseDpEvent(noise_parameter=2 * (1 - p), num_buckets=2)
    theirs = dp_accounting_rdp(event, [alpha], NeighboringRelation.REPLACE_ONE).rdp[0]
    assert randomized_response_rdp(alpha, p=p) == pytest.approx(theirs, rel=1e-9)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("eps", [0.01, 0.5, 1.0, 4.0, 30.0])
def test_pure_dp_curve_is_randomized_response_and_dominates_laplace(alpha, eps):
    ours = pure_dp_rdp(alpha, epsilon=eps)
    p = keep_probability(eps)
    assert ours == pytest.approx(two_point_renyi(alpha, p), rel=1e-9, abs=1e-15)
    assert ours == pytest.approx(randomized_response_rdp(alpha, p=p), rel=1e-9, abs=1e-15)
    assert ours <= min(eps, alpha * eps * eps / 2) * (1 + 1e-12)
    # the Laplace mechanism with Δ/b = ε is ε-DP, so the tight pure-DP curve must dominate it
    assert laplace_rdp(alpha, scale=1.0, sensitivity=eps) <= ours * (1 + 1e-12)


def test_composition_adds_curves_and_times_is_repeated_addition():
    g = RdpCurve.gaussian(sigma=2.0, sensitivity=1.0)
    lap = RdpCurve.laplace(scale=3.0, sensitivity=1.0)
    both = g + lap
    assert both.epsilons == tuple(a + b for a, b in zip(g.epsilons, lap.epsilons, strict=True))
    assert (g + g + g).epsilons == pytest.approx(g.times(3).epsilons, rel=1e-15)
    assert (RdpCurve.zero() + g) == g
    assert RdpCurve.zcdp(rho=0.125).epsilons == pytest.approx(g.epsilons, rel=1e-15)


@pytest.mark.parametrize("delta", [1e-5, 1e-9])
def test_conversion_matches_dp_accounting_for_composed_gaussian_and_laplace(delta):
    curve = RdpCurve.gaussian(sigma=4.0, sensitivity=2.0).times(10) + RdpCurve.laplace(scale=2.0, sensitivity=1.0)
    accountant = RdpAccountant(list(DEFAULT_ORDERS))
    accountant.compose(SelfComposedDpEvent(GaussianDpEvent(2.0), 10))
    accountant.compose(LaplaceDpEvent(2.0))
    ours = float(curve.to_approx(delta).epsilon)
    theirs = accountant.get_epsilon(delta)
    assert theirs <= ours <= theirs + 1e-9


def test_cks_conversion_is_tighter_than_mironov_and_both_are_sound():
    sigma, k, delta = 5.0, 20, 1e-6
    curve = RdpCurve.gaussian(sigma=sigma, sensitivity=1.0).times(k)
    cks, mironov = curve.to_approx(delta), curve.to_approx_mironov(delta)
    assert cks.epsilon < mironov.epsilon
    # k Gaussians = one Gaussian with Δ sqrt(k) (Balle-Wang); its exact ε is a lower bound for both.
    r = math.sqrt(k) / sigma

    def exact_delta(eps):
        return norm.cdf(r / 2 - eps / r) - math.exp(eps) * norm.cdf(-r / 2 - eps / r)

    exact_eps = brentq(lambda e: exact_delta(e) - delta, 0, 50, xtol=1e-14)
    assert exact_eps < float(cks.epsilon) < exact_eps * 1.25


def test_mironov_conversion_matches_its_formula():
    curve = RdpCurve.gaussian(sigma=3.0, sensitivity=1.0, orders=(2.0, 8.0, 32.0))
    expected = min(a / 18 + math.log(1e6) / (a - 1) for a in (2.0, 8.0, 32.0))
    assert float(curve.to_approx_mironov(1e-6).epsilon) == pytest.approx(expected, rel=1e-11)
    assert curve.to_approx_mironov(1e-6).epsilon >= expected


def test_curves_on_different_grids_do_not_compose():
    with pytest.raises(UsageError, match="same grid"):
        RdpCurve.gaussian(sigma=1, sensitivity=1) + RdpCurve.gaussian(sigma=1, sensitivity=1, orders=(2.0, 3.0))


@pytest.mark.parametrize(
    ("orders", "epsilons"),
    [
        ((), ()),
        ((2.0, 1.5), (0.1, 0.1)),
        ((2.0,), (-0.1,)),
        ((2.0,), (float("nan"),)),
        ((2.0, 3.0), (0.1,)),
        ((1.0,), (0.1,)),
    ],
)
def test_malformed_curves_are_refused(orders, epsilons):
    with pytest.raises(InvalidPrivacyParameter):
        RdpCurve(orders, epsilons)


@pytest.mark.parametrize("alpha", [1, 0.5, -2, float("nan"), float("inf")])
def test_orders_must_exceed_one(alpha):
    for call in (
        lambda: gaussian_rdp(alpha, sigma=1, sensitivity=1),
        lambda: laplace_rdp(alpha, scale=1, sensitivity=1),
        lambda: randomized_response_rdp(alpha, p=0.7),
        lambda: pure_dp_rdp(alpha, epsilon=1),
    ):
        with pytest.raises(InvalidPrivacyParameter, match="alpha"):
            call()


def test_noise_parameters_are_validated():
    with pytest.raises(InvalidPrivacyParameter, match="sigma"):
        gaussian_rdp(2, sigma=0, sensitivity=1)
    with pytest.raises(InvalidPrivacyParameter, match="scale"):
        laplace_rdp(2, scale=-1, sensitivity=1)
    with pytest.raises(InvalidSensitivity, match="sensitivity"):
        laplace_rdp(2, scale=1, sensitivity=-1)
    with pytest.raises(InvalidPrivacyParameter, match=r"\(0, 1\)"):
        randomized_response_rdp(2, p=1)
    with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
        pure_dp_rdp(2, epsilon=0)
    with pytest.raises(InvalidPrivacyParameter, match="k"):
        RdpCurve.zero().times(0)
    with pytest.raises(InvalidPrivacyParameter, match="delta"):
        RdpCurve.zero().to_approx(0)
