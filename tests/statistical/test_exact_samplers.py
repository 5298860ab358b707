"""Distribution tests with power for the exact samplers: pass at the true scale, fail at +-30 %."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpsense.noise import exact
from tests.statistical.gof import P_THRESHOLD, chi_square_pvalue, discrete_gaussian_pmf, discrete_laplace_pmf
from tests.statistical.power import WRONG, assert_calibrated

pytestmark = pytest.mark.statistical
N = 400_000


@pytest.mark.parametrize("scale", [Fraction(1, 2), Fraction(2), Fraction(10, 3), Fraction(25)])
def test_discrete_laplace_matches_pmf_and_rejects_wrong_scale(scale: Fraction) -> None:
    samples = exact.discrete_laplace(scale, N)
    span = int(12 * float(scale)) + 3
    assert_calibrated(lambda f: chi_square_pvalue(samples, discrete_laplace_pmf(float(scale) * f), -span, span))


@pytest.mark.parametrize("sigma2", [Fraction(1, 3), Fraction(5), Fraction(100), Fraction(40_000)])
def test_discrete_gaussian_matches_pmf_and_rejects_wrong_scale(sigma2: Fraction) -> None:
    samples = exact.discrete_gaussian(sigma2, N)
    span = int(7 * float(sigma2) ** 0.5) + 3
    # +-30 % on the scale sigma: sigma2 x f^2
    assert_calibrated(lambda f: chi_square_pvalue(samples, discrete_gaussian_pmf(float(sigma2) * f**2), -span, span))


@pytest.mark.parametrize(("num", "den"), [(0, 1), (1, 3), (1, 1), (5, 2), (7, 1)])
def test_bernoulli_exp_frequency(num: int, den: int) -> None:
    n = 1_000_000
    hits = int(exact.bernoulli_exp(np.full(n, num, dtype=np.int64), den).sum())
    p = np.exp(-num / den)
    # exp(-gamma x f); at p = 0 or 1 (gamma = 0) no factor changes p, so only the true rate is tested
    assert_calibrated(
        lambda f: float(stats.binomtest(hits, n, np.exp(-num / den * f)).pvalue),
        wrong=WRONG if 0 < p < 1 else (),
        what="gamma",
    )


def test_uniform_below_is_uniform_for_awkward_bounds() -> None:
    for m in (3, 1000, (1 << 40) + 7):
        draws = exact.uniform_below_scalar(m, 300_000)
        assert draws.min() >= 0 and draws.max() < m
        bins = draws if m < 10 else np.minimum(draws // (m // 10), 9)
        counts = np.bincount(bins, minlength=min(m, 10))
        expected = (
            np.full(counts.size, 1.0 / counts.size) if m < 10 else np.array([m // 10] * 9 + [m - 9 * (m // 10)]) / m
        )
        assert stats.chisquare(counts, expected * counts.sum()).pvalue > P_THRESHOLD
    lanes = exact.uniform_below(np.full(300_000, 6, dtype=np.int64))
    assert stats.chisquare(np.bincount(lanes, minlength=6)).pvalue > P_THRESHOLD
