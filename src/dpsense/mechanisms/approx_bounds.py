"""Approximate bounds: a charged, private estimate of where a column's values lie, for clipping.

Guarantee: pure ε-DP under add/remove or replace of one privacy unit, when each unit contributes at
most C rows (the caller bounds rows per unit first): Δ = C under add/remove, 2C under replace.
Mechanism: Google's ApproxBounds log-binned histogram (2K+1 public power-of-two bins), geometric
noise of scale Δ/ε on every bin (Laplace/geometric mechanism, Dwork-McSherry-Nissim-Smith 2006;
Ghosh-Roughgarden-Sundararajan 2009), and the outermost bins reaching a public threshold τ as
post-processing; docs/math/global-sensitivity.md §1.8. τ changes accuracy, never privacy; outlier
bins are skipped on purpose. Only the two bounds (powers of two, or None), τ and the loss are
returned; no bin reaching τ gives "no bounds", still charged. ``skipped_bin_rows`` bounds, from τ and
public parameters alone, how many rows a bin that did not reach τ can hold (the clipping-bias bound of
an adaptive clip, docs/math/global-sensitivity.md §1.5a).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpsense.core.checks import integer_in
from dpsense.core.errors import InvalidPrivacyParameter, UsageError
from dpsense.core.numbers import NumberLike
from dpsense.core.privacy_loss import PureDP, check_epsilon
from dpsense.mechanisms.discrete import geometric
from dpsense.noise import exact

__all__ = [
    "ApproxBounds",
    "approx_bounds",
    "approx_bounds_threshold",
    "bin_edges",
    "log_bin_indices",
    "skipped_bin_rows",
]

#: Default public exponents: |x| below 2^-20 is "zero", and 2^62 is the largest magnitude told apart.
SMALLEST_EXPONENT = -20
LARGEST_EXPONENT = 62
VERSION = "approx_bounds/log2@1"


@dataclass(frozen=True)
class ApproxBounds:
    """The released bounds (None when no bin reached the threshold), the public threshold and the loss."""

    low: float | None
    high: float | None
    threshold: int
    loss: PureDP
    mechanism: str
    guarantee: str

    @property
    def found(self) -> bool:
        """Whether some bin reached the threshold (the bounds are then finite floats with low < high)."""
        return self.low is not None and self.high is not None


def _check_exponents(smallest: int, largest: int) -> int:
    for name, value in (("smallest_exponent", smallest), ("largest_exponent", largest)):
        if not integer_in(value, -1000, 1000):
            raise UsageError(f"{name} must be an integer in [-1000, 1000]", value, f"pass e.g. {name}=-20")
    if not smallest < largest:
        raise UsageError("smallest_exponent must be below largest_exponent", (smallest, largest), "pass e.g. (-20, 62)")
    return largest - smallest


def log_bin_indices(values: ArrayLike, *, smallest_exponent: int, largest_exponent: int) -> NDArray[np.int64]:
    """The signed bin index in [-K, K] of every non-NaN value (docs/math/global-sensitivity.md §1.8, step 1)."""
    K = _check_exponents(smallest_exponent, largest_exponent)
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    x = x[~np.isnan(x)]
    magnitude = np.abs(x)
    _, exponent = np.frexp(np.where(np.isinf(magnitude), 1.0, magnitude))  # |x| = m 2^e, m in [0.5, 1)
    j = exponent.astype(np.int64) - smallest_exponent  # floor(log2|x|) - k_min + 1
    j = np.where(np.isinf(magnitude), K, j)
    j = np.where(magnitude < math.ldexp(1.0, smallest_exponent), 0, np.clip(j, 1, K))
    return (np.sign(x).astype(np.int64) * j).astype(np.int64)


def bin_edges(index: int, *, smallest_exponent: int) -> tuple[float, float]:
    """The public [lower, upper] edges of bin ``index`` (the outermost bins report ±2^k_max)."""
    j = abs(index)
    if j == 0:
        edge = math.ldexp(1.0, smallest_exponent)
        return -edge, edge
    inner, outer = math.ldexp(1.0, smallest_exponent + j - 1), math.ldexp(1.0, smallest_exponent + j)
    return (inner, outer) if index > 0 else (-outer, -inner)


def approx_bounds_threshold(*, sensitivity: int, epsilon: NumberLike, bins: int, success_probability: float) -> int:
    """The smallest τ >= 1 with bins · a^τ / (1 + a) <= 1 - p, a = exp(-ε/Δ) (P[Z >= τ] of the noise)."""
    eps = check_epsilon(epsilon)
    if not (isinstance(success_probability, float | int) and 0 < float(success_probability) < 1):
        raise UsageError("success_probability must lie strictly between 0 and 1", success_probability, "pass e.g. 0.95")
    if not exact.geometric_scale_ok(sensitivity, eps):  # also keeps the loops below short (tau ~ Δ/ε)
        raise InvalidPrivacyParameter(
            "ε is too small for the exact geometric sampler of approx_bounds (scale Δ/ε beyond 2^52 steps)",
            float(eps),
            "ask for a larger epsilon, e.g. 0.01",
        )
    rate = float(eps) / sensitivity
    a = math.exp(-rate)
    miss = 1 - float(success_probability)
    tau = max(1, math.ceil(math.log(bins / (miss * (1 + a))) / rate))
    while tau > 1 and bins * math.exp(-rate * (tau - 1)) / (1 + a) <= miss:
        tau -= 1
    while bins * math.exp(-rate * tau) / (1 + a) > miss:
        tau += 1
    return tau


def skipped_bin_rows(
    *, threshold: int, epsilon: NumberLike, sensitivity: int, bins: int, failure_probability: float
) -> int:
    """The m = τ - 1 + t rows that, w.p. >= 1 - β, bound every covered bin whose noisy count stayed below τ.

    A bin of true count c >= τ + t stays below τ only if its noise Z <= τ - 1 - c <= -(t + 1), of probability
    P[Z <= -(t + 1)] = a^(t+1) / (1 + a) for the discrete Laplace noise of ``approx_bounds``, a = exp(-ε/Δ);
    t is the smallest integer >= 0 with bins · a^(t+1) / (1 + a) <= β (a union bound over the bins, which
    must be fixed before the noise is drawn: e.g. every bin a value of the declared bounds can fall in).
    A function of public parameters only (docs/math/global-sensitivity.md §1.5a).

    Args:
        threshold: τ of the release (``ApproxBounds.threshold``).
        epsilon: the release's ε.
        sensitivity: its Δ (C under add/remove, 2C under replace).
        bins: how many bins the bound covers (the union bound's count).
        failure_probability: β, the chance that some covered bin below τ holds more than m rows.

    """
    eps = check_epsilon(epsilon)
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
        raise UsageError("threshold must be an integer >= 1", threshold, "pass the release's threshold")
    for name, value in (("sensitivity", sensitivity), ("bins", bins)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"{name} must be an integer >= 1", value, f"pass e.g. {name}=1")
    if not (isinstance(failure_probability, float | int) and 0 < float(failure_probability) < 1):
        raise UsageError("failure_probability must lie strictly between 0 and 1", failure_probability, "e.g. 0.01")
    if not exact.geometric_scale_ok(sensitivity, eps):  # the release could not have run: keeps the loop short
        raise InvalidPrivacyParameter("ε is too small for approx_bounds", float(eps), "ask for a larger epsilon")
    rate = float(eps) / sensitivity
    a = math.exp(-rate)
    # a margin below β against the rounding of exp and log: m is never too small
    miss = float(failure_probability) * (1 - 1e-9)
    t = max(0, math.ceil(math.log(bins / (miss * (1 + a))) / rate) - 1)
    while t > 0 and bins * math.exp(-rate * t) / (1 + a) <= miss:
        t -= 1
    while bins * math.exp(-rate * (t + 1)) / (1 + a) > miss:
        t += 1
    return threshold - 1 + t


def approx_bounds(
    values: ArrayLike,
    *,
    epsilon: NumberLike,
    max_rows_per_unit: int = 1,
    replace: bool = False,
    smallest_exponent: int = SMALLEST_EXPONENT,
    largest_exponent: int = LARGEST_EXPONENT,
    success_probability: float = 0.95,
) -> ApproxBounds:
    """Release approximate [low, high] bounds of ``values`` (pure ε-DP; docs/math/global-sensitivity.md §1.8).

    Args:
        values: the bounded rows' values (at most ``max_rows_per_unit`` per unit; NaN is ignored).
        epsilon: the privacy loss (> 0).
        max_rows_per_unit: C, the public bound on rows per unit the caller enforced.
        replace: True under replace adjacency (Δ = 2C), False under add/remove (Δ = C).
        smallest_exponent: k_min; magnitudes below 2^k_min share the zero bin.
        largest_exponent: k_max; magnitudes at or above 2^(k_max-1) share the outermost bins.
        success_probability: p, the chance that no empty bin passes the threshold.

    Returns:
        ``ApproxBounds`` with powers-of-two bounds (or None), the public threshold and ``PureDP(ε)``.

    """
    eps = check_epsilon(epsilon)
    C = max_rows_per_unit
    if isinstance(C, bool) or not isinstance(C, int) or C < 1:
        raise UsageError("max_rows_per_unit must be an integer >= 1", C, "pass the enforced bound C")
    K = _check_exponents(smallest_exponent, largest_exponent)
    sensitivity = 2 * C if replace else C
    bins = 2 * K + 1
    tau = approx_bounds_threshold(
        sensitivity=sensitivity, epsilon=eps, bins=bins, success_probability=success_probability
    )
    index = log_bin_indices(values, smallest_exponent=smallest_exponent, largest_exponent=largest_exponent)
    counts = np.bincount(index + K, minlength=bins).astype(np.int64)
    noisy = np.asarray(geometric(counts, sensitivity=sensitivity, epsilon=eps).value).reshape(-1)
    passing = np.flatnonzero(noisy >= tau)
    guarantee = (
        f"{PureDP(eps)}-DP: discrete Laplace of scale {sensitivity}/ε on a log2-binned histogram of "
        f"{bins} public bins (L1 sensitivity {sensitivity}), bounds from the bins reaching τ = {tau} "
        "(post-processing; Google ApproxBounds; Dwork et al. 2006)"
    )
    if passing.size == 0:
        return ApproxBounds(None, None, tau, PureDP(eps), VERSION, guarantee)
    low = bin_edges(int(passing[0]) - K, smallest_exponent=smallest_exponent)[0]
    high = bin_edges(int(passing[-1]) - K, smallest_exponent=smallest_exponent)[1]
    return ApproxBounds(low, high, tau, PureDP(eps), VERSION, guarantee)
