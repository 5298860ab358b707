"""Goodness-of-fit helpers with power: chi-square over bins that each expect >= 20 draws."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import stats

#: Every statistical test in dpsense rejects only below this p-value (docs/design.md, tests).
P_THRESHOLD = 1e-10


def chi_square_pvalue(samples: np.ndarray, pmf: Callable[[np.ndarray], np.ndarray], lo: int, hi: int) -> float:
    """p-value of a chi-square test that integer ``samples`` follow ``pmf`` on [lo, hi] plus two tail bins."""
    support = np.arange(lo, hi + 1)
    probs = pmf(support)
    n = samples.size
    counts = np.bincount(np.clip(samples, lo - 1, hi + 1) - (lo - 1), minlength=hi - lo + 3)
    expected = np.concatenate([[0.0], probs, [0.0]])
    expected[0] = max(0.0, 1 - probs.sum()) / 2 if lo > -np.inf else 0.0
    expected[-1] = max(0.0, 1 - probs.sum()) - expected[0]
    # Merge sparse bins: accumulate left to right until each bin expects >= 20 draws.
    obs_m, exp_m, acc_o, acc_e = [], [], 0.0, 0.0
    for o, e in zip(counts, expected * n, strict=True):
        acc_o += o
        acc_e += e
        if acc_e >= 20:
            obs_m.append(acc_o)
            exp_m.append(acc_e)
            acc_o = acc_e = 0.0
    if exp_m:
        obs_m[-1] += acc_o
        exp_m[-1] += acc_e
    obs_a, exp_a = np.array(obs_m), np.array(exp_m)
    exp_a *= obs_a.sum() / exp_a.sum()
    return float(stats.chisquare(obs_a, exp_a).pvalue)


def discrete_laplace_pmf(scale: float) -> Callable[[np.ndarray], np.ndarray]:
    """P(y) = (1-q)/(1+q) q^|y| with q = exp(-1/scale)."""
    q = np.exp(-1.0 / scale)
    return lambda y: (1 - q) / (1 + q) * q ** np.abs(y)


def discrete_gaussian_pmf(sigma2: float) -> Callable[[np.ndarray], np.ndarray]:
    """P(y) proportional to exp(-y^2/(2 sigma2)), normalised by direct summation."""
    half = int(40 * np.sqrt(sigma2)) + 10
    ys = np.arange(-half, half + 1)
    z = np.exp(-(ys.astype(float) ** 2) / (2 * sigma2)).sum()
    return lambda y: np.exp(-(y.astype(float) ** 2) / (2 * sigma2)) / z
