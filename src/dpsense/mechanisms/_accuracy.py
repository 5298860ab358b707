"""Public accuracy statements for the noise families dpsense samples (no data enters here)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpsense.mechanisms.result import Accuracy


def continuous_laplace(scale: float, confidence: float) -> Accuracy:
    """Idealised Laplace(b): E|Z| = b and P(|Z| > b ln(1/beta)) = beta."""
    beta = 1 - confidence
    return Accuracy("Laplace (ideal, real arithmetic)", scale, scale, confidence, scale * math.log(1 / beta))


def discrete_laplace_on_grid(
    t: int | Fraction, granularity: float, confidence: float, *, name: str, snapped: bool = True
) -> Accuracy:
    """Discrete Laplace with P(k) proportional to q^|k|, q = exp(-1/t), times the grid step g, plus snapping.

    E|K| = 2q/(1-q^2); P(|K| >= m) = 2 q^m/(1+q) for m >= 1; snapping the input adds at most g/2.
    """
    beta = 1 - confidence
    q = math.exp(-1 / float(t))
    log_q = math.log(q) if q > 0 else -1 / float(t)  # q underflows to 0 for a scale t below 1/745: no noise
    mean_abs = 2 * q / (1 - q * q)
    # smallest m with P(|K| > m) = 2 q^(m+1)/(1+q) <= beta
    m = max(0, math.ceil(math.log(beta * (1 + q) / 2) / log_q) - 1)
    return Accuracy(
        name,
        float(t) * granularity,
        mean_abs * granularity,
        confidence,
        m * granularity + (granularity / 2 if snapped else 0.0),
    )


def discrete_gaussian_on_grid(
    sigma2: Fraction | int, granularity: float, confidence: float, *, name: str, snapped: bool = True
) -> Accuracy:
    """Discrete Gaussian N_Z(0, sigma2) times the grid step g, plus snapping.

    E|Y| by direct summation of the pmf; the bound uses sub-Gaussianity (CKS20: the discrete Gaussian
    is sigma^2-sub-Gaussian), P(|Y| >= m) <= 2 exp(-m^2/(2 sigma2)).
    """
    beta = 1 - confidence
    s2 = float(sigma2)
    sigma = math.sqrt(s2)
    half = int(40 * sigma) + 10
    ys = np.arange(-half, half + 1, dtype=np.float64)
    w = np.exp(-(ys * ys) / (2 * s2))
    mean_abs = float((np.abs(ys) * w).sum() / w.sum())
    bound = sigma * math.sqrt(2 * math.log(2 / beta))
    return Accuracy(
        name,
        sigma * granularity,
        mean_abs * granularity,
        confidence,
        math.ceil(bound) * granularity + (granularity / 2 if snapped else 0.0),
    )
