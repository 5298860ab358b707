"""Propose-Test-Release audit laws: settings, statistics, adversarial pairs and the naive-test controls.

The building blocks of ``dpsense.audit.smooth_scenarios`` (see its docstring for the method).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpsense.audit._types import Sampler
from dpsense.audit.smooth_laws import (
    F64,
    Points,
    pair_sampler,
)
from dpsense.mechanisms.laplace import laplace_plan
from dpsense.mechanisms.ptr import Refusal, propose_test_release, ptr_distance_cap
from dpsense.mechanisms.ptr_statistics import ptr_min_distance, ptr_order_statistic, ptr_trimmed_mean
from dpsense.mechanisms.result import MechanismResult
from dpsense.noise import exact, grid
from dpsense.sensitivity.closest_pair import (
    closest_pair_family,
    closest_pair_global_sensitivity,
    min_pairwise_distance,
)
from dpsense.sensitivity.order_statistics import (
    OrderStatisticFamily,
    median_rank,
)
from dpsense.sensitivity.smooth import MonotoneFamily, distance_to_instability
from dpsense.sensitivity.trimmed_mean import (
    TrimmedMeanFamily,
    trimmed_mean,
)

# --------------------------------------------------------------------------------------------------
# Propose-Test-Release.


@dataclass(frozen=True)
class PtrSetting:
    """The public parameters of one PTR release: proposed bound b, ε_test, ε_release, δ."""

    proposed_bound: float = 1.0
    epsilon_test: float = 1.0
    epsilon_release: float = 1.0
    delta: float = 0.05

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``propose_test_release`` and the ``ptr_*`` functions."""
        return {
            "proposed_bound": self.proposed_bound,
            "epsilon_test": self.epsilon_test,
            "epsilon_release": self.epsilon_release,
            "delta": self.delta,
        }

    @property
    def cap(self) -> int:
        """The public distance cap of the test."""
        return ptr_distance_cap(self.epsilon_test, self.delta)


#: b = 1, ε_test = ε_release = 1, δ = 0.05 (large, so that δ-events are observable): claim (2, 0.05).
PTR = PtrSetting()


def laplace_draws(value: float, *, sensitivity: float, epsilon: float, n: int) -> F64:
    """``n`` independent outputs of the scalar ``laplace(value, sensitivity=..., epsilon=...)``.

    The scalar mechanism snaps the value to the grid 2^k of ``laplace_plan`` (dimension 1) and adds
    exact discrete Laplace noise of integer scale t (served from a pool filled by
    ``exact.discrete_laplace``); this draws the same noise for n values at once. (Calling ``laplace``
    on an array instead would widen the scale for the dimension.)
    """
    k, t = laplace_plan(sensitivity=sensitivity, epsilon=epsilon)
    return np.asarray(grid.unsnap(grid.snap(np.full(n, value), k), exact.discrete_laplace(Fraction(t), n), k))


def ptr_draws(
    value: float, distance: int, setting: PtrSetting, clamp: tuple[float, float] | None, n: int, *, threshold: float
) -> F64:
    """``n`` outputs of ``propose_test_release(value, distance, ...)`` (NaN = refusal), vectorised.

    As in the product: noisy = distance + Lap(1/ε_test) (the Laplace mechanism); refuse unless
    noisy >= threshold; otherwise value + Lap(b/ε_release), clamped.
    """
    noisy = laplace_draws(float(distance), sensitivity=1.0, epsilon=setting.epsilon_test, n=n)
    out = laplace_draws(value, sensitivity=setting.proposed_bound, epsilon=setting.epsilon_release, n=n)
    if clamp is not None:
        out = np.clip(out, clamp[0], clamp[1])
    return np.asarray(np.where(noisy >= threshold, out, math.nan), dtype=np.float64)


def ptr_threshold(setting: PtrSetting) -> float:
    """The exact public threshold of the PTR test, read from the details of one (refused or not) answer."""
    answer = propose_test_release(0.0, 0, **setting.kwargs())
    return float(answer.details["threshold"])


@dataclass(frozen=True)
class PtrStatistic:
    """A statistic with a PTR release: value, the product's monotone family, clamp, public function."""

    name: str
    value: Callable[[Any], float]
    family: Callable[[Any], MonotoneFamily]
    clamp: Callable[[Any], tuple[float, float]]
    release: Callable[[Any, PtrSetting], MechanismResult | Refusal]

    def distance(self, data: Any, setting: PtrSetting) -> int:
        """gamma_L(x), exactly as ``ptr_with_family`` computes it (b is a float here)."""
        return distance_to_instability(self.family(data), bound=setting.proposed_bound, cap=setting.cap)


def ptr_median_statistic(bounds: tuple[float, float]) -> PtrStatistic:
    """``ptr_order_statistic`` at the median rank, replace adjacency."""

    def ordered(x: Sequence[float]) -> F64:
        return np.sort(np.clip(np.asarray(x, dtype=np.float64), *bounds))

    return PtrStatistic(
        "ptr_order_statistic",
        value=lambda x: float(ordered(x)[median_rank(len(x)) - 1]),
        family=lambda x: OrderStatisticFamily(ordered(x), median_rank(len(x)), bounds),
        clamp=lambda x: bounds,
        release=lambda x, st: ptr_order_statistic(x, bounds=bounds, adjacency="replace", **st.kwargs()),
    )


def ptr_trimmed_mean_statistic(trim: int, bounds: tuple[float, float]) -> PtrStatistic:
    """``ptr_trimmed_mean``, replace adjacency."""

    def ordered(x: Sequence[float]) -> F64:
        return np.sort(np.clip(np.asarray(x, dtype=np.float64), *bounds))

    return PtrStatistic(
        "ptr_trimmed_mean",
        value=lambda x: trimmed_mean(ordered(x), trim, bounds),
        family=lambda x: TrimmedMeanFamily(ordered(x), trim, bounds),
        clamp=lambda x: bounds,
        release=lambda x, st: ptr_trimmed_mean(x, trim=trim, bounds=bounds, adjacency="replace", **st.kwargs()),
    )


def ptr_min_distance_statistic(box: tuple[float, float]) -> PtrStatistic:
    """``ptr_min_distance``, replace adjacency (exact deletion values in 1-D, W otherwise)."""

    def points(x: Points) -> F64:
        return np.asarray(x, dtype=np.float64)

    def cap(x: Points) -> float:
        return closest_pair_global_sensitivity(
            adjacency="replace", dim=points(x).shape[1], low=box[0], high=box[1], n=len(x)
        )

    return PtrStatistic(
        "ptr_min_distance",
        value=lambda x: min(cap(x), min_pairwise_distance(points(x))),
        family=lambda x: closest_pair_family(points(x), G=cap(x), variant="auto"),
        clamp=lambda x: (0.0, cap(x)),
        release=lambda x, st: ptr_min_distance(points(x), box=box, adjacency="replace", **st.kwargs()),
    )


PTR_BOUNDS = (0.0, 20.0)
#: PTR median (n = 7, [0, 20], b = 1): x is stable (distance 1), x' unstable (distance 0), and the
#: median moves by exactly b, so the test costs ε_test and the release ε_release: the proof gives PURE
#: ε_test + ε_release on such a pair (one side stable), audited at δ = 0.
PTR_STABLE = (0.0, 0.0, 0.0, 0.0, 1.0, 20.0, 20.0)
PTR_UNSTABLE = (0.0, 0.0, 0.0, 1.0, 20.0, 20.0, 20.0)
#: Unstable as well (distance 0) with the median at 20: both sides pass only with probability <= δ,
#: and then release values 19 apart. Only δ separates them.
PTR_FAR = (0.0, 0.0, 1.0, 20.0, 20.0, 20.0, 20.0)
#: PTR 1-trimmed mean (n = 7, [0, 20], b = 1): x has LS = 1 and distance 1; replacing one 0 by 20
#: moves the mean by exactly b = 1 and makes LS(x') = 4 (distance 0).
PTR_TRIM_STABLE = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0)
PTR_TRIM_UNSTABLE = (0.0, 0.0, 0.0, 0.0, 0.0, 5.0, 20.0)
PTR_LINE_BOX = (0.0, 6.0)
#: PTR 1-D closest pair (n = 4 in [0, 6], G = 2, b = 1; exhaustive search on the half-grid): x has a
#: coincident pair but M_1(x) = 1 <= b (distance 1); moving one copy of 0 to 6 gives f = 1 = b and
#: M_1(x') = 2 > b (distance 0). The shift and the distance change are both maximal.
PTR_LINE_STABLE = ((0.0,), (0.0,), (1.0,), (2.0,))
PTR_LINE_UNSTABLE = ((0.0,), (1.0,), (2.0,), (6.0,))


def ptr_pair(stat: PtrStatistic, x: Any, y: Any, setting: PtrSetting = PTR) -> Sampler:
    """Outputs of the product's PTR on x and on y (vectorised: deterministic distance, product noise)."""

    def draw(data: Any, n: int) -> F64:
        distance = stat.distance(data, setting)
        return ptr_draws(stat.value(data), distance, setting, stat.clamp(data), n, threshold=ptr_threshold(setting))

    return pair_sampler(draw, x, y)


def ptr_end_to_end_pair(stat: PtrStatistic, x: Any, y: Any, setting: PtrSetting = PTR) -> Sampler:
    """Outputs of ``n`` calls of the public PTR function on x and on y (NaN = refusal)."""

    def draw(data: Any, n: int) -> F64:
        out = np.empty(n, dtype=np.float64)
        for i in range(n):
            answer = stat.release(data, setting)
            out[i] = math.nan if isinstance(answer, Refusal) else float(answer.value)
        return out

    return pair_sampler(draw, x, y)


def _lower_median(y: Sequence[float]) -> float:
    return float(sorted(y)[median_rank(len(y)) - 1])


def naive_removal_count(y: Sequence[float], bound: float) -> int:
    """The seed notes' PTR statistic: records whose REMOVAL moves the median by more than b (not DP)."""
    f = _lower_median(y)
    return sum(1 for i in range(len(y)) if abs(f - _lower_median([*y[:i], *y[i + 1 :]])) > bound)


#: docs/math/ptr.md §5.5 (ii): one change moves the naive count from 0 to 3 (b = 1).
NAIVE_X = (0.0, 0.0, 0.0, 2.0, 2.0)
NAIVE_Y = (0.0, 0.0, 2.0, 2.0, 2.0)


def control_naive_ptr(x: Sequence[float], y: Sequence[float], setting: PtrSetting = PTR) -> Sampler:
    """Control 4a: the seed notes' test, count + Lap(1/ε_test) <= 0.5 passes, with the product's noise."""

    def draw(data: Sequence[float], n: int) -> F64:
        count = float(naive_removal_count(data, setting.proposed_bound))
        noisy = laplace_draws(count, sensitivity=1.0, epsilon=setting.epsilon_test, n=n)
        out = laplace_draws(
            _lower_median(data), sensitivity=setting.proposed_bound, epsilon=setting.epsilon_release, n=n
        )
        return np.asarray(np.where(noisy <= 0.5, out, math.nan), dtype=np.float64)

    return pair_sampler(draw, x, y)


def control_half_threshold(stat: PtrStatistic, x: Any, y: Any, setting: PtrSetting = PTR) -> Sampler:
    """Control 4b: the product's valid distance and noise, but the threshold 0.5 instead of ln(1/(2δ))/ε."""

    def draw(data: Any, n: int) -> F64:
        return ptr_draws(stat.value(data), stat.distance(data, setting), setting, stat.clamp(data), n, threshold=0.5)

    return pair_sampler(draw, x, y)
