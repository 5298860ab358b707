"""Local-DP distribution tests with power: pass at the true ε, fail at ε x (1 +/- 0.3).

Every sampler test runs the same statistic against the true report probabilities (must not reject
at P_THRESHOLD = 1e-10) and against the probabilities an ε off by 30 % in either direction would
give (must reject). Estimator tests repeat the whole pipeline R times on fixed inputs: the mean
error must stay within 6 standard errors of the stated variance, and the sample variance must lie in
the two-sided chi-square interval of level P_THRESHOLD around it (the estimates are affine in sums
of >= 500 Bernoulli reports, so normal to a good approximation). All draws use the OS CSPRNG.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpsense.mechanisms.local import (
    k_ary_randomized_response,
    optimized_unary_encoding,
    randomized_response,
)
from dpsense.mechanisms.local_estimators import (
    estimate_counts_grr,
    estimate_counts_oue,
    estimate_proportion_rr,
    grr_count_variance,
    oue_count_variance,
    rr_proportion_variance,
)
from dpsense.noise import lazy_bernoulli
from tests.statistical.gof import P_THRESHOLD
from tests.statistical.power import WRONG, assert_calibrated

pytestmark = pytest.mark.statistical


def _grr_probs(k: int, eps: float) -> tuple[float, float]:
    return math.exp(eps) / (math.exp(eps) + k - 1), 1 / (math.exp(eps) + k - 1)


def _joint_table_pvalue(values: np.ndarray, reports: np.ndarray, k: int, eps: float) -> float:
    """Pearson chi-square of the (input, report) table against GRR at ε; df = k(k-1)."""
    p, q = _grr_probs(k, eps)
    observed = np.bincount(values * k + reports, minlength=k * k).reshape(k, k).astype(float)
    expected = observed.sum(axis=1, keepdims=True) * np.where(np.eye(k, dtype=bool), p, q)
    assert expected.min() >= 50  # chi-square regime
    statistic = float(((observed - expected) ** 2 / expected).sum())
    return float(stats.chi2.sf(statistic, k * (k - 1)))


def _variance_interval(r: int, alpha: float) -> tuple[float, float]:
    """Bounds on s^2/sigma^2 for r normal draws, two-sided at level alpha."""
    return stats.chi2.ppf(alpha / 2, r - 1) / (r - 1), stats.chi2.isf(alpha / 2, r - 1) / (r - 1)


def _consistent(estimates: np.ndarray, truth: np.ndarray, variance: np.ndarray, alpha: float) -> bool:
    """Mean error within 6 SE and sample variance inside the chi-square interval, per column."""
    r = estimates.shape[0]
    lo, hi = _variance_interval(r, alpha)
    mean_ok = np.abs(estimates.mean(axis=0) - truth) <= 6 * np.sqrt(variance / r)
    ratio = estimates.var(axis=0, ddof=1) / variance
    return bool(np.all(mean_ok) and np.all((lo <= ratio) & (ratio <= hi)))


# ---------------------------------------------------------------------------------------------
# Samplers
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", ["0.1", "1", "5"])
def test_randomized_response_truth_rate_per_input(epsilon: str) -> None:
    n = 2_000_000
    bits = np.arange(n) % 2 == 0
    reports = randomized_response(bits, epsilon=epsilon).value
    truthful = [int((reports[bits == b] == b).sum()) for b in (False, True)]
    eps = float(epsilon)

    def pvalue(e: float) -> float:
        p = math.exp(e) / (math.exp(e) + 1)
        return float(min(stats.binomtest(t, n // 2, p).pvalue for t in truthful)) * 2  # Bonferroni over inputs

    assert_calibrated(lambda f: pvalue(eps * f), what="ε")


@pytest.mark.parametrize(("k", "epsilon"), [(3, "0.5"), (5, "1"), (30, "3.5")])
def test_k_ary_randomized_response_joint_table(k: int, epsilon: str) -> None:
    n = 1_000_000
    values = np.arange(n) % k
    reports = k_ary_randomized_response(values, k=k, epsilon=epsilon).value
    eps = float(epsilon)
    assert_calibrated(lambda f: _joint_table_pvalue(values, reports, k, eps * f), what="ε")


def test_k_ary_randomized_response_large_domain() -> None:
    """k = 1000, ε = 8: truthful rate (binomial) and lies uniform over the other k-1 offsets."""
    n, k, eps = 1_000_000, 1000, 8.0
    values = np.arange(n) % 17 * 59  # a few popular values spread over the domain
    reports = k_ary_randomized_response(values, k=k, epsilon=8).value
    truthful = reports == values
    offsets = (reports[~truthful] - values[~truthful]) % k  # in 1..k-1, uniform if the lie is uniform
    offset_p = stats.chisquare(np.bincount(offsets, minlength=k)[1:]).pvalue
    assert offset_p > P_THRESHOLD / 2
    assert_calibrated(
        lambda f: float(stats.binomtest(int(truthful.sum()), n, _grr_probs(k, eps * f)[0]).pvalue),
        alpha=P_THRESHOLD / 2,  # Bonferroni over the two statistics
        what="ε",
    )


@pytest.mark.parametrize(("k", "epsilon"), [(2, "0.1"), (8, "1"), (16, "4")])
def test_optimized_unary_encoding_bit_rates(k: int, epsilon: str) -> None:
    n = max(200_000, 2_000_000 // (k - 1))  # >= 2e6 "other" bits: |z| > 20 at ε x (1 +/- 0.3)
    values = np.arange(n) % k
    reports = optimized_unary_encoding(values, k=k, epsilon=epsilon).value
    true_mask = np.zeros((n, k), dtype=bool)
    true_mask[np.arange(n), values] = True
    ones_true = int(reports[true_mask].sum())
    ones_other = int(reports[~true_mask].sum())
    row_sums = np.bincount(reports.sum(axis=1), minlength=k + 1)
    eps = float(epsilon)

    def pvalue(e: float) -> float:
        qp = 1 / (math.exp(e) + 1)
        # Rows: one Bernoulli(1/2) plus k-1 independent Bernoulli(q') bits.
        pmf = np.convolve([0.5, 0.5], stats.binom.pmf(np.arange(k), k - 1, qp))
        keep = pmf * n >= 20
        rows_obs = np.append(row_sums[keep], row_sums[~keep].sum())
        rows_exp = np.append(pmf[keep], pmf[~keep].sum()) * n
        rows_p = stats.chisquare(rows_obs[rows_exp > 0], rows_exp[rows_exp > 0] * n / rows_exp.sum()).pvalue
        return 3 * float(  # Bonferroni over three statistics
            min(
                stats.binomtest(ones_true, n, 0.5).pvalue,
                stats.binomtest(ones_other, n * (k - 1), qp).pvalue,
                rows_p,
            )
        )

    assert_calibrated(lambda f: pvalue(eps * f), what="ε")


@pytest.mark.parametrize(("c", "epsilon"), [(1, Fraction(1)), (6, Fraction(7, 5))])
def test_lazy_comparison_with_tiny_blocks_is_exact(c: int, epsilon: Fraction) -> None:
    """2-bit blocks tie with probability 1/4 per level, so deep levels of the expansion are exercised."""
    n = 1_000_000
    hits = int(lazy_bernoulli.bernoulli_lazy(lazy_bernoulli.RationalOddsProbability(c, epsilon), n, block_bits=2).sum())
    eps = float(epsilon)
    assert_calibrated(lambda f: float(stats.binomtest(hits, n, c / (math.exp(eps * f) + c)).pvalue), what="ε")


# ---------------------------------------------------------------------------------------------
# Estimators: unbiased, with the stated variance
# ---------------------------------------------------------------------------------------------


def _rr_estimates(bits: np.ndarray, eps: str, estimate_eps: str | float) -> np.ndarray:
    r, n = bits.shape
    reports = randomized_response(bits.ravel(), epsilon=eps).value.reshape(r, n)
    return np.array([[estimate_proportion_rr(row, epsilon=estimate_eps).value] for row in reports])


def test_rr_estimator_fixed_inputs_unbiased_with_exact_variance() -> None:
    r, n, eps = 4000, 500, "2"
    bits = np.tile(np.arange(n) < 150, (r, 1))  # the same 500 users, 30 % ones, every repetition
    estimates = _rr_estimates(bits, eps, eps)
    truth = np.array([0.3])
    exact = np.array([rr_proportion_variance(n=n, epsilon=eps)])
    assert _consistent(estimates, truth, exact, P_THRESHOLD)
    # Power: the i.i.d.-sampling variance (docs/math/local-dp.md; adds pi(1-pi)/n) does not fit fixed inputs,
    # and estimates computed with an ε off by 30 % are biased.
    iid = np.array([rr_proportion_variance(n=n, epsilon=eps, population_proportion=0.3)])
    assert not _consistent(estimates, truth, iid, P_THRESHOLD)
    for wrong in WRONG:
        assert not _consistent(_rr_estimates(bits, eps, float(eps) * wrong), truth, exact, P_THRESHOLD)


def test_rr_estimator_iid_population_has_the_algorithms_md_variance() -> None:
    r, n, eps, pi = 4000, 500, "2", 0.3
    rng = np.random.default_rng(20240601)  # synthetic test population only; the noise is dpsense's
    bits = rng.random((r, n)) < pi
    estimates = _rr_estimates(bits, eps, eps)
    iid = np.array([rr_proportion_variance(n=n, epsilon=eps, population_proportion=pi)])
    assert _consistent(estimates, np.array([pi]), iid, P_THRESHOLD)
    noise_only = np.array([rr_proportion_variance(n=n, epsilon=eps)])
    assert not _consistent(estimates, np.array([pi]), noise_only, P_THRESHOLD)


def test_grr_estimator_unbiased_with_exact_variance() -> None:
    r, k, eps = 3000, 5, "1"
    counts = np.array([400, 300, 200, 100, 0])
    n = int(counts.sum())
    values = np.repeat(np.arange(k), counts)
    reports = k_ary_randomized_response(np.tile(values, r), k=k, epsilon=eps).value.reshape(r, n)

    def estimates(e: str | float) -> np.ndarray:
        return np.array([estimate_counts_grr(row, k=k, epsilon=e).value for row in reports])

    exact = grr_count_variance(n=n, k=k, epsilon=eps, count=counts)
    assert _consistent(estimates(eps), counts, exact, P_THRESHOLD / k)
    for wrong in WRONG:
        assert not _consistent(estimates(float(eps) * wrong), counts, exact, P_THRESHOLD / k)


def test_oue_estimator_unbiased_with_exact_not_approximate_variance() -> None:
    r, k, eps = 2000, 6, "3"
    counts = np.array([600, 250, 100, 50, 0, 0])
    n = int(counts.sum())
    values = np.repeat(np.arange(k), counts)
    reports = optimized_unary_encoding(np.tile(values, r), k=k, epsilon=eps).value.reshape(r, n, k)

    def estimates(e: str | float) -> np.ndarray:
        return np.array([estimate_counts_oue(row, epsilon=e).value for row in reports])

    good = estimates(eps)
    exact = oue_count_variance(n=n, epsilon=eps, count=counts)
    assert _consistent(good, counts, exact, P_THRESHOLD / k)
    # The usual "≈ n·4e^ε/(e^ε-1)^2" (docs/math/local-dp.md) drops the c_v term: rejected for the popular categories.
    approx = oue_count_variance(n=n, epsilon=eps, count=np.zeros(k))
    assert not _consistent(good, counts, approx, P_THRESHOLD / k)
    for wrong in WRONG:
        assert not _consistent(estimates(float(eps) * wrong), counts, exact, P_THRESHOLD / k)
