import math
import subprocess
import sys
import textwrap

import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from dpsense.accounting import GaussianEvent, LaplaceEvent, pld_delta, pld_epsilon
from dpsense.core import ApproxDP, InvalidPrivacyParameter, InvalidSensitivity, UsageError


def laplace_exact_delta(eps: float, scale: float, sensitivity: float) -> float:
    t = sensitivity / scale
    return 1 - math.exp((eps - t) / 2) if eps <= t else 0.0


def laplace_exact_epsilon(delta: float, scale: float, sensitivity: float) -> float:
    return max(0.0, sensitivity / scale + 2 * math.log1p(-delta))


def gaussian_exact_epsilon(delta: float, ratio: float) -> float:
    """Invert the Balle-Wang curve of one Gaussian with Δ/σ = ratio (scipy.stats, brentq)."""

    def excess(eps):
        return norm.cdf(ratio / 2 - eps / ratio) - math.exp(eps) * norm.cdf(-ratio / 2 - eps / ratio) - delta

    return brentq(excess, 0, 200, xtol=1e-13)


@pytest.mark.parametrize(("scale", "sensitivity"), [(1.0, 1.0), (2.0, 1.0), (0.5, 3.0)])
@pytest.mark.parametrize("delta", [1e-1, 1e-3, 1e-6])
def test_laplace_epsilon_is_a_tight_upper_bound_on_the_exact_curve(scale, sensitivity, delta):
    exact = laplace_exact_epsilon(delta, scale, sensitivity)
    ours = pld_epsilon([LaplaceEvent(scale, sensitivity)], delta=delta)
    assert ours.delta == ApproxDP(1, delta).delta
    assert exact <= float(ours.epsilon) <= exact + 1e-3


@pytest.mark.parametrize("eps", [0.0, 0.2, 0.7, 0.999, 1.5])
def test_laplace_delta_is_a_tight_upper_bound_on_the_exact_curve(eps):
    exact = laplace_exact_delta(eps, 1.0, 1.0)
    ours = pld_delta([LaplaceEvent(1.0, 1.0)], epsilon=eps)
    assert exact - 1e-12 <= ours <= exact + 1e-3


@pytest.mark.parametrize(("k", "sigma", "sensitivity"), [(4, 2.0, 1.0), (10, 5.0, 1.0), (25, 3.0, 0.5)])
def test_k_gaussians_compose_like_one_gaussian_with_sqrt_k_sensitivity(k, sigma, sensitivity):
    delta = 1e-6
    exact = gaussian_exact_epsilon(delta, sensitivity * math.sqrt(k) / sigma)
    ours = float(pld_epsilon([GaussianEvent(sigma, sensitivity)] * k, delta=delta).epsilon)
    assert exact <= ours <= exact + 5e-3


def test_heterogeneous_gaussians_compose_like_one_gaussian():
    events = [GaussianEvent(2.0, 1.0), GaussianEvent(4.0, 3.0), GaussianEvent(1.5, 0.5)]
    ratio = math.sqrt(sum((e.sensitivity / e.sigma) ** 2 for e in events))
    exact = gaussian_exact_epsilon(1e-7, ratio)
    ours = float(pld_epsilon(events, delta=1e-7).epsilon)
    assert exact <= ours <= exact + 5e-3


def test_mixed_composition_lies_between_its_parts_and_basic_composition():
    lap, gauss = LaplaceEvent(2.0, 1.0), GaussianEvent(3.0, 1.0)
    delta = 1e-6
    eps_lap = float(pld_epsilon([lap], delta=delta / 2).epsilon)
    eps_gauss = float(pld_epsilon([gauss], delta=delta / 2).epsilon)
    mixed = float(pld_epsilon([lap, gauss], delta=delta).epsilon)
    assert mixed >= max(
        float(pld_epsilon([lap], delta=delta).epsilon), float(pld_epsilon([gauss], delta=delta).epsilon)
    )
    # basic composition: (eps_lap + eps_gauss, delta)-DP, so the PLD's delta at that epsilon is <= delta
    assert pld_delta([lap, gauss], epsilon=eps_lap + eps_gauss) <= delta
    assert mixed < eps_lap + eps_gauss


def test_order_of_events_does_not_matter():
    events = [LaplaceEvent(1.0, 1.0), GaussianEvent(2.0, 1.0), LaplaceEvent(1.0, 1.0)]
    assert pld_epsilon(events, delta=1e-5) == pld_epsilon(list(reversed(events)), delta=1e-5)


def test_no_leakage_spends_nothing():
    assert pld_epsilon([], delta=1e-6) == ApproxDP(0, 1e-6)
    assert pld_epsilon([GaussianEvent(1.0, 0.0)], delta=1e-6) == ApproxDP(0, 1e-6)
    assert pld_delta([LaplaceEvent(1.0, 0)], epsilon=0) == 0.0


def test_delta_below_the_numerical_floor_is_refused():
    with pytest.raises(UsageError, match="numerical floor"):
        pld_epsilon([GaussianEvent(1.0, 1.0)], delta=1e-40)


def test_bad_events_and_parameters_are_refused():
    with pytest.raises(UsageError, match="LaplaceEvent or GaussianEvent"):
        pld_epsilon([("laplace", 1.0)], delta=1e-6)  # type: ignore[list-item]
    with pytest.raises(InvalidPrivacyParameter, match="sigma"):
        GaussianEvent(0.0, 1.0)
    with pytest.raises(InvalidPrivacyParameter, match="scale"):
        LaplaceEvent(float("nan"), 1.0)
    with pytest.raises(InvalidSensitivity, match="sensitivity"):
        LaplaceEvent(1.0, -1.0)
    with pytest.raises(InvalidPrivacyParameter, match="delta"):
        pld_epsilon([LaplaceEvent(1.0, 1.0)], delta=0)
    with pytest.raises(InvalidPrivacyParameter, match="discretization"):
        pld_epsilon([LaplaceEvent(1.0, 1.0)], delta=1e-6, discretization=0)


def test_accounting_imports_without_dp_accounting_and_pld_says_how_to_install():
    script = textwrap.dedent(
        """
        import sys
        sys.modules["dp_accounting"] = None  # makes `import dp_accounting...` raise ImportError
        sys.modules["dp_accounting.pld"] = None
        import dpsense.accounting as acc
        from dpsense.core import UnsupportedRequest
        assert acc.zcdp_to_approx_tight(0.5, 1e-6).epsilon > 0
        try:
            acc.pld_epsilon([acc.LaplaceEvent(1.0, 1.0)], delta=1e-6)
        except UnsupportedRequest as err:
            assert "dpsense[accounting]" in str(err)
        else:
            raise SystemExit("pld_epsilon did not refuse")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
