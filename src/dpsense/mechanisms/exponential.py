"""The exponential mechanism and report-noisy-max with Gumbel noise, both sampled exactly.

**Exponential mechanism** (McSherry-Talwar, FOCS 2007; Dwork-Roth 2014, Thm 3.10). Given public
candidates r_1..r_m and a utility u(x, r) whose sensitivity is
``Delta = max_r max_{x ~ x'} |u(x, r) - u(x', r)|``, output r_i with probability proportional to
``exp(epsilon u(x, r_i) / (2 Delta))``. This is epsilon-DP under the adjacency for which Delta was
computed (add/remove or replace of one privacy unit): the numerator moves by a factor of at most
``e^(epsilon/2)`` and the normaliser by at most ``e^(epsilon/2)``. It is also epsilon-bounded-range,
hence (epsilon^2/8)-zCDP (Cesar-Rogers 2021); ``loss`` reports the pure-DP guarantee.

**Monotone utilities** (``monotone=True``; McSherry-Talwar 2007, noted after DR Thm 3.10). If for
every pair of adjacent datasets the utilities move in one direction only -- ``u(x', r) - u(x, r)``
lies in ``[0, Delta]`` for all r, or in ``[-Delta, 0]`` for all r -- then
``exp(epsilon u / Delta)`` is already epsilon-DP: the numerator ratio and the normaliser ratio can no
longer both be adverse. Proof: if ``u(x', .) >= u(x, .)``, then
``P[r | x] / P[r | x'] = exp(epsilon (u(x,r) - u(x',r)) / Delta) * Z(x') / Z(x) <= 1 * e^epsilon``
and ``P[r | x'] / P[r | x] <= e^epsilon * 1``; the other direction is symmetric. Example: counts of
disjoint categories under add/remove adjacency (adding a person raises some counts, lowers none). It
does NOT hold for counts under replace adjacency (one count rises, another falls). The caller asserts
monotonicity; dpsense cannot check it.

**Report-noisy-max with Gumbel noise** returns ``argmax_i (epsilon u_i / (2 Delta) + G_i)`` with i.i.d.
standard Gumbel ``G_i``. By the Gumbel-max trick (Gumbel 1954; see also Durfee-Rogers 2019,
"Practical differentially private top-k selection") this argmax has exactly the exponential
mechanism's distribution, so ``report_noisy_max`` samples it with the same exact sampler instead of
adding floating-point Gumbel noise. Report-noisy-max with *exponential* noise is a different
mechanism: it is identical to permute-and-flip (McKenna-Sheldon 2020; Ding-Kifer-Saghaian-Steinke-
Wang-Xiao-Zhang 2021), whose distribution differs from the exponential mechanism's. It is not
implemented here.

Sampling: utilities are exact integers or rationals; with a common denominator D the weights are
``exp(-rate * e_i)`` with integer ``e_i = D (u_max - u_i)`` and exact ``rate = epsilon / (2 Delta D)``
(or ``epsilon / (Delta D)`` when monotone), sampled exactly by ``dpsense.noise.categorical``. Time
depends on the data only through m, except for the sampler's rare exact fallback (see there).

Utility guarantee (DR Thm 3.11, public): with probability at least 1 - beta the chosen candidate's
utility is at least ``max_r u(x, r) - (c Delta / epsilon) (ln m + ln(1/beta))``, c = 2 (c = 1 when
monotone). It is reported in ``details``; ``accuracy`` is ``None`` because the output is a choice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from math import lcm
from numbers import Rational
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpsense.core.errors import InvalidData
from dpsense.core.numbers import NumberLike, widen
from dpsense.core.privacy_loss import PureDP, check_epsilon
from dpsense.mechanisms._validate import check_sensitivity
from dpsense.mechanisms.result import MechanismResult
from dpsense.noise.categorical import CategoricalSampler

I64 = NDArray[np.int64]

#: Confidence of the utility-shortfall bound reported in ``details``.
REPORTED_CONFIDENCE = 0.95
_INT64_LIMIT = 1 << 63


def _gaps(numerators: list[int], den: int) -> tuple[I64, int]:
    """``max - u_i`` for Python-int numerators, checked against the int64 range."""
    top = max(numerators)
    gaps = [top - v for v in numerators]
    if max(gaps) >= _INT64_LIMIT:
        raise _too_wide(max(gaps))
    return np.asarray(gaps, dtype=np.int64), den


def _too_wide(width: int) -> InvalidData:
    return InvalidData(
        "utility differences times their common denominator must stay below 2^63",
        f"{width.bit_length()} bits",
        "rescale the utilities (and their sensitivity) to smaller integers",
    )


def _utility_gaps(utilities: ArrayLike | Sequence[int | Fraction]) -> tuple[I64, int]:
    """Integers ``D (u_max - u_i) >= 0`` and the common denominator D of the utilities."""
    array = np.asarray(utilities)
    if array.ndim != 1 or array.size == 0:
        raise InvalidData(
            "utilities must be a non-empty 1-D sequence", f"shape {array.shape}", "pass one per candidate"
        )
    if array.dtype.kind == "f":
        if not bool(np.all(np.isfinite(array))) or not bool(np.all(array == np.floor(array))):
            raise InvalidData(
                "float utilities must be finite whole numbers",
                "a non-integral or non-finite utility",
                "scale utilities to integers, or pass Fractions for exact rationals",
            )
        if float(np.abs(array).max()) >= 2.0**53:  # beyond 2^53, subtract exactly in Python ints
            return _gaps([int(v) for v in array.tolist()], 1)
        array = array.astype(np.int64)
    if array.dtype.kind in "iu":
        top, bottom = int(array.max()), int(array.min())
        if top - bottom >= _INT64_LIMIT:
            raise _too_wide(top - bottom)
        if array.dtype.kind == "u":
            return (np.uint64(top) - array.astype(np.uint64)).astype(np.int64), 1
        return np.int64(top) - array.astype(np.int64), 1  # no overflow: top - bottom < 2^63
    values: list[Fraction] = []
    for v in array.tolist():
        if isinstance(v, bool) or not isinstance(v, (int, Rational)):
            raise InvalidData(
                "utilities must be integers or Fractions", type(v).__name__, "pass ints, Fractions or an int array"
            )
        values.append(Fraction(int(v.numerator), int(v.denominator)))
    den = lcm(*(v.denominator for v in values))
    return _gaps([int(v * den) for v in values], den)


def em_weights(
    utilities: ArrayLike | Sequence[int | Fraction], *, epsilon: Fraction, sensitivity: Fraction, monotone: bool
) -> tuple[I64, Fraction]:
    """Integer exponents ``e_i >= 0`` and the exact rate with P(i) proportional to ``exp(-rate e_i)``.

    ``rate * e_i = epsilon (u_max - u_i) / (c Delta)`` with c = 2, or c = 1 when ``monotone``.
    """
    gaps, den = _utility_gaps(utilities)
    factor = 1 if monotone else 2
    return gaps, epsilon / (factor * sensitivity * den)


def _shortfall_bound(m: int, epsilon: Fraction, sensitivity: Fraction, monotone: bool) -> float:
    beta = 1.0 - REPORTED_CONFIDENCE
    c = 1 if monotone else 2
    return widen(c * float(sensitivity / epsilon) * (math.log(m) + math.log(1.0 / beta)))


def exponential_mechanism(
    utilities: ArrayLike | Sequence[int | Fraction],
    *,
    epsilon: NumberLike,
    sensitivity: NumberLike,
    candidates: Sequence[Any] | None = None,
    monotone: bool = False,
) -> MechanismResult:
    """Choose a candidate with probability proportional to ``exp(epsilon u / (2 Delta))``, exactly.

    Guarantee: epsilon-DP under the adjacency for which ``sensitivity`` bounds the change of every
    candidate's utility (McSherry-Talwar 2007; DR Thm 3.10). With ``monotone=True`` the weights are
    ``exp(epsilon u / Delta)``, epsilon-DP only if every adjacent pair moves all utilities in one
    direction (see the module docstring).

    Args:
        utilities: one utility per candidate: integers (int array, whole floats) or Fractions.
        epsilon: the privacy loss, > 0 (``0.1`` means exactly 1/10).
        sensitivity: Delta of the utility, > 0, in the utility's units.
        candidates: public candidate labels (same length); the default labels are the indices.
        monotone: assert that utilities are monotone in the data (halves the noise).

    Returns:
        A ``MechanismResult`` whose ``value`` is the chosen candidate, ``loss`` is ``PureDP(epsilon)``,
        ``accuracy`` is None and ``details`` holds the index and the DR Thm 3.11 shortfall bound.

    Raises:
        InvalidPrivacyParameter: epsilon not > 0. InvalidSensitivity: Delta not > 0.
        InvalidData: empty or non-integral utilities, or candidates of another length.

    """
    eps = check_epsilon(epsilon)
    delta_u = check_sensitivity(sensitivity)
    exponents, rate = em_weights(utilities, epsilon=eps, sensitivity=delta_u, monotone=monotone)
    m = exponents.size
    if candidates is not None and len(candidates) != m:
        raise InvalidData("candidates and utilities must have the same length", (len(candidates), m), "pair them 1:1")
    index = int(CategoricalSampler.build(np.ones(m), exponents, rate).draw(1)[0])
    bound = _shortfall_bound(m, eps, delta_u, monotone)
    return MechanismResult(
        value=index if candidates is None else candidates[index],
        loss=PureDP(eps),
        accuracy=None,
        mechanism="exponential/exact@1",
        guarantee=(
            f"{PureDP(eps)}-DP under the adjacency for which the utility's sensitivity is {delta_u} "
            f"(exponential mechanism{', monotone utility' if monotone else ''}: McSherry-Talwar 2007, DR Thm 3.10)"
        ),
        details={
            "index": index,
            "candidates": m,
            "weights": f"exp(epsilon*u/({1 if monotone else 2}*sensitivity))",
            "utility_shortfall_bound": bound,
            "utility_shortfall_confidence": REPORTED_CONFIDENCE,
            "utility_shortfall_statement": (
                "with the stated confidence, u(chosen) >= max_r u(r) - bound (DR Thm 3.11, public parameters only)"
            ),
            "sampler": "exact categorical (dpsense.noise.categorical)",
        },
    )


def report_noisy_max(
    scores: ArrayLike | Sequence[int | Fraction],
    *,
    epsilon: NumberLike,
    sensitivity: NumberLike,
    monotone: bool = False,
) -> MechanismResult:
    """Report-noisy-max with Gumbel noise of scale ``2 Delta / epsilon``: the index of the noisy maximum.

    By the Gumbel-max trick its output distribution equals the exponential mechanism's with the
    scores as utilities, so it is sampled exactly with the same sampler (no float noise is added).
    Guarantee: epsilon-DP under the adjacency for which ``sensitivity`` bounds every score's change
    (DR Thm 3.10 via the equivalence). ``monotone=True`` uses scale ``Delta / epsilon`` under the
    monotonicity condition of the module docstring. Not to be confused with report-noisy-max with
    exponential noise (= permute-and-flip, Ding et al. 2021), a different distribution.

    Returns:
        A ``MechanismResult`` whose ``value`` is the chosen index (an ``int``).

    """
    result = exponential_mechanism(scores, epsilon=epsilon, sensitivity=sensitivity, monotone=monotone)
    return MechanismResult(
        value=result.value,
        loss=result.loss,
        accuracy=None,
        mechanism="report_noisy_max/gumbel-exact@1",
        guarantee=result.guarantee.replace(
            "exponential mechanism", "report-noisy-max, Gumbel noise = exponential mechanism"
        ),
        details=result.details,
    )
