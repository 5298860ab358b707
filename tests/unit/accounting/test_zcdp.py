import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from dp_accounting import ZCDpEvent
from dp_accounting.rdp import RdpAccountant
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar
from scipy.stats import norm

from dpsense.accounting import approx_delta_of_zcdp, zcdp_to_approx_tight
from dpsense.core import ZCDP, ApproxDP, InvalidPrivacyParameter

RHOS = [1e-4, 0.01, 0.125, 0.5, 2.0, 10.0]
DELTAS = [1e-3, 1e-6, 1e-10]


def gaussian_exact_delta(eps: float, rho: float) -> float:
    """Balle-Wang delta of the Gaussian with Δ/σ = sqrt(2ρ) (exactly ρ-zCDP), via scipy.stats."""
    r = math.sqrt(2 * rho)
    return norm.cdf(r / 2 - eps / r) - math.exp(eps) * norm.cdf(-r / 2 - eps / r)


def cks_delta_brute_force(rho: float, eps: float) -> float:
    """inf over α of the CKS bound: dense grid, then scipy's bounded scalar minimiser around the best point."""

    def exponent(a):
        return (a - 1) * (a * rho - eps) + a * np.log1p(-1 / a) - np.log(a - 1)

    alphas = 1 + np.geomspace(1e-4, 1e4, 20_001)
    j = int(np.argmin(exponent(alphas)))
    lo, hi = alphas[max(j - 1, 0)], alphas[min(j + 1, len(alphas) - 1)]
    refined = minimize_scalar(exponent, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12})
    return float(np.exp(min(refined.fun, exponent(alphas[j]))))


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("delta", DELTAS)
def test_tight_conversion_is_at_most_bun_steinke(rho, delta):
    tight = zcdp_to_approx_tight(rho, delta)
    assert tight.delta == Fraction(repr(delta))
    assert tight <= ZCDP(rho).to_approx(delta)
    assert tight.epsilon < ZCDP(rho).to_approx(delta).epsilon  # strictly better for ρ > 0


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("delta", DELTAS)
def test_tight_conversion_is_valid_for_the_gaussian(rho, delta):
    # The Gaussian with Δ²/(2σ²) = ρ is ρ-zCDP, so its exact δ at the returned ε must be <= δ.
    tight = zcdp_to_approx_tight(rho, delta)
    assert gaussian_exact_delta(float(tight.epsilon), rho) <= delta


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("delta", DELTAS)
def test_tight_conversion_agrees_with_dp_accounting_on_a_dense_order_grid(rho, delta):
    # dp_accounting's RDP conversion at order α equals the CKS bound at the same α; ours minimises
    # over all α > 1, so it may only be smaller, and by little on a dense grid.
    orders = list(1 + np.geomspace(1e-3, 1e4, 4000))
    accountant = RdpAccountant(orders)
    accountant.compose(ZCDpEvent(rho))
    theirs = accountant.get_epsilon(delta)
    ours = float(zcdp_to_approx_tight(rho, delta).epsilon)
    assert ours <= theirs + 1e-9
    assert ours >= theirs - 1e-3 * max(1.0, theirs)


@pytest.mark.parametrize("rho", [0.01, 0.5, 3.0])
@pytest.mark.parametrize("eps", [0.0, 0.3, 1.0, 5.0])
def test_delta_matches_a_brute_force_minimisation_over_alpha(rho, eps):
    ours = approx_delta_of_zcdp(rho, eps)
    grid = min(1.0, cks_delta_brute_force(rho, eps))
    assert ours <= grid * (1 + 1e-9)
    assert ours >= grid * (1 - 1e-6)


def test_returned_epsilon_is_nearly_the_smallest():
    for rho, delta in [(0.05, 1e-6), (1.0, 1e-9)]:
        eps = zcdp_to_approx_tight(rho, delta).epsilon
        assert approx_delta_of_zcdp(rho, eps) <= delta
        assert approx_delta_of_zcdp(rho, float(eps) * (1 - 1e-7)) > delta


@settings(max_examples=40, deadline=None)
@given(
    st.floats(min_value=1e-4, max_value=20),
    st.floats(min_value=0, max_value=30),
    st.floats(min_value=1e-3, max_value=5),
)
@example(rho=18.5, eps=0.0, step=0.25)  # issue 13: δ(18.5, 0.25) came out above δ(18.5, 0)
def test_delta_decreases_in_epsilon_and_increases_in_rho(rho, eps, step):
    assert approx_delta_of_zcdp(rho, eps + step) <= approx_delta_of_zcdp(rho, eps) * (1 + 1e-9)
    assert approx_delta_of_zcdp(rho * (1 + step), eps) >= approx_delta_of_zcdp(rho, eps) * (1 - 1e-9)


def cks_delta_decimal(rho: float, eps: float) -> Decimal:
    """The CKS infimum at 60 significant digits (decimal): bisection in t = ln(α - 1) on the derivative."""
    with localcontext() as ctx:
        ctx.prec = 60
        r, e, one = Decimal(rho), Decimal(eps), Decimal(1)

        def derivative(t: Decimal) -> Decimal:
            x = t.exp()
            return (one + 2 * x) * r - e - (one + one / x).ln()

        lo, hi = -r - e - 60, ((e + 1) / (2 * r) + 2).ln()
        for _ in range(300):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if derivative(mid) < 0 else (lo, mid)
        x = hi.exp()
        exponent = x * (one + x) * r - x * e - x * (one + one / x).ln() - (one + x).ln()
        return min(one, exponent.exp())


@pytest.mark.parametrize(
    ("rho", "eps"),
    [(18.5, 0.0), (18.5, 0.25), (18.5, 1.0), (12.0, 0.0), (30.0, 10.0), (0.5, 1.0), (1e-4, 0.0), (1e-8, 0.0)],
)
def test_delta_is_an_upper_bound_on_the_high_precision_infimum(rho, eps):
    # issue 13: at ρ = 18.5, ε = 0 the α form cancelled ln(1 - 1/α) against ln(α - 1) near α = 1 and
    # returned a δ below the infimum (not an upper bound), which also broke monotonicity in ε.
    exact = cks_delta_decimal(rho, eps)
    ours = Decimal(approx_delta_of_zcdp(rho, eps))
    assert ours >= exact
    assert ours <= exact * Decimal(1 + 1e-9)


def test_delta_is_non_increasing_in_epsilon_at_large_rho():
    for rho in (12.0, 18.5, 25.0):
        deltas = [approx_delta_of_zcdp(rho, eps / 8) for eps in range(40)]
        assert deltas == sorted(deltas, reverse=True)


def test_zero_rho_and_zcdp_objects():
    assert zcdp_to_approx_tight(0, 1e-6) == ApproxDP(0, 1e-6)
    assert approx_delta_of_zcdp(0, 0.5) == 0.0
    assert zcdp_to_approx_tight(ZCDP(0.5), 1e-6) == zcdp_to_approx_tight(0.5, 1e-6)


@pytest.mark.parametrize("delta", [0, 1, -1e-3, float("nan")])
def test_delta_outside_open_unit_interval_is_refused(delta):
    with pytest.raises(InvalidPrivacyParameter, match="Fix:"):
        zcdp_to_approx_tight(0.5, delta)


@pytest.mark.parametrize("rho", [-0.1, float("nan"), float("inf"), "x"])
def test_bad_rho_is_refused(rho):
    with pytest.raises(InvalidPrivacyParameter, match="rho"):
        zcdp_to_approx_tight(rho, 1e-6)
    with pytest.raises(InvalidPrivacyParameter, match="rho"):
        approx_delta_of_zcdp(rho, 1.0)
