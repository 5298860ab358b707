"""Approximate bounds: public bins, the threshold, the exact law of the released bounds with power."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpsense.core.errors import InvalidPrivacyParameter, UsageError
from dpsense.core.privacy_loss import PureDP
from dpsense.mechanisms.approx_bounds import (
    approx_bounds,
    approx_bounds_threshold,
    bin_edges,
    log_bin_indices,
)
from tests.statistical.power import assert_calibrated

K_MIN, K_MAX = -4, 12


def _tail(threshold: int, count: int, scale: float) -> float:
    """P[count + Z >= threshold] for the two-sided geometric Z with P(z) ∝ exp(-|z| / scale)."""
    a = math.exp(-1 / scale)
    m = threshold - count
    return 1 - a ** (1 - m) / (1 + a) if m <= 0 else a**m / (1 + a)


def test_every_value_falls_in_the_bin_whose_edges_hold_it() -> None:
    rng = np.random.default_rng(5)
    values = np.concatenate(
        [rng.uniform(-5000, 5000, 2000), [0.0, -0.0, 2.0**K_MIN, -(2.0**K_MIN), 2.0**-10, 1e300, -np.inf, np.inf]]
    )
    index = log_bin_indices(values, smallest_exponent=K_MIN, largest_exponent=K_MAX)
    assert index.min() >= -(K_MAX - K_MIN) and index.max() <= K_MAX - K_MIN
    for x, j in zip(values, index, strict=True):
        lo, hi = bin_edges(int(j), smallest_exponent=K_MIN)
        if abs(j) == K_MAX - K_MIN:  # the outermost bins also hold every larger magnitude
            assert abs(x) >= 2.0 ** (K_MAX - 1) and np.sign(x) == np.sign(j)
        elif j == 0:
            assert lo < x < hi
        else:
            assert lo <= x < hi if j > 0 else lo < x <= hi
    assert log_bin_indices([np.nan, 1.0], smallest_exponent=K_MIN, largest_exponent=K_MAX).tolist() == [1 - K_MIN]


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
@pytest.mark.parametrize("sensitivity", [1, 5])
def test_the_threshold_is_the_smallest_meeting_the_success_probability(eps: float, sensitivity: int) -> None:
    bins, p = 2 * (K_MAX - K_MIN) + 1, 0.95
    tau = approx_bounds_threshold(sensitivity=sensitivity, epsilon=eps, bins=bins, success_probability=p)
    scale = sensitivity / eps
    assert bins * _tail(tau, 0, scale) <= 1 - p
    assert tau == 1 or bins * _tail(tau - 1, 0, scale) > 1 - p


def test_bounds_cover_the_bulk_and_skip_a_lone_outlier() -> None:
    values = np.concatenate([np.random.default_rng(1).uniform(3, 90, 20_000), [1e9]])
    sure = 1 - 1e-9  # no empty bin and not the outlier's passes, but with chance ~1e-9
    res = approx_bounds(values, epsilon=1, smallest_exponent=K_MIN, largest_exponent=40, success_probability=sure)
    assert res.loss == PureDP(1) and res.found
    assert res.low == 2.0 and res.high == 128.0
    assert "1000000000" not in repr(res) and "20000" not in repr(res)


def test_no_bin_reaching_the_threshold_is_an_answer_without_bounds() -> None:
    sure = 1 - 1e-9
    res = approx_bounds(
        [1.0, 2.0], epsilon=0.1, smallest_exponent=K_MIN, largest_exponent=K_MAX, success_probability=sure
    )
    assert not res.found and res.low is None and res.high is None and res.loss == PureDP(0.1)


def test_bad_parameters_are_refused_with_the_fix() -> None:
    with pytest.raises(InvalidPrivacyParameter):
        approx_bounds([1.0], epsilon=0)
    with pytest.raises(UsageError, match="max_rows_per_unit"):
        approx_bounds([1.0], epsilon=1, max_rows_per_unit=0)
    with pytest.raises(UsageError, match="smallest_exponent must be below"):
        approx_bounds([1.0], epsilon=1, smallest_exponent=5, largest_exponent=5)
    with pytest.raises(UsageError, match="success_probability"):
        approx_bounds([1.0], epsilon=1, success_probability=1.0)


def _upper_law(counts: np.ndarray, tau: int, scale: float) -> np.ndarray:
    """P[highest passing bin = i] for every bin i, and P[none] last (independent noisy counts)."""
    passes = np.array([_tail(tau, int(c), scale) for c in counts])
    law = np.zeros(counts.size + 1)
    above_fail = 1.0
    for i in range(counts.size - 1, -1, -1):
        law[i] = passes[i] * above_fail
        above_fail *= 1 - passes[i]
    law[-1] = above_fail
    return law


@pytest.mark.statistical
def test_the_upper_bound_follows_its_exact_law_and_rejects_a_30_percent_scale_error() -> None:
    """The released upper edge is a function of independent noisy counts: its law is exact.

    Bins near the threshold make the law sensitive to the noise scale; the same draws are tested
    against the law at the true scale Δ/ε and at ±30 %.
    """
    eps, C = 0.5, 2
    K = K_MAX - K_MIN
    values = np.concatenate([np.full(30, 3.0), np.full(24, 40.0), np.full(20, 700.0), np.full(10, -20.0)])
    index = log_bin_indices(values, smallest_exponent=K_MIN, largest_exponent=K_MAX)
    counts = np.bincount(index + K, minlength=2 * K + 1)
    runs = 20_000
    highs = [
        approx_bounds(values, epsilon=eps, max_rows_per_unit=C, smallest_exponent=K_MIN, largest_exponent=K_MAX)
        for _ in range(runs)
    ]
    tau = highs[0].threshold
    observed = np.zeros(2 * K + 2)
    for r in highs:
        if r.high is None:
            observed[-1] += 1
        else:
            j = next(i for i in range(-K, K + 1) if bin_edges(i, smallest_exponent=K_MIN)[1] == r.high)
            observed[j + K] += 1

    def pvalue(scale: float) -> float:
        law = _upper_law(counts, tau, scale) * runs
        keep = law >= 20
        obs = np.append(observed[keep], observed[~keep].sum())
        exp = np.append(law[keep], law[~keep].sum())
        return float(stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)

    true_scale = C / eps
    assert_calibrated(lambda f: pvalue(f * true_scale))


@pytest.mark.statistical
def test_empirical_privacy_on_a_far_bin_with_a_control_at_twice_the_epsilon() -> None:
    """The hardest pair: one unit's row alone in a far bin. The audit must pass, and catch ε=2 claimed as 1."""
    from dpsense.audit.scenarios import Scenario, classical_scenarios, run_audit

    (scenario,) = [s for s in classical_scenarios() if s.name == "approx_bounds"]
    row = run_audit(scenario, samples=50_000)
    assert not row.flagged, f"approx_bounds VIOLATED: ε >= {row.result.epsilon_lower_bound:.3f} > 1"
    assert row.result.epsilon_lower_bound >= 0.2  # the pair is hard (0.3 seen at 50 000 samples; true loss ε = 1)

    bulk = np.full(40, 3.0)

    def broken(n: int) -> tuple[np.ndarray, np.ndarray]:
        def draw(data: np.ndarray) -> np.ndarray:
            out = [
                approx_bounds(data, epsilon=2, smallest_exponent=0, largest_exponent=21, success_probability=0.01).high
                for _ in range(n)
            ]
            return np.asarray([-1.0 if h is None else h for h in out])

        return draw(bulk), draw(np.append(bulk, 2.0**20))

    control = run_audit(
        Scenario("control: approx_bounds at 2ε", 1.0, 0.0, "same pair", broken, control=True), samples=50_000
    )
    assert control.flagged, f"control not caught: {control.result.epsilon_lower_bound:.3f}"
