import itertools
import math
import time
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import quad

from dpsense.accounting import (
    balle_wang_delta,
    balle_wang_sigma,
    discrete_gaussian_delta,
    discrete_gaussian_sigma2,
)
from dpsense.core import InvalidPrivacyParameter, InvalidSensitivity


def gaussian_delta_by_integration(eps: float, sigma: float, shift: float, epsrel: float = 1e-11) -> float:
    """∫ (p - e^ε q)_+ with p = N(0, σ²), q = N(Δ, σ²), by adaptive quadrature of the densities."""

    def density(y, mean):
        return math.exp(-((y - mean) ** 2) / (2 * sigma * sigma)) / (sigma * math.sqrt(2 * math.pi))

    def excess(y):
        return max(0.0, density(y, 0.0) - math.exp(eps) * density(y, shift))

    crossing = shift / 2 - eps * sigma * sigma / shift
    value, _ = quad(excess, crossing - 40 * sigma, crossing, epsabs=0, epsrel=epsrel, limit=500)
    return value


def discrete_delta_by_definition(eps: float, sigma2: float, shift: int) -> float:
    """Σ_y (p_y - e^ε p_{y-Δ})_+ over all integers carrying mass, p the discrete Gaussian."""
    reach = int(60 * math.sqrt(sigma2)) + 60
    weights = {y: math.exp(-y * y / (2 * sigma2)) for y in range(-reach - shift, reach + shift + 1)}
    norm = math.fsum(weights[y] for y in range(-reach, reach + 1))
    return math.fsum(max(0.0, weights[y] - math.exp(eps) * weights[y - shift]) for y in range(-reach, reach + 1)) / norm


def classic_sigma(eps: float, delta: float, sensitivity: float = 1.0) -> float:
    return sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / eps


@pytest.mark.parametrize("eps", [0.0, 0.1, 1.0, 3.0])
@pytest.mark.parametrize(("sigma", "shift"), [(1.0, 1.0), (0.5, 1.0), (4.0, 2.0), (20.0, 1.0)])
def test_balle_wang_matches_numerical_integration(eps, sigma, shift):
    ours = balle_wang_delta(epsilon=eps, sigma=sigma, sensitivity=shift)
    assert ours == pytest.approx(gaussian_delta_by_integration(eps, sigma, shift), rel=1e-8, abs=1e-300)


@pytest.mark.parametrize(("eps", "sigma"), [(20.0, 0.5), (1e-3, 1e4), (1e-2, 2e3)])
def test_balle_wang_keeps_relative_precision_in_the_far_tail(eps, sigma):
    # δ is 1e-20 .. 1e-94 here: far below the absolute error of Φ(u) - e^ε Φ(v) near 1.
    ours = balle_wang_delta(epsilon=eps, sigma=sigma, sensitivity=1.0)
    assert 0 < ours < 1e-19
    assert ours == pytest.approx(gaussian_delta_by_integration(eps, sigma, 1.0, epsrel=1e-9), rel=1e-7)


@settings(max_examples=50, deadline=None)
@given(st.floats(0, 20), st.floats(0.05, 50), st.floats(1e-3, 2))
def test_balle_wang_decreases_in_epsilon_and_in_sigma(eps, sigma, step):
    base = balle_wang_delta(epsilon=eps, sigma=sigma, sensitivity=1)
    assert balle_wang_delta(epsilon=eps + step, sigma=sigma, sensitivity=1) <= base * (1 + 1e-12)
    assert balle_wang_delta(epsilon=eps, sigma=sigma * (1 + step), sensitivity=1) <= base * (1 + 1e-12)


@pytest.mark.parametrize(("eps", "delta"), [(0.1, 1e-6), (1.0, 1e-5), (3.0, 1e-9), (10.0, 1e-3)])
def test_balle_wang_sigma_is_safe_and_minimal(eps, delta):
    sigma = balle_wang_sigma(epsilon=eps, delta=delta, sensitivity=1.0)
    assert balle_wang_delta(epsilon=eps, sigma=sigma, sensitivity=1.0) <= delta
    assert gaussian_delta_by_integration(eps, sigma, 1.0) <= delta * (1 + 1e-8)
    assert balle_wang_delta(epsilon=eps, sigma=sigma * (1 - 1e-7), sensitivity=1.0) > delta


def test_balle_wang_sigma_scales_with_sensitivity():
    one = balle_wang_sigma(epsilon=0.5, delta=1e-6, sensitivity=1)
    assert balle_wang_sigma(epsilon=0.5, delta=1e-6, sensitivity=3) == pytest.approx(3 * one, rel=1e-12)


@pytest.mark.parametrize("eps", [0.1, 0.5, 0.9, 0.99])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_classic_calibration_holds_below_epsilon_one_and_is_wasteful(eps, delta):
    sigma = classic_sigma(eps, delta)
    assert balle_wang_delta(epsilon=eps, sigma=sigma, sensitivity=1) <= delta
    assert balle_wang_sigma(epsilon=eps, delta=delta, sensitivity=1) < sigma


@pytest.mark.parametrize("delta", [1e-2, 1e-5, 1e-10])
def test_classic_calibration_is_not_private_enough_at_epsilon_ten(delta):
    # DR Thm A.1's σ = Δ sqrt(2 ln(1.25/δ))/ε is proven only for ε < 1; at ε = 10 it fails outright.
    sigma = classic_sigma(10.0, delta)
    assert balle_wang_delta(epsilon=10.0, sigma=sigma, sensitivity=1) > delta
    assert gaussian_delta_by_integration(10.0, sigma, 1.0) > delta


@pytest.mark.parametrize("eps", [0.0, 0.25, 1.0, 2.5])
@pytest.mark.parametrize(
    ("sigma2", "shift"), [(0.5, 1), (1, 1), (Fraction(7, 3), 1), (10, 2), (3, 1), (100, 5), (2, 3)]
)
def test_discrete_gaussian_matches_the_hockey_stick_definition(eps, sigma2, shift):
    ours = discrete_gaussian_delta(epsilon=eps, sigma2=sigma2, sensitivity=shift)
    expected = discrete_delta_by_definition(eps, float(Fraction(sigma2)), shift)
    assert ours == pytest.approx(expected, rel=1e-10, abs=1e-16)


def test_discrete_gaussian_threshold_on_an_integer_boundary():
    # εσ²/Δ - Δ/2 = 1 exactly: "Y > 1" means Y >= 2; the y = 1 term is zero either way.
    ours = discrete_gaussian_delta(epsilon="0.5", sigma2=3, sensitivity=1)
    assert ours == pytest.approx(discrete_delta_by_definition(0.5, 3.0, 1), rel=1e-12)


def test_discrete_gaussian_approaches_the_continuous_gaussian():
    gaps = []
    for sigma in [3.0, 30.0, 300.0, 3000.0]:
        eps = 1.0 / sigma  # keeps δ of order 1e-1..1e-4, away from 0
        continuous = balle_wang_delta(epsilon=eps, sigma=sigma, sensitivity=1)
        discrete = discrete_gaussian_delta(epsilon=eps, sigma2=sigma * sigma, sensitivity=1)
        gaps.append(abs(discrete / continuous - 1))
    assert gaps == sorted(gaps, reverse=True)
    assert gaps[-1] < 1e-7


def test_discrete_gaussian_is_fast_at_sigma_thirty_thousand():
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        value = discrete_gaussian_delta(epsilon=1e-4, sigma2=9 * 10**8, sensitivity=1)
        best = min(best, time.perf_counter() - start)
    assert best < 0.1
    assert value == pytest.approx(balle_wang_delta(epsilon=1e-4, sigma=3e4, sensitivity=1), rel=1e-6)


def test_discrete_gaussian_delta_grows_with_the_shift_and_shrinks_with_sigma2():
    for eps in [0.1, 1.0]:
        by_shift = [discrete_gaussian_delta(epsilon=eps, sigma2=20, sensitivity=s) for s in range(0, 6)]
        assert by_shift == sorted(by_shift)
    by_sigma2 = [discrete_gaussian_delta(epsilon=0.5, sigma2=s, sensitivity=1) for s in range(1, 300)]
    assert all(b <= a for a, b in itertools.pairwise(by_sigma2))


@pytest.mark.parametrize(("eps", "delta", "shift"), [(1.0, 1e-5, 1), (0.5, 1e-6, 2), (2.0, 1e-3, 1), (0.1, 1e-8, 1)])
def test_discrete_gaussian_sigma2_is_the_smallest_safe_integer(eps, delta, shift):
    s2 = discrete_gaussian_sigma2(epsilon=eps, delta=delta, sensitivity=shift)
    target = delta * (1 - 1e-9)
    assert discrete_gaussian_delta(epsilon=eps, sigma2=s2, sensitivity=shift) <= target
    assert s2 == 1 or discrete_gaussian_delta(epsilon=eps, sigma2=s2 - 1, sensitivity=shift) > target


def test_discrete_gaussian_sigma2_matches_a_linear_scan():
    scan = next(s for s in range(1, 10_000) if discrete_delta_by_definition(1.0, s, 1) <= 1e-5 * (1 - 1e-9))
    assert discrete_gaussian_sigma2(epsilon=1.0, delta=1e-5, sensitivity=1) == scan


def test_discrete_gaussian_sigma2_at_large_sigma():
    s2 = discrete_gaussian_sigma2(epsilon=1e-4, delta=1e-6, sensitivity=1)
    continuous = balle_wang_sigma(epsilon=1e-4, delta=1e-6, sensitivity=1) ** 2
    assert abs(s2 - continuous) <= 2
    assert discrete_gaussian_delta(epsilon=1e-4, sigma2=s2, sensitivity=1) <= 1e-6


def test_zero_sensitivity_leaks_nothing():
    assert balle_wang_delta(epsilon=0.1, sigma=1, sensitivity=0) == 0.0
    assert discrete_gaussian_delta(epsilon=0.1, sigma2=1, sensitivity=0) == 0.0


@pytest.mark.parametrize(
    ("call", "error", "word"),
    [
        (lambda: balle_wang_delta(epsilon=-1, sigma=1, sensitivity=1), InvalidPrivacyParameter, "epsilon"),
        (lambda: balle_wang_delta(epsilon=1, sigma=0, sensitivity=1), InvalidPrivacyParameter, "sigma"),
        (lambda: balle_wang_delta(epsilon=1, sigma=1, sensitivity=float("nan")), InvalidSensitivity, "sensitivity"),
        (lambda: balle_wang_sigma(epsilon=0, delta=1e-5, sensitivity=1), InvalidPrivacyParameter, "epsilon"),
        (lambda: balle_wang_sigma(epsilon=1, delta=0, sensitivity=1), InvalidPrivacyParameter, "delta"),
        (lambda: balle_wang_sigma(epsilon=1, delta=1e-5, sensitivity=0), InvalidSensitivity, "sensitivity"),
        (lambda: discrete_gaussian_delta(epsilon=1, sigma2=-2, sensitivity=1), InvalidPrivacyParameter, "sigma2"),
        (lambda: discrete_gaussian_delta(epsilon=1, sigma2=2, sensitivity=1.5), InvalidSensitivity, "integer"),
        (lambda: discrete_gaussian_delta(epsilon=1, sigma2=2, sensitivity=True), InvalidSensitivity, "integer"),
        (lambda: discrete_gaussian_sigma2(epsilon=1, delta=1e-5, sensitivity=0), InvalidSensitivity, "sensitivity"),
        (lambda: discrete_gaussian_sigma2(epsilon=1, delta=1.0, sensitivity=1), InvalidPrivacyParameter, "delta"),
        (
            lambda: discrete_gaussian_sigma2(epsilon=float("inf"), delta=1e-5, sensitivity=1),
            InvalidPrivacyParameter,
            "epsilon",
        ),
    ],
)
def test_bad_inputs_are_refused_with_a_fix(call, error, word):
    with pytest.raises(error, match=word) as info:
        call()
    assert "Fix:" in str(info.value)


def test_discrete_gaussian_sigma2_is_minimal_across_a_grid_of_targets():
    for eps in ["0.1", "0.3", "0.5", "1", "2", "4"]:
        for delta in ["1e-3", "1e-5", "1e-7", "1e-9"]:
            for shift in [1, 2, 3]:
                s2 = discrete_gaussian_sigma2(epsilon=eps, delta=delta, sensitivity=shift)
                target = float(delta) * (1 - 1e-9)
                assert discrete_gaussian_delta(epsilon=eps, sigma2=s2, sensitivity=shift) <= target
                if s2 > 1:
                    assert discrete_gaussian_delta(epsilon=eps, sigma2=s2 - 1, sensitivity=shift) > target


def test_discrete_gaussian_beyond_its_sigma2_limit_is_refused():
    from dpsense.accounting.gaussian_exact import MAX_DISCRETE_SIGMA2
    from dpsense.core import UnsupportedRequest

    with pytest.raises(UnsupportedRequest, match="rho"):
        discrete_gaussian_delta(epsilon=1e-9, sigma2=10 * MAX_DISCRETE_SIGMA2, sensitivity=1)
    # far in the tail nothing needs summing, so even a huge σ² answers 0 at once
    assert discrete_gaussian_delta(epsilon=1, sigma2=10 * MAX_DISCRETE_SIGMA2, sensitivity=1) == 0.0
