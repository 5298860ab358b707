"""The Gaussian mechanism, float-safe, with exact calibration.

Guarantee: (epsilon, delta)-DP under the adjacency for which ``sensitivity`` is the query's global
L2 sensitivity.

Analysis of the ideal (continuous) mechanism: the exact Balle-Wang calibration (ICML 2018, Thm 8),
never the classic sigma = Delta sqrt(2 ln(1.25/delta))/epsilon, which is only valid for epsilon < 1.

What is sampled: a discrete Gaussian on a power-of-two grid (``dpsense.noise.grid``). The grid
g = 2**k, k = floor(log2(sigma_BW)) - 13, is chosen from the public Balle-Wang sigma; the snapped
vector's L2 sensitivity is Delta_g = floor(Delta/g) + 1 steps for a scalar (Delta/g + sqrt(d) for d
coordinates). The integer variance sigma_g^2 is then calibrated for the discrete Gaussian itself:
for one coordinate with the exact (epsilon, delta) of Canonne-Kamath-Steinke 2020 Thm 7, for d
coordinates through its rho = Delta_g^2/(2 sigma_g^2) zCDP guarantee (CKS20 Thm 14) and the tight
zCDP -> (epsilon, delta) conversion (CKS20 Prop 12 / Asoodeh et al.). The 2^13 steps per sigma keep
the sampler's integers inside int64; they inflate the noise by about 2^-13 * sigma/Delta relative
(0.06 % at epsilon = 1, 6 % at epsilon = 0.01), the price of exactness, shown in ``details``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpsense.accounting.gaussian_exact import balle_wang_sigma, discrete_gaussian_sigma2
from dpsense.accounting.zcdp import approx_delta_of_zcdp
from dpsense.core.errors import InvalidPrivacyParameter
from dpsense.core.numbers import DELTA_SLACK, NumberLike
from dpsense.core.privacy_loss import ApproxDP, check_delta, check_epsilon
from dpsense.mechanisms._accuracy import discrete_gaussian_on_grid
from dpsense.mechanisms._validate import as_float_values, check_confidence, check_sensitivity
from dpsense.mechanisms.result import Accuracy, MechanismResult
from dpsense.noise import exact, grid, pool

RESOLUTION_BITS = 13
POOL_MAX = 64
VERSION = "gaussian/grid@1"


def _rho_for(epsilon: Fraction, delta: Fraction) -> float:
    """The largest rho whose tight zCDP -> DP conversion gives delta(epsilon) <= delta (bisection)."""
    lo, hi = 0.0, float(epsilon)
    while approx_delta_of_zcdp(hi, float(epsilon)) <= float(delta):
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        if approx_delta_of_zcdp(mid, float(epsilon)) <= float(delta) * (1 - DELTA_SLACK):
            lo = mid
        else:
            hi = mid
    return lo


def gaussian_plan(
    *, sensitivity: NumberLike, epsilon: NumberLike, delta: NumberLike, dimension: int = 1
) -> tuple[int, Fraction, float]:
    """The public plan ``(k, sigma2_steps, sigma_balle_wang)`` for the grid Gaussian."""
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    if dlt == 0:
        raise InvalidPrivacyParameter(
            "the Gaussian mechanism needs delta > 0", delta, "pass delta > 0, or use laplace() for pure ε-DP"
        )
    sens = check_sensitivity(sensitivity)
    sigma_bw = balle_wang_sigma(epsilon=eps, delta=dlt, sensitivity=sens)
    k = grid.granularity_exponent(Fraction(sigma_bw), RESOLUTION_BITS)
    sens_units = grid.sensitivity_units_l2(sens, k, dimension)
    if dimension == 1:
        sigma2 = Fraction(discrete_gaussian_sigma2(epsilon=eps, delta=dlt, sensitivity=int(sens_units)))
    else:
        rho = _rho_for(eps, dlt)
        sigma2 = Fraction(math.ceil(sens_units * sens_units / (2 * Fraction(rho))))
    return k, sigma2, sigma_bw


def gaussian_scale_ok(*, sensitivity: NumberLike, epsilon: NumberLike, delta: NumberLike, dimension: int = 1) -> bool:
    """Whether ``gaussian`` can sample its plan's variance for these public parameters.

    The variance in grid steps grows with ``dimension`` (the snapped L2 sensitivity does), so a check
    at the largest possible dimension covers every smaller one (``exact.discrete_gaussian_variance_ok``).
    """
    k, sigma2, _ = gaussian_plan(sensitivity=sensitivity, epsilon=epsilon, delta=delta, dimension=dimension)
    return exact.discrete_gaussian_variance_ok(sigma2) and k <= grid.MAX_NOISE_EXPONENT


def gaussian_accuracy(
    *, sensitivity: NumberLike, epsilon: NumberLike, delta: NumberLike, dimension: int = 1, confidence: float = 0.95
) -> Accuracy:
    """The accuracy ``gaussian`` states for these public parameters, before any value is known (a forecast)."""
    k, sigma2, _ = gaussian_plan(sensitivity=sensitivity, epsilon=epsilon, delta=delta, dimension=dimension)
    g = float(np.ldexp(1.0, k))
    return discrete_gaussian_on_grid(sigma2, g, check_confidence(confidence), name=f"discrete Gaussian on grid 2^{k}")


def gaussian(
    value: Any, *, sensitivity: NumberLike, epsilon: NumberLike, delta: NumberLike, confidence: float = 0.95
) -> MechanismResult:
    """Release ``value + Gaussian noise`` with (epsilon, delta)-DP, float-safely.

    Args:
        value: the true query value, a number or numeric array (the L2 sensitivity covers all of it).
        sensitivity: the declared global L2 sensitivity under the chosen adjacency (> 0).
        epsilon: > 0, read as a decimal.
        delta: in (0, 1).
        confidence: 1 - beta for the accuracy statement's error bound (per coordinate).

    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    sens = check_sensitivity(sensitivity)
    conf = check_confidence(confidence)
    values, scalar = as_float_values(value)
    k, sigma2, sigma_bw = gaussian_plan(sensitivity=sens, epsilon=eps, delta=dlt, dimension=values.size)
    noise = (
        pool.pooled_discrete_gaussian(sigma2, values.size)
        if values.size <= POOL_MAX
        else exact.discrete_gaussian(sigma2, values.size)
    )
    out = grid.unsnap(grid.snap(values, k), noise, k)
    g = float(np.ldexp(1.0, k))
    return MechanismResult(
        value=float(out[0]) if scalar else out.reshape(np.shape(value)),
        loss=ApproxDP(eps, dlt),
        accuracy=gaussian_accuracy(sensitivity=sens, epsilon=eps, delta=dlt, dimension=values.size, confidence=conf),
        mechanism=VERSION,
        guarantee=(
            "(ε, δ)-DP for L2 sensitivity Δ; sampled as a discrete Gaussian on a grid, calibrated with "
            "CKS 2020 Thm 7 (scalar) or its zCDP bound (vector)"
        ),
        details={
            "granularity_exponent": k,
            "sigma2_steps": sigma2,
            "sigma": math.sqrt(float(sigma2)) * g,
            "sigma_balle_wang": sigma_bw,
        },
    )
