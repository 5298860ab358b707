"""The Laplace mechanism, float-safe.

Guarantee: pure epsilon-DP under the adjacency (add/remove or replace of one privacy unit) for which
``sensitivity`` is the query's global L1 sensitivity (Dwork-Roth Thm 3.6).

What is sampled (never textbook floating-point Laplace, see ``dpsense.noise.grid``): the value is
snapped to the grid g = 2**k with k = floor(log2(Delta/epsilon)) - 24 - max(0, ceil(log2(1/epsilon))),
capped at 40 bits, chosen from public parameters
only; the snapped integer vector has L1 sensitivity Delta_g = floor(Delta/g) + d grid steps; exact
discrete Laplace noise with integer scale t = ceil(Delta_g/epsilon) is added (CKS20 Alg. 2; the
geometric mechanism, Ghosh-Roughgarden-Sundararajan 2009, is epsilon-DP for t >= Delta_g/epsilon).
The resulting effective scale t*g exceeds Delta/epsilon by about g/Delta <= 2^-24 relative (2^-40/epsilon
below epsilon = 2^-16); it costs accuracy only, never privacy.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from math import ceil
from typing import Any

import numpy as np

from dpsense.core.numbers import NumberLike
from dpsense.core.privacy_loss import PureDP, check_epsilon
from dpsense.mechanisms._accuracy import continuous_laplace, discrete_laplace_on_grid
from dpsense.mechanisms._validate import as_float_values, check_confidence, check_sensitivity
from dpsense.mechanisms.result import Accuracy, MechanismResult
from dpsense.noise import exact, grid, pool

#: Grid steps per unit of scale: at least 2**24 steps per Delta/epsilon and at least 2**24 d per Delta
#: (so snapping d coordinates inflates the sensitivity by d g/Delta <= 2**-23), at most 2**40.
RESOLUTION_BITS = 24
MAX_RESOLUTION_BITS = 40
#: Releases of at most this many coordinates draw from the pre-filled pool (constant time).
POOL_MAX = 64
VERSION = "laplace/grid@1"


def laplace_plan(*, sensitivity: NumberLike, epsilon: NumberLike, dimension: int = 1) -> tuple[int, int]:
    """The public noise plan ``(k, t)``: grid 2**k and integer discrete-Laplace scale t (in grid steps)."""
    return _plan(check_sensitivity(sensitivity), check_epsilon(epsilon), dimension)


@functools.lru_cache(maxsize=256)
def _plan(sens: Fraction, eps: Fraction, dimension: int) -> tuple[int, int]:
    """``laplace_plan`` of checked parameters: a pure function of public values, remembered.

    A release plans each step's noise several times: admission at every dimension, accuracy, the draw.
    """
    # Small epsilon: the scale is many Deltas, so refine the grid by log2(1/epsilon) more bits; many
    # coordinates: each adds up to one step to the snapped L1 sensitivity, so refine by log2(d) more.
    extra = grid.floor_log2(1 / eps) + 1 if eps < 1 else 0
    extra += dimension.bit_length() - 1
    k = grid.granularity_exponent(sens / eps, min(MAX_RESOLUTION_BITS, RESOLUTION_BITS + extra))
    sens_units = grid.sensitivity_units_l1(sens, k, dimension)
    return k, ceil(Fraction(sens_units) / eps)


def laplace_scale_ok(*, sensitivity: NumberLike, epsilon: NumberLike, dimension: int = 1) -> bool:
    """Whether ``laplace`` can sample its plan's scale for these parameters (``exact.discrete_laplace_scale_ok``).

    Its grid must keep every value finite (``grid.MAX_NOISE_EXPONENT``). The integer scale t grows with
    ``dimension`` (each coordinate adds up to one grid step to the snapped sensitivity), so a check at the
    largest possible dimension covers every smaller one.
    """
    k, t = laplace_plan(sensitivity=sensitivity, epsilon=epsilon, dimension=dimension)
    return exact.discrete_laplace_scale_ok(Fraction(t)) and k <= grid.MAX_NOISE_EXPONENT


def laplace_accuracy(
    *, sensitivity: NumberLike, epsilon: NumberLike, dimension: int = 1, confidence: float = 0.95
) -> Accuracy:
    """The accuracy ``laplace`` states for these public parameters, before any value is known (a forecast).

    Per coordinate: the discrete Laplace of the plan's scale t on the grid 2**k, plus half a step of
    snapping; exactly the statement ``laplace`` returns with its release.
    """
    k, t = laplace_plan(sensitivity=sensitivity, epsilon=epsilon, dimension=dimension)
    g = float(np.ldexp(1.0, k))
    return discrete_laplace_on_grid(t, g, check_confidence(confidence), name=f"discrete Laplace on grid 2^{k}")


def laplace(value: Any, *, sensitivity: NumberLike, epsilon: NumberLike, confidence: float = 0.95) -> MechanismResult:
    """Release ``value + Laplace noise`` with pure epsilon-DP, float-safely.

    Args:
        value: the true query value, a number or a numeric array (the L1 sensitivity covers all of it).
        sensitivity: the declared global L1 sensitivity under the chosen adjacency (> 0).
        epsilon: the privacy parameter (> 0), read as a decimal (0.1 means 1/10).
        confidence: 1 - beta for the accuracy statement's error bound.

    Returns:
        A ``MechanismResult`` whose value is a float (or array) on the grid 2**k, with loss ``PureDP(epsilon)``.

    """
    eps = check_epsilon(epsilon)
    sens = check_sensitivity(sensitivity)
    conf = check_confidence(confidence)
    values, scalar = as_float_values(value)
    k, t = laplace_plan(sensitivity=sens, epsilon=eps, dimension=values.size)
    scale = Fraction(t)
    noise = (
        pool.pooled_discrete_laplace(scale, values.size)
        if values.size <= POOL_MAX
        else exact.discrete_laplace(scale, values.size)
    )
    out = grid.unsnap(grid.snap(values, k), noise, k)
    nominal = float(sens / eps)
    return MechanismResult(
        value=float(out[0]) if scalar else out.reshape(np.shape(value)),
        loss=PureDP(eps),
        accuracy=laplace_accuracy(sensitivity=sens, epsilon=eps, dimension=values.size, confidence=conf),
        mechanism=VERSION,
        guarantee="pure ε-DP for L1 sensitivity Δ (Dwork-Roth Thm 3.6), sampled exactly on a grid (CKS 2020 Alg. 2)",
        details={
            "granularity_exponent": k,
            "scale_steps": t,
            "nominal_scale": nominal,
            "nominal_accuracy": continuous_laplace(nominal, conf),
        },
    )
