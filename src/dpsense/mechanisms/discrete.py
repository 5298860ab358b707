"""Mechanisms for integer-valued queries: the geometric (discrete Laplace) and discrete Gaussian mechanisms.

* ``geometric``: adds discrete Laplace noise with scale Delta/epsilon to an integer query of L1
  sensitivity Delta; pure epsilon-DP (Ghosh-Roughgarden-Sundararajan 2009; CKS 2020 Alg. 2 samples it
  exactly).
* ``discrete_gaussian``: adds N_Z(0, sigma^2) to an integer query of L2 sensitivity Delta; it is
  Delta^2/(2 sigma^2)-zCDP (CKS 2020 Thm 4 and Thm 14 for vectors) and, for a scalar, (epsilon, delta)-DP
  with the exact delta of CKS 2020 Thm 7.

The guarantees hold under the adjacency for which ``sensitivity`` is the global sensitivity.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from dpsense.accounting.gaussian_exact import discrete_gaussian_sigma2
from dpsense.core.errors import InvalidPrivacyParameter, InvalidSensitivity
from dpsense.core.numbers import NumberLike
from dpsense.core.privacy_loss import ZCDP, ApproxDP, PrivacyLoss, PureDP, check_delta, check_epsilon, check_rho
from dpsense.mechanisms._accuracy import discrete_gaussian_on_grid, discrete_laplace_on_grid
from dpsense.mechanisms._validate import as_int_values, check_confidence, check_sensitivity
from dpsense.mechanisms.result import Accuracy, MechanismResult
from dpsense.noise import exact, pool

POOL_MAX = 64


def _integer_sensitivity(value: NumberLike) -> int:
    sens = check_sensitivity(value)
    if sens.denominator != 1:
        raise InvalidSensitivity(
            "an integer query's sensitivity must be an integer", value, "round the sensitivity up to an integer"
        )
    return sens.numerator


def _draw(kind: str, parameter: Fraction, n: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    if kind == "dlap":
        return pool.pooled_discrete_laplace(parameter, n) if n <= POOL_MAX else exact.discrete_laplace(parameter, n)
    return pool.pooled_discrete_gaussian(parameter, n) if n <= POOL_MAX else exact.discrete_gaussian(parameter, n)


def geometric_accuracy(*, sensitivity: NumberLike, epsilon: NumberLike, confidence: float = 0.95) -> Accuracy:
    """The accuracy ``geometric`` states for these public parameters, before any value is known (a forecast)."""
    scale = Fraction(_integer_sensitivity(sensitivity)) / check_epsilon(epsilon)
    conf = check_confidence(confidence)
    return discrete_laplace_on_grid(scale, 1.0, conf, name="discrete Laplace (geometric)", snapped=False)


def geometric(value: Any, *, sensitivity: NumberLike, epsilon: NumberLike, confidence: float = 0.95) -> MechanismResult:
    """Release an integer query plus discrete Laplace noise of scale Delta/epsilon (pure epsilon-DP)."""
    eps = check_epsilon(epsilon)
    sens = _integer_sensitivity(sensitivity)
    conf = check_confidence(confidence)
    values, scalar = as_int_values(value)
    scale = Fraction(sens) / eps
    out = values + _draw("dlap", scale, values.size)
    return MechanismResult(
        value=int(out[0]) if scalar else out.reshape(np.shape(value)),
        loss=PureDP(eps),
        accuracy=geometric_accuracy(sensitivity=sens, epsilon=eps, confidence=conf),
        mechanism="geometric@1",
        guarantee="pure ε-DP for integer L1 sensitivity Δ (geometric mechanism; exact CKS 2020 sampler)",
        details={"scale": scale},
    )


def discrete_gaussian(
    value: Any,
    *,
    sensitivity: NumberLike,
    rho: NumberLike | None = None,
    epsilon: NumberLike | None = None,
    delta: NumberLike | None = None,
    confidence: float = 0.95,
) -> MechanismResult:
    """Release an integer query plus discrete Gaussian noise, calibrated either to ``rho`` or to ``(epsilon, delta)``.

    With ``rho``: sigma^2 = Delta^2/(2 rho) exactly, loss ``ZCDP(rho)``. With ``epsilon, delta`` (scalar
    queries): the smallest integer sigma^2 meeting CKS 2020 Thm 7, loss ``ApproxDP(epsilon, delta)``.
    """
    sens = _integer_sensitivity(sensitivity)
    conf = check_confidence(confidence)
    values, scalar = as_int_values(value)
    loss: PrivacyLoss
    if rho is not None and epsilon is None and delta is None:
        r = check_rho(rho)
        sigma2 = Fraction(sens * sens) / (2 * r)
        loss = ZCDP(r)
    elif rho is None and epsilon is not None and delta is not None:
        eps, dlt = check_epsilon(epsilon), check_delta(delta)
        if dlt == 0 or values.size != 1:
            raise InvalidPrivacyParameter(
                "(ε, δ) calibration of the discrete Gaussian needs δ > 0 and a scalar query",
                f"δ={delta}, {values.size} values",
                "pass delta > 0 for a scalar, or calibrate a vector with rho=...",
            )
        sigma2 = Fraction(discrete_gaussian_sigma2(epsilon=eps, delta=dlt, sensitivity=sens))
        loss = ApproxDP(eps, dlt)
    else:
        raise InvalidPrivacyParameter(
            "pass either rho, or both epsilon and delta",
            f"rho={rho}, epsilon={epsilon}, delta={delta}",
            "call discrete_gaussian(v, sensitivity=1, rho=0.5) or (..., epsilon=1, delta=1e-6)",
        )
    out = values + _draw("dgauss", sigma2, values.size)
    return MechanismResult(
        value=int(out[0]) if scalar else out.reshape(np.shape(value)),
        loss=loss,
        accuracy=discrete_gaussian_on_grid(sigma2, 1.0, conf, name="discrete Gaussian", snapped=False),
        mechanism="discrete_gaussian@1",
        guarantee="Δ²/(2σ²)-zCDP (CKS 2020 Thm 4/14); scalar (ε, δ) from CKS 2020 Thm 7",
        details={"sigma2": sigma2},
    )
