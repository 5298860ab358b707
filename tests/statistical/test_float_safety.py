"""Floating-point safety of the grid Laplace and Gaussian (docs/math/floating-point.md).

* every output is a grid point;
* the exact pmf of each grid point under v and under a neighbour v' (|v - v'| <= Delta) has a
  log-ratio within epsilon (Laplace), or a hockey-stick divergence within delta (Gaussian);
* a chi-square test confirms the mechanism draws that pmf (and rejects a +-30 % scale);
* Mironov's attack: outputs reachable under one input and not the other exist for a textbook
  floating-point Laplace sampler and do not exist for ours.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpsense.accounting.gaussian_exact import discrete_gaussian_delta
from dpsense.mechanisms.gaussian import gaussian, gaussian_plan
from dpsense.mechanisms.laplace import laplace, laplace_plan
from dpsense.noise import entropy, grid
from tests.statistical.power import assert_calibrated

pytestmark = pytest.mark.statistical


def _snap_int(v: float, k: int) -> int:
    return int(grid.snap(np.array([v]), k)[0])


@settings(max_examples=300, deadline=None)
@given(
    v=st.floats(-1e6, 1e6, allow_nan=False),
    frac=st.floats(-1, 1),
    sens=st.sampled_from(["1", "0.3", "24", "1e-3"]),
    eps=st.sampled_from(["0.5", "0.1", "1", "2.3"]),
)
def test_laplace_grid_pmf_ratio_within_e_eps(v: float, frac: float, sens: str, eps: str) -> None:
    k, t = laplace_plan(sensitivity=sens, epsilon=eps)
    neighbour = v + frac * float(sens)
    if abs(neighbour - v) > float(sens):  # float rounding of the neighbour itself
        return
    n_v, n_w = _snap_int(v, k), _snap_int(neighbour, k)
    # log P_v(o) - log P_w(o) = (|o - n_w| - |o - n_v|)/t; its max over all grid points o is |n_v - n_w|/t.
    for o in (n_v, n_w, n_v - 10 * t, n_w + 10 * t, (n_v + n_w) // 2):
        log_ratio = Fraction(abs(o - n_w) - abs(o - n_v), t)
        assert abs(log_ratio) <= Fraction(eps)
    assert Fraction(abs(n_v - n_w), t) <= Fraction(eps)


@pytest.mark.parametrize(("sens", "eps", "delta"), [(1.0, 0.5, 1e-6), (24.0, 1.0, 1e-9), (0.01, 2.0, 1e-5)])
def test_gaussian_grid_hockey_stick_within_delta(sens: float, eps: float, delta: float) -> None:
    k, sigma2, _ = gaussian_plan(sensitivity=sens, epsilon=eps, delta=delta)
    s2 = float(sigma2)
    g = 2.0**k
    worst = 0.0
    for v, w in [(0.0, sens), (0.49 * g, 0.49 * g + sens), (3.7, 3.7 - sens)]:
        n_v, n_w = _snap_int(v, k), _snap_int(w, k)
        half = int(40 * math.sqrt(s2)) + abs(n_v - n_w) + 10
        o = np.arange(min(n_v, n_w) - half, max(n_v, n_w) + half + 1, dtype=np.float64)
        norm = np.exp(-(np.arange(-half * 2, half * 2 + 1, dtype=np.float64) ** 2) / (2 * s2)).sum()
        p_v = np.exp(-((o - n_v) ** 2) / (2 * s2)) / norm
        p_w = np.exp(-((o - n_w) ** 2) / (2 * s2)) / norm
        for a, b in ((p_v, p_w), (p_w, p_v)):
            worst = max(worst, float(np.maximum(a - math.exp(eps) * b, 0).sum()))
    assert worst <= delta * (1 + 1e-6)
    # and the same number from the closed form of CKS 2020 Thm 7 at the grid sensitivity
    sens_units = int(grid.sensitivity_units_l2(Fraction(sens), k, 1))
    assert discrete_gaussian_delta(epsilon=eps, sigma2=sigma2, sensitivity=sens_units) <= delta * (1 + 1e-6)


def _dlap_cdf(k: np.ndarray, t: float) -> np.ndarray:
    q = math.exp(-1 / t)
    return np.where(k >= 0, 1 - q ** (k + 1) / (1 + q), q ** (-k) / (1 + q))


def _binned_pvalue(units: np.ndarray, t: float) -> float:
    edges = np.unique(np.round(np.quantile(units, np.linspace(0, 1, 41)[1:-1])).astype(np.int64))
    cdf = np.concatenate([[0.0], _dlap_cdf(edges, t), [1.0]])
    expected = np.diff(cdf) * units.size
    observed = np.bincount(np.searchsorted(edges, units, side="left"), minlength=edges.size + 1)
    return float(stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue)


def test_laplace_mechanism_draws_its_pmf_and_every_output_is_on_the_grid() -> None:
    n = 200_000
    v = np.full(n, 10.3)
    res = laplace(v, sensitivity=1, epsilon=0.5)
    k, t = res.details["granularity_exponent"], res.details["scale_steps"]
    units = np.ldexp(res.value, -k)
    assert np.all(units == np.rint(units)), "an output is off the grid"
    noise_units = units.astype(np.int64) - _snap_int(10.3, k)
    assert_calibrated(lambda f: _binned_pvalue(noise_units, t * f))


def test_gaussian_mechanism_draws_its_pmf_and_rejects_wrong_scale() -> None:
    res = gaussian(np.full(100_000, -2.5), sensitivity=1, epsilon=1, delta=1e-6)
    k, sigma2 = res.details["granularity_exponent"], float(res.details["sigma2_steps"])
    units = np.ldexp(res.value, -k)
    assert np.all(units == np.rint(units))
    noise = units - _snap_int(-2.5, k)
    assert_calibrated(lambda f: float(stats.kstest(noise / (math.sqrt(sigma2) * f), "norm").pvalue))


# --- Mironov's attack --------------------------------------------------------------------------


def _textbook_noise(U: np.ndarray, b: float) -> np.ndarray:
    """The broken textbook sampler: -b*sgn(u)*log(1-2|u|) with u = U/2^53 - 1/2 (test code only)."""
    u = U.astype(np.float64) * 2.0**-53 - 0.5
    return -b * np.sign(u) * np.log(1 - 2 * np.abs(u))


def _textbook_reachable(outputs: np.ndarray, v: float, b: float) -> np.ndarray:
    """Whether some 53-bit U gives fl(v + noise(U)) == o exactly (binary search; the map is monotone)."""
    lo = np.ones(outputs.size, dtype=np.int64)
    hi = np.full(outputs.size, (1 << 53) - 1, dtype=np.int64)
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        below = v + _textbook_noise(mid, b) < outputs
        lo = np.where(below, mid + 1, lo)
        hi = np.where(below, hi, mid)
    return v + _textbook_noise(lo, b) == outputs


def test_mironov_attack_breaks_textbook_laplace_but_not_the_grid_sampler() -> None:
    b, n = 2.0, 20_000
    U = (entropy.words(n) >> np.uint64(11)).astype(np.int64) | 1
    textbook_out = 0.0 + _textbook_noise(U, b)
    distinguishing = ~_textbook_reachable(textbook_out, 1.0, b)
    # Outputs seen under v = 0 that v = 1 can never produce: exact distinguishing events.
    assert distinguishing.mean() > 0.05

    res = laplace(np.zeros(n), sensitivity=1, epsilon=1 / b)
    k, t = res.details["granularity_exponent"], res.details["scale_steps"]
    units = np.ldexp(res.value, -k)
    # Under v' = 1 every grid point o has probability proportional to q^|o - n_1| > 0: all reachable.
    assert np.all(units == np.rint(units))
    offsets = np.abs(units - _snap_int(1.0, k))
    assert np.all(np.isfinite(offsets)) and np.all(offsets < 200 * t)
