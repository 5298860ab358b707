"""The mechanism calls of a release step and the public accuracy of their outputs (no data access here).

Shared by the statistics' run code (``dpsense.statistics``) and the release runner's data-dependent
machinery (``release._data_dependent``).

``additive_noise`` runs a plan step's global-sensitivity mechanism on unnoised aggregates;
``order_release`` an order statistic's mechanism; the ``*_error`` helpers turn released values and
public noise scales into the error bounds a ``Release`` shows (post-processing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpsense import mechanisms as mech
from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import InternalError, InvalidPrivacyParameter
from dpsense.core.numbers import DELTA_SLACK, inward_interval
from dpsense.core.privacy_loss import ApproxDP, PrivacyLoss, PureDP
from dpsense.core.steps import DecimalStep
from dpsense.engine import ClippedSum, clipped_sum
from dpsense.mechanisms import MechanismResult
from dpsense.mechanisms.quantile import DEFAULT_RESOLUTION
from dpsense.mechanisms.result import Accuracy
from dpsense.noise import exact
from dpsense.query import Family, Mechanism, PlanStep
from dpsense.sensitivity import Sqrt

#: A bound on rows per unit large enough to keep every row (for distinct-unit counts).
ALL_ROWS = (1 << 31) - 1
#: Confidence of the reported error bounds (each released value's |error| stays below it w.p. >= 0.95).
CONFIDENCE = 0.95
#: Fixed-point sums keep 2**40 grid steps below the largest bound's magnitude.
_SUM_GRID_BITS = 40


@dataclass
class Output:
    """One released statistic: a value per group (or one), its public error bound and how it was made."""

    name: str
    values: list[Any]
    error: list[float | None]
    accuracy_note: str
    post_processing: list[str] = field(default_factory=list)
    #: A public bound on each value's bias beside its noise (the adaptive clip's clipping bias), at the
    #: same confidence as ``error``; ``None`` for the statistics that have no such column.
    bias: list[float | None] | None = None


def _sensitivity(step: PlanStep) -> Fraction:
    sens = step.sensitivity
    if sens is None:
        raise InternalError(f"step {step.output!r} has no global sensitivity")
    if isinstance(sens, Sqrt):
        return sens.upper()  # an upper bound: the noise is never understated
    return sens


def additive_noise(step: PlanStep, values: NDArray[Any], *, confidence: float = CONFIDENCE) -> MechanismResult:
    """The global-sensitivity mechanism of ``step`` on ``values`` (a vector over groups)."""
    sens = _sensitivity(step)
    eps = step.loss.epsilon
    if step.mechanism is Mechanism.LAPLACE:
        result = mech.laplace(values, sensitivity=sens, epsilon=eps, confidence=confidence)
    elif step.mechanism is Mechanism.GAUSSIAN:
        if not isinstance(step.loss, ApproxDP):
            raise InternalError("a Gaussian step without δ")
        result = mech.gaussian(values, sensitivity=sens, epsilon=eps, delta=step.loss.delta, confidence=confidence)
    elif step.mechanism is Mechanism.GEOMETRIC:
        result = mech.geometric(np.rint(values).astype(np.int64), sensitivity=sens, epsilon=eps, confidence=confidence)
    else:
        raise InternalError(f"{step.mechanism!r} is not a global-sensitivity mechanism")
    check_result_loss(result, step.loss, step)
    return result


def planned_accuracy(step: PlanStep, dimension: int = 1, *, confidence: float = CONFIDENCE) -> Accuracy | None:
    """What ``additive_noise`` will state for ``step`` on ``dimension`` values, before any data (a forecast).

    ``None`` for a step that is not a global-sensitivity mechanism (its error depends on the data).
    """
    if step.sensitivity is None or step.mechanism not in (Mechanism.LAPLACE, Mechanism.GAUSSIAN, Mechanism.GEOMETRIC):
        return None
    sens, eps = _sensitivity(step), step.loss.epsilon
    if step.mechanism is Mechanism.LAPLACE:
        return mech.laplace_accuracy(sensitivity=sens, epsilon=eps, dimension=dimension, confidence=confidence)
    if step.mechanism is Mechanism.GEOMETRIC:
        return mech.geometric_accuracy(sensitivity=sens, epsilon=eps, confidence=confidence)
    delta = step.loss.delta if isinstance(step.loss, ApproxDP) else 0
    return mech.gaussian_accuracy(
        sensitivity=sens, epsilon=eps, delta=delta, dimension=dimension, confidence=confidence
    )


def joint_release(
    step: PlanStep,
    x: NDArray[np.float64],
    qs: tuple[Fraction, ...],
    bounds: tuple[float, float],
    eps: Fraction,
    adj: Adjacency,
    *,
    decimal_points: bool = False,
    recording_step: DecimalStep | None = None,
) -> list[float]:
    """Several quantiles of the values x of one group by recursive splitting (total: no record, uniform cells).

    Under add/remove each split's EM runs at ε/d with Δu = max(q', 1 − q'); under replace at ε/(2d)
    (``mechanisms.recursive_quantiles``), so a record added, removed or replaced costs ε for the group.
    """
    result = mech.recursive_quantiles(
        x,
        qs=list(qs),
        bounds=bounds,
        epsilon=eps,
        adjacency=adj if adj is Adjacency.ADD_REMOVE else None,
        decimal_points=decimal_points,
        step=recording_step,
    )
    check_result_loss(result, PureDP(eps), step)
    return [float(v) for v in np.asarray(result.value, dtype=np.float64)]


def order_releases(
    step: PlanStep,
    groups: Sequence[NDArray[np.float64]],
    q: Fraction,
    bounds: tuple[float, float],
    eps: Fraction,
    adj: Adjacency,
    *,
    integers: bool = False,
    decimal_points: bool = False,
    recording_step: DecimalStep | None = None,
) -> list[float]:
    """``order_release`` for each group in order; the EM quantile's groups are drawn together (same law, same draws)."""
    if step.mechanism.family is not Family.EXPONENTIAL:
        options: dict[str, Any] = {"integers": integers, "decimal_points": decimal_points}
        return [order_release(step, x, q, bounds, eps, adj, **options, recording_step=recording_step) for x in groups]
    # Δu = max(q, 1 − q) when neighbours add or remove records of a group; under replace a moved unit
    # also adds to or removes from a group, and Δu = 1 covers both (docs/math/exponential-mechanism.md §8.2)
    results = mech.em_quantile_groups(
        groups,
        q=q,
        bounds=bounds,
        epsilon=eps,
        adjacency=adj if adj is Adjacency.ADD_REMOVE else None,
        integers=integers,
        decimal_points=decimal_points,
        step=recording_step,
    )
    for result in results:
        check_result_loss(result, PureDP(eps), step)
    return [float(result.value) for result in results]


def order_release(
    step: PlanStep,
    x: NDArray[np.float64],
    q: Fraction,
    bounds: tuple[float, float],
    eps: Fraction,
    adj: Adjacency,
    *,
    integers: bool = False,
    decimal_points: bool = False,
    recording_step: DecimalStep | None = None,
) -> float:
    """The order statistic's mechanism on the values x of one group (total: no record is a uniform cell).

    The EM quantile and inverse sensitivity define their output on no records themselves (a uniform
    public cell of the default resolution, the same law as ``uniform_cell``); the smooth quantile
    needs n >= 1, and on an empty group under replace every neighbour is empty too, so its fixed
    uniform cell is private.
    """
    if step.mechanism.family is Family.EXPONENTIAL:  # the EM quantile of one group (``order_releases``)
        options: dict[str, Any] = {"integers": integers, "decimal_points": decimal_points}
        return order_releases(step, [x], q, bounds, eps, adj, **options, recording_step=recording_step)[0]
    if step.mechanism.family is Family.INVERSE_SENSITIVITY:
        rank = max(1, math.ceil(q * x.size))  # shifts by at most 1 between neighbours: utility stays 1-Lipschitz
        result = mech.inverse_sensitivity_order_statistic(x, rank=rank, bounds=bounds, epsilon=eps)
    elif x.size == 0:
        return uniform_cell(bounds)
    else:  # smooth_median / smooth_quantile, replace adjacency: n = len(x) is public
        result = mech.smooth_quantile(x, q=float(q), bounds=bounds, epsilon=eps, adjacency=adj)
    check_result_loss(result, PureDP(eps), step)
    return float(result.value)


def uniform_cell(bounds: tuple[float, float]) -> float:
    """The midpoint of a uniform public cell of [L, U]: the law of ``em_quantile`` on no records (smooth steps)."""
    low, high = bounds
    cell = int(exact.uniform_below(np.array([DEFAULT_RESOLUTION], dtype=np.int64))[0])
    fraction = (cell + 0.5) / DEFAULT_RESOLUTION
    return float(min(max(2.0 * (low * 0.5 + fraction * (high * 0.5 - low * 0.5)), low), high))


def check_result_loss(
    result: MechanismResult | mech.Refusal | mech.ApproxBounds, expected: PrivacyLoss, step: PlanStep
) -> None:
    if loss_pair(result.loss) != loss_pair(expected):
        raise InternalError(f"step {step.output!r} ran at {result.loss}, not the planned {expected}")


def loss_pair(loss: PrivacyLoss) -> tuple[Fraction, Fraction]:
    """(ε, δ) of a pure or approximate DP loss, for exact comparisons (a zCDP loss is an internal error)."""
    if isinstance(loss, ApproxDP):
        return (loss.epsilon, loss.delta)
    if isinstance(loss, PureDP):
        return (loss.epsilon, Fraction(0))
    raise InternalError("a zCDP loss in a (ε, δ) release")


def group_privacy(eps: Fraction, rows: int) -> PrivacyLoss:
    """ε per record over a unit's ``rows`` records (Dwork-Roth Thm 2.2)."""
    return PureDP(eps * rows)


def grid_exponent_for(low: Fraction, high: Fraction) -> int:
    magnitude = max(abs(low), abs(high))
    top = 0 if magnitude == 0 else math.floor(math.log2(magnitude))
    return top - _SUM_GRID_BITS


def bounded_sum(column: str, low: Fraction, high: Fraction, name: str | None = None) -> ClippedSum:
    """The exact clipped sum a release adds for ``column`` on [low, high] (its grid from the bounds).

    The one spelling used by the executor's sum, mean and variance steps and by registration, which
    offers the declared bounds' sums to the unit index: equal specs let an engine read stored units.
    The clip is the inward double interval of [low, high] (``inward_interval``), never the nearest.
    """
    lo, hi = inward_interval(low, high)  # clipped values stay inside the [low, high] of the sensitivity
    return clipped_sum(column, low=lo, high=hi, grid_exponent=grid_exponent_for(low, high), name=name)


def error_bounds(result: MechanismResult, size: int) -> list[float | None]:
    if result.accuracy is None:
        return [None] * size
    return [float(result.accuracy.error_bound)] * size


def accuracy_note(result: MechanismResult) -> str:
    if result.accuracy is None:
        return result.mechanism
    accuracy = result.accuracy
    bound = float(accuracy.error_bound)
    return f"{accuracy.noise}: |error| <= {bound:.6g} with probability {accuracy.confidence:g} per value"


def variance_error(
    noisy_sum: MechanismResult, noisy_squares: MechanismResult, noisy_count: MechanismResult, count: float, half: float
) -> float:
    top = half * half
    accuracies = [r.accuracy for r in (noisy_sum, noisy_squares, noisy_count)]
    bounds = [float(a.error_bound) for a in accuracies if a is not None]
    if len(bounds) != len(accuracies):
        return top
    b1, b2, bn = bounds
    return float(min((b2 + top * bn + 2 * half * (b1 + half * bn)) / count, top))


def mean_error(noisy_sum: MechanismResult, noisy_count: MechanismResult, count: float, half: float) -> float:
    if noisy_sum.accuracy is None or noisy_count.accuracy is None or count < 1:
        return 2 * half
    bound = (noisy_sum.accuracy.error_bound + half * noisy_count.accuracy.error_bound) / count
    return float(min(bound, 2 * half))


#: The largest exponent math.exp takes without overflow (e^709.78 is the largest double).
_MAX_EXP = 709.0


def ptr_record_budget(step: PlanStep) -> tuple[Fraction, Fraction]:
    """Per-record (ε_r, δ_r) of a PTR step whose unit stands for ``step.record_cost`` record changes.

    Group privacy for approximate DP: an (ε_r, δ_r)-DP mechanism is (k ε_r, k e^((k-1) ε_r) δ_r)-DP for
    datasets k records apart (Vadhan 2017, "The complexity of differential privacy", Lemma 2.2). With
    k = the step's record cost (C, or 2C under replace: a unit's rows removed and others added, in
    the same or in other public groups; groups with k_g changes, sum k_g <= k, add up to at most
    (k ε_r, k e^((k-1) ε_r) δ_r) by basic composition), ε_r = ε / k and δ_r the largest double with
    k e^((k-1) ε_r) δ_r <= δ (checked with a margin against rounding), the unit's loss is at most the
    step's (ε, δ), which is charged.
    """
    if not isinstance(step.loss, ApproxDP) or step.max_rows_per_unit is None:
        raise InternalError(f"PTR step {step.output!r} without δ or a contribution bound")
    if step.loss.delta == 0:
        raise InternalError(f"PTR step {step.output!r} with δ = 0")
    k = step.unit_cost
    eps_r = step.loss.epsilon / k
    exponent = (k - 1) * float(eps_r)
    factor = k * math.exp(min(exponent, _MAX_EXP)) * (1 + DELTA_SLACK)
    delta_r = Fraction(0)  # when e^((k-1) ε_r) is beyond a double, no δ_r is
    if exponent <= _MAX_EXP and math.isfinite(factor):
        delta_r = Fraction(float(step.loss.delta) / factor)
        while delta_r * Fraction(factor) > step.loss.delta:  # never above δ after rounding
            delta_r = Fraction(math.nextafter(float(delta_r), 0.0))
    if delta_r == 0:  # δ_r below the smallest double, or no factor
        raise InvalidPrivacyParameter(
            f"Propose-Test-Release of {step.output!r}: group privacy over {k} record changes leaves no δ per "
            f"record at this ε (k e^((k-1) ε / k) δ_r <= δ needs δ_r below the smallest double)",
            {"output": step.output, "epsilon": float(step.loss.epsilon), "record changes": k},
            "ask for a smaller epsilon (PTR's δ per record shrinks as e^(-ε)), or omit mechanism= for the pure "
            "ε-DP default",
        )
    return eps_r, delta_r


def ptr_note(result: MechanismResult | mech.Refusal) -> str:
    """The public account of a PTR answer (a refusal is an answer: it was charged)."""
    if isinstance(result, mech.Refusal):
        return f"Propose-Test-Release refused: {result.reason}; the refusal is the released answer"
    return "Propose-Test-Release passed its test; released with Laplace noise scaled to the proposed bound"
