import itertools
import math
import time
from decimal import Context, Decimal
from fractions import Fraction

import numpy as np
import pytest

from dpsense.accounting import advanced_composition, best_homogeneous_composition, optimal_homogeneous_composition
from dpsense.core import ApproxDP, InvalidPrivacyParameter


def rr_composition_delta_enumerated(k: int, eps: float, eps_total: float) -> float:
    """Hockey-stick divergence of k-fold randomized response, by enumerating all 2^k outputs."""
    p = math.exp(eps) / (1 + math.exp(eps))
    outputs = np.array(list(itertools.product([0, 1], repeat=k)))
    truths = outputs.sum(axis=1)
    prob_p = p**truths * (1 - p) ** (k - truths)  # input all-ones
    prob_q = (1 - p) ** truths * p ** (k - truths)  # input all-zeros
    return float(np.maximum(prob_p - math.exp(eps_total) * prob_q, 0).sum())


def rr_composition_delta_decimal(k: int, eps: Fraction, eps_total: Fraction, digits: int = 90) -> Decimal:
    """The same divergence grouped by the number j of truthful answers, in 90-digit decimals."""
    ctx = Context(prec=digits)
    e = ctx.exp(Decimal(eps.numerator) / Decimal(eps.denominator))
    p = e / (1 + e)
    total = Decimal(0)
    et = ctx.exp(Decimal(eps_total.numerator) / Decimal(eps_total.denominator))
    for j in range(k + 1):
        pj = ctx.multiply(math.comb(k, j), ctx.multiply(ctx.power(p, j), ctx.power(1 - p, k - j)))
        qj = ctx.multiply(math.comb(k, j), ctx.multiply(ctx.power(1 - p, j), ctx.power(p, k - j)))
        total += max(Decimal(0), pj - et * qj)
    return total


def test_documented_example_k100_eps01():
    args = {"epsilon": 0.1, "delta": 0, "k": 100, "delta_prime": 1e-5}
    advanced = advanced_composition(**args)
    optimal = optimal_homogeneous_composition(**args)
    best = best_homogeneous_composition(**args)
    assert abs(float(advanced.epsilon) - 5.85) < 0.005
    assert optimal.epsilon <= Fraction("4.4")
    assert optimal.delta == Fraction("1e-5") and advanced.delta == Fraction("1e-5")
    assert best == optimal
    assert optimal.epsilon < advanced.epsilon < 10


def test_advanced_matches_the_formula_and_rounds_up():
    eps, k, dp = Fraction(1, 20), 400, Fraction(1, 10**7)
    ctx = Context(prec=60)
    e = Decimal(1) / Decimal(20)
    exact = ctx.sqrt(2 * k * ctx.ln(Decimal(10) ** 7)) * e + k * e * (ctx.exp(e) - 1)
    result = advanced_composition(epsilon=eps, delta=Fraction(1, 10**9), k=k, delta_prime=dp)
    assert Fraction(exact) <= result.epsilon <= Fraction(exact) + Fraction(1, 10**15)
    assert result.delta == 400 * Fraction(1, 10**9) + dp


@pytest.mark.parametrize(("k", "eps"), [(5, 0.5), (8, 0.3), (10, 0.1), (7, 1.0), (12, 0.05)])
@pytest.mark.parametrize("delta_prime", [1e-1, 1e-3, 1e-6])
def test_optimal_grid_point_against_enumerated_randomized_response(k, eps, delta_prime):
    result = optimal_homogeneous_composition(epsilon=eps, delta=0, k=k, delta_prime=delta_prime)
    i = round((k * Fraction(repr(eps)) - result.epsilon) / (2 * Fraction(repr(eps))))
    assert result.epsilon == (k - 2 * i) * Fraction(repr(eps))
    # the chosen grid point is valid ...
    assert rr_composition_delta_enumerated(k, eps, float(result.epsilon)) <= delta_prime * (1 + 1e-9)
    # ... and the next grid point down is not (unless the grid is exhausted)
    if i < k // 2:
        assert rr_composition_delta_enumerated(k, eps, float(result.epsilon) - 2 * eps) > delta_prime


@pytest.mark.parametrize(
    ("k", "eps", "delta_prime"), [(100, "0.1", "1e-5"), (60, "0.5", "1e-30"), (300, "0.02", "1e-9")]
)
def test_optimal_is_exactly_the_last_feasible_grid_point_in_high_precision(k, eps, delta_prime):
    eps_f, target = Fraction(eps), Fraction(delta_prime)
    result = optimal_homogeneous_composition(epsilon=eps, delta=0, k=k, delta_prime=delta_prime)
    assert rr_composition_delta_decimal(k, eps_f, result.epsilon) <= target
    if result.epsilon > (k % 2) * eps_f:
        assert rr_composition_delta_decimal(k, eps_f, result.epsilon - 2 * eps_f) > target


def test_optimal_with_positive_delta_reports_the_kov_total_delta():
    delta, k, dp = Fraction(1, 10**6), 50, Fraction(1, 10**5)
    result = optimal_homogeneous_composition(epsilon=0.2, delta=delta, k=k, delta_prime=dp)
    exact_total = 1 - (1 - delta) ** k * (1 - dp)
    assert exact_total <= result.delta <= exact_total * (1 + Fraction(1, 10**18))
    assert result.delta <= k * delta + dp
    same_eps = optimal_homogeneous_composition(epsilon=0.2, delta=0, k=k, delta_prime=dp)
    assert result.epsilon == same_eps.epsilon


def test_optimal_is_never_worse_than_basic_and_never_below_zero():
    for eps, k in [(2.0, 3), (1.0, 1), (0.7, 2), (3.0, 10)]:
        result = optimal_homogeneous_composition(epsilon=eps, delta=0, k=k, delta_prime=1e-6)
        assert 0 <= result.epsilon <= k * Fraction(repr(eps))


def test_best_is_the_minimum_of_the_three_bounds():
    cases = [(0.1, 1e-7, 100, 1e-6), (1.0, 0, 10, 1e-5), (0.01, 1e-9, 2000, 1e-6), (0.5, 1e-8, 3, 1e-3)]
    for eps, delta, k, dp in cases:
        args = {"epsilon": eps, "delta": delta, "k": k, "delta_prime": dp}
        basic = ApproxDP(k * Fraction(repr(eps)), k * Fraction(repr(float(delta))))
        candidates = [basic, advanced_composition(**args), optimal_homogeneous_composition(**args)]
        best = best_homogeneous_composition(**args)
        assert best.epsilon == min(c.epsilon for c in candidates)
        assert best.delta <= k * Fraction(repr(float(delta))) + Fraction(repr(dp))


def test_large_k_stays_fast():
    start = time.perf_counter()
    result = optimal_homogeneous_composition(epsilon=0.01, delta=0, k=20000, delta_prime=1e-6)
    assert time.perf_counter() - start < 5
    assert result.epsilon < advanced_composition(epsilon=0.01, delta=0, k=20000, delta_prime=1e-6).epsilon


@pytest.mark.parametrize("function", [advanced_composition, best_homogeneous_composition])
def test_total_delta_of_one_or_more_is_refused(function):
    with pytest.raises(InvalidPrivacyParameter, match="below 1"):
        function(epsilon=0.1, delta=0.5, k=3, delta_prime=0.1)


def test_kov_total_delta_stays_below_one_where_the_sum_does_not():
    # 1 - (1-δ)^k (1-δ') < 1 always, although kδ + δ' = 1.6 here.
    result = optimal_homogeneous_composition(epsilon=0.1, delta=0.5, k=3, delta_prime=0.1)
    assert result.delta == 1 - Fraction(1, 8) * Fraction(9, 10)


def test_kov_beyond_its_k_limit_is_refused_and_best_falls_back_to_advanced():
    from dpsense.accounting.advanced import MAX_KOV_K
    from dpsense.core import UnsupportedRequest

    args = {"epsilon": 0.001, "delta": 0, "k": MAX_KOV_K + 1, "delta_prime": 1e-6}
    with pytest.raises(UnsupportedRequest, match="advanced_composition"):
        optimal_homogeneous_composition(**args)
    assert best_homogeneous_composition(**args) == advanced_composition(**args)


def test_astronomically_small_delta_prime_is_handled():
    result = optimal_homogeneous_composition(epsilon=0.5, delta=0, k=60, delta_prime="1e-400")
    assert rr_composition_delta_decimal(60, Fraction(1, 2), result.epsilon, digits=500) <= Fraction("1e-400")
    assert rr_composition_delta_decimal(60, Fraction(1, 2), result.epsilon - 1, digits=500) > Fraction("1e-400")
