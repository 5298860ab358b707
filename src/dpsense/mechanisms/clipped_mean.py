"""The mean with a privately chosen clipping bound: a data-dependent range, paid for in the budget.

A wide public domain [L, U] makes the global-sensitivity mean useless ((U - L)/n per record) even
when almost all data sit far below U. Instead of trusting a guessed bound (a data-dependent choice
that leaks unless it is itself private), spend part of the budget on it:

1. c = an epsilon_1-DP estimate of the ``clip_quantile`` (e.g. 0.99) of the values on [L, U]
   (exponential-mechanism quantile, ``em_quantile``; Smith 2011);
2. release mean(clip(x, L, c)) + Laplace((c - L)/(n epsilon_2)) with n public (replace one record;
   the clipped mean's global sensitivity given the public-after-step-1 range [L, c] is (c - L)/n;
   float-safe ``laplace``).

The whole is (epsilon_1 + epsilon_2)-DP under replace adjacency with n public (basic composition,
DR Thm 3.16; step 2 treats c as public because it is the output of step 1: adaptive composition).
The clipping bias (values above c pulled down to c) is part of the error and is reported as such in
the benchmarks; it is small when ``clip_quantile`` is high and the tail is light beyond it.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike

from dpsense.core.errors import InvalidBounds, InvalidData, UsageError
from dpsense.core.numbers import NumberLike, to_fraction
from dpsense.core.privacy_loss import PureDP, check_epsilon
from dpsense.mechanisms.laplace import laplace
from dpsense.mechanisms.quantile import em_quantile
from dpsense.mechanisms.result import MechanismResult
from dpsense.sensitivity.bounds import Bounds
from dpsense.sensitivity.contribution import exact_clipped_sum


def clipped_mean(
    values: ArrayLike,
    *,
    bounds: tuple[float, float],
    epsilon: NumberLike,
    clip_quantile: NumberLike = "0.99",
    bound_share: NumberLike = "0.25",
) -> MechanismResult:
    """Release the mean of ``values`` (n public, replace one record) with a privately chosen upper clip.

    Args:
        values: the records (1-D, finite).
        bounds: the public domain [L, U].
        epsilon: the total privacy loss; ``bound_share`` of it chooses the clip, the rest the mean.
        clip_quantile: the quantile used as the upper clipping bound (public).
        bound_share: the fraction of epsilon spent on the clipping bound (public, in (0, 1)).

    """
    eps = check_epsilon(epsilon)
    share = to_fraction(bound_share, name="bound_share")
    if not 0 < share < 1:
        raise UsageError("bound_share must lie in (0, 1)", bound_share, "pass e.g. bound_share=0.25")
    low, high = float(bounds[0]), float(bounds[1])
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise InvalidBounds("bounds must be finite with L < U", bounds, "declare the public domain, e.g. (0, 1e6)")
    data = np.asarray(values, dtype=np.float64).ravel()
    if data.size == 0:
        raise InvalidData("the mean needs n >= 1 (n is public under replace adjacency)", 0, "pass the records")
    eps_bound, eps_mean = eps * share, eps * (1 - share)
    top = em_quantile(data, q=clip_quantile, bounds=(low, high), epsilon=eps_bound).value
    top = max(float(top), low + (high - low) * 2.0**-30)  # a degenerate range would divide by zero
    total = exact_clipped_sum(data, Bounds(low, top)).value
    n = data.size
    mean = laplace(float(total) / n, sensitivity=Fraction(top - low) / n, epsilon=eps_mean)
    value = min(max(float(mean.value), low), top)
    return MechanismResult(
        value=value,
        loss=PureDP(eps),
        accuracy=None,
        mechanism="clipped_mean/private-bound@1",
        guarantee=(
            f"{PureDP(eps)}-DP under replace of one record with n public: an ε₁-DP EM quantile chooses the clip "
            "bound, then a float-safe Laplace mean on the clipped range (basic adaptive composition, DR Thm 3.16)"
        ),
        details={
            "epsilon_bound": eps_bound,
            "epsilon_mean": eps_mean,
            "clip_quantile": str(to_fraction(clip_quantile, name="clip_quantile")),
            "clip_bound": float(top),  # the output of the ε₁-DP step: public
            "accuracy": "depends on the (released) clip bound c: Laplace scale (c - L)/(n ε₂), plus clipping bias",
        },
    )
