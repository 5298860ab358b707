"""Accuracy before spending: each statistic's expected error at a plan's ε, and the ε a target error needs.

Everything here is computed from the plan, that is from public facts (ε, δ, adjacency, declared
bounds and keys, contribution bounds): no data is read and nothing is charged. The bounds are the
ones a release states in its ``<name>_error95`` column, computed before the release by the same
functions (``mechanisms.laplace_accuracy`` and its kin; ``statistics._steps.planned_accuracy``):

- counts, sums, histograms and counts of units (global-sensitivity noise): ``|error| <= bound`` with
  probability 0.95 per value, a number;
- a mean with a private n: ``|error| <= (S + h N) / n`` with S and N the 97.5 % bounds of its noisy
  centred sum and count and h half the width of its bounds, so the forecast gives S and N, the bound at
  a few n, and the n below which the bound covers the whole range of the bounds (noise-dominated);
- a median or quantile by the exponential mechanism or inverse sensitivity: its rank accuracy, the note
  its release states (``_data_dependent.order_rank_note``: ε, adjacency and candidates are public);
- statistics calibrated to the data (smooth sensitivity, PTR): no number before the data is read; the
  forecast says so;
- an adaptive-clip mean or sum: no number before its clip is released (its noise is calibrated to the
  clip, and its bias column bounds the clipping bias computed from it); the forecast says so and
  states the public threshold τ and the rows m a bin outside the clip may hold
  (``statistics._adaptive.forecast_note``).

``epsilon_for`` inverts it: the least ε (to three significant digits, rounded up) at which every
named statistic's bound is at most its target, found by bisection over re-planned releases (the bound
decreases with ε). ``goal_check`` compares the forecast with the privacy policy's stated
``minimum_useful_accuracy`` where that text has the form "<counts|sums|means> within ±<number>".
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from dpsense.core.errors import UsageError
from dpsense.query import AggregateIR, AggregateKind, Plan, PlanStep, QueryIR, StepPart
from dpsense.release._data_dependent import order_rank_note
from dpsense.statistics import STATISTICS
from dpsense.statistics._adaptive import forecast_note
from dpsense.statistics._steps import CONFIDENCE, planned_accuracy

#: Group sizes at which a private-n mean's forecast is spelled out.
_MEAN_SIZES = (100, 1_000, 10_000)
#: The kinds whose single VALUE step is a global-sensitivity release of the statistic itself.
_ADDITIVE = frozenset({AggregateKind.COUNT, AggregateKind.COUNT_UNITS, AggregateKind.HISTOGRAM, AggregateKind.SUM})
_GOAL = re.compile(r"\b(counts?|sums?|means?)\b[^±]*?within\s*±\s*([0-9][0-9,]*(?:\.[0-9]+)?)", re.IGNORECASE)


@dataclass(frozen=True)
class ExpectedError:
    """One statistic's error forecast at the plan's ε (public facts only).

    Attributes:
        name: the analyst's output name.
        statistic: the statistic's kind (``"count"``, ``"mean"``, ...).
        bound: ``|error| <= bound`` with probability ``confidence`` per released value, in the
            statistic's units; ``None`` where no number follows from public facts alone.
        confidence: the probability of ``bound``.
        how: how the bound is made, or why there is none.
        noise_dominated_below: for a private-n mean, the group size n below which the bound exceeds
            the width of the public bounds (the value then says nothing); else ``None``.

    """

    name: str
    statistic: str
    bound: float | None
    confidence: float
    how: str
    noise_dominated_below: int | None = None

    def line(self) -> str:
        """One line for a person: ``'n' (count): |error| <= 29.96 with probability 0.95 per value``."""
        head = f"{self.name!r} ({self.statistic}): "
        if self.bound is None:
            return head + self.how
        return head + f"|error| <= {_number(self.bound)} with probability {self.confidence:g} per value ({self.how})"


@dataclass(frozen=True)
class Forecast:
    """The expected errors of a release at (ε, δ), before it is made, and the policy goal it misses."""

    epsilon: Fraction
    delta: Fraction
    expected: tuple[ExpectedError, ...]
    goal_misses: tuple[str, ...] = ()

    def text(self) -> str:
        """Lines for a person: the expected error of each statistic, then any policy goal missed."""
        head = f"Expected errors at ε = {_number(float(self.epsilon))}, δ = {float(self.delta):g} (no data read):"
        lines = [head, *(f"- {e.line()}" for e in self.expected)]
        lines += [f"Warning: {miss}" for miss in self.goal_misses]
        return "\n".join(lines)


def forecast(ir: QueryIR, plan: Plan, names: Sequence[tuple[str, str]]) -> list[ExpectedError]:
    """The expected error of each asked statistic (``names``: (analyst's name, label) pairs, in order)."""
    dimension = ir.public_groups
    by_label = {agg.name: agg for agg in ir.aggregates}
    out: list[ExpectedError] = []
    for name, label in names:
        agg = by_label[label]
        steps = [s for s in plan.steps if s.output == label]
        kind = agg.kind.value
        parts = {s.part: s for s in steps if s.part is not StepPart.KEYS}
        if dimension is None and any(s.mechanism.is_global for s in parts.values()):
            how = (
                "no number before the data is read: the groups are selected privately, and the noise's "
                "calibration depends on how many are kept; the release states its error"
            )
            out.append(ExpectedError(name, kind, None, CONFIDENCE, how))
            continue
        size = 1 if dimension is None else dimension
        if agg.kind in _ADDITIVE and set(parts) == {StepPart.VALUE}:
            accuracy = planned_accuracy(parts[StepPart.VALUE], size)
            if accuracy is not None:
                out.append(ExpectedError(name, kind, float(accuracy.error_bound), CONFIDENCE, accuracy.noise))
                continue
        if agg.kind is AggregateKind.HIERARCHICAL_COUNT and set(parts) == {StepPart.VALUE}:
            out.append(_census(name, agg, parts[StepPart.VALUE], size))
            continue
        if agg.kind is AggregateKind.MEAN and set(parts) == {StepPart.VALUE}:  # sum / public n
            accuracy = planned_accuracy(parts[StepPart.VALUE], size)
            if accuracy is not None:
                how = f"{accuracy.noise}, the sum over the public number of units"
                out.append(ExpectedError(name, kind, float(accuracy.error_bound), CONFIDENCE, how))
                continue
        if agg.kind in (AggregateKind.MEDIAN, AggregateKind.QUANTILE) and set(parts) == {StepPart.VALUE}:
            how = order_rank_note(agg, parts[StepPart.VALUE], plan.adjacency)
            out.append(ExpectedError(name, kind, None, CONFIDENCE, how))
            continue
        if StepPart.CLIP in parts:  # an adaptive mean or sum: its noise and its bias bound follow the released clip
            how = forecast_note(agg, parts[StepPart.CLIP], plan.adjacency)
            out.append(ExpectedError(name, kind, None, CONFIDENCE, how))
            continue
        if agg.kind is AggregateKind.MEAN and set(parts) == {StepPart.CENTERED_SUM, StepPart.COUNT}:
            out.append(_private_n_mean(name, agg.bounds[0], parts[StepPart.CENTERED_SUM], parts[StepPart.COUNT], size))
            continue
        out.append(
            ExpectedError(
                name,
                kind,
                None,
                CONFIDENCE,
                "no number before the data is read: its mechanism calibrates to the data "
                f"({', '.join(sorted({s.mechanism.value for s in steps}))}); the release states its error",
            )
        )
    return out


def _census(name: str, agg: AggregateIR, step: PlanStep, dimension: int) -> ExpectedError:
    """A census table: the raw noisy counts' bound per level (its ``_noisy_error95``), the largest as the bound."""
    levels = STATISTICS[agg.kind].noise_steps(agg, step)
    bounds = [planned_accuracy(s, dimension) for s in levels]
    if any(b is None for b in bounds):
        return ExpectedError(name, agg.kind.value, None, CONFIDENCE, "no number before the data is read")
    figures = [float(b.error_bound) for b in bounds if b is not None]
    per_level = ", ".join(f"{level} ±{_number(f)}" for level, f in zip(("total", *agg.columns), figures, strict=True))
    how = (
        f"the raw noisy counts per level: {per_level}; the consistent counts are their post-processing "
        "(no per-value bound; docs/census.md measures their error)"
    )
    return ExpectedError(name, agg.kind.value, max(figures), CONFIDENCE, how)


def _private_n_mean(
    name: str, bounds: tuple[Fraction, Fraction], total: PlanStep, count: PlanStep, dimension: int
) -> ExpectedError:
    beta = 1 - CONFIDENCE
    s_acc = planned_accuracy(total, dimension, confidence=1 - beta / 2)
    n_acc = planned_accuracy(count, dimension, confidence=1 - beta / 2)
    if s_acc is None or n_acc is None:
        return ExpectedError(name, "mean", None, CONFIDENCE, "no number before the data is read")
    low, high = float(bounds[0]), float(bounds[1])
    half = (high - low) / 2
    s_bound, n_bound = float(s_acc.error_bound), float(n_acc.error_bound)
    at = ", ".join(f"±{_number(min((s_bound + half * n_bound) / n, 2 * half))} at n = {n:,}" for n in _MEAN_SIZES)
    below = math.ceil((s_bound + half * n_bound) / (2 * half)) if half > 0 else None
    how = (
        f"depends on the group's size n: |error| <= ({_number(s_bound)} + {_number(half)} x {_number(n_bound)}) / n "
        f"with probability {CONFIDENCE:g}: {at}; noise-dominated (wider than the bounds) below n = {below:,}"
        if below is not None
        else "the bounds are a single point: the mean is exact"
    )
    return ExpectedError(name, "mean", None, CONFIDENCE, how, below)


def epsilon_for(
    targets: Mapping[str, float],
    forecast_at: Callable[[Fraction], Sequence[ExpectedError] | None],
    *,
    largest: Fraction,
) -> Fraction:
    """The least ε (three significant digits, rounded up) at which each named bound is <= its target.

    ``forecast_at(ε)`` re-plans the release at ε (public facts only; ``None`` where the plan is refused
    at that ε, e.g. a noise scale too large to sample). Refused: a name the query does not release, a
    statistic without a number before the data, a target that even ``largest`` misses.
    """
    if not targets:
        raise UsageError("name the statistics and the errors to reach", targets, "pass error={'n': 50}")
    for name, target in targets.items():
        if not (
            isinstance(target, int | float) and not isinstance(target, bool) and math.isfinite(target) and target > 0
        ):
            raise UsageError("a target error is a positive number", {name: target}, "e.g. error={'n': 50}")

    def met(epsilon: Fraction) -> bool:
        planned = forecast_at(epsilon)
        if planned is None:
            return False
        found = {e.name: e for e in planned}
        for name, target in targets.items():
            if name not in found:
                raise UsageError(
                    "the query releases no statistic of that name", name, f"use one of: {', '.join(found)}"
                )
            if found[name].bound is None:
                raise UsageError("this statistic's error has no number before the data is read", name, found[name].how)
            bound = found[name].bound
            if bound is not None and bound > target:
                return False
        return True

    if not met(largest):
        best = {e.name: e.bound for e in forecast_at(largest) or () if e.name in targets}
        raise UsageError(
            "no ε up to the per-release cap reaches these errors",
            {"targets": dict(targets), f"at ε = {_number(float(largest))}": best},
            "accept larger errors, or release fewer statistics (each shares the ε)",
        )
    low, high = Fraction(0), largest
    for _ in range(60):
        if high - low <= high * Fraction(1, 2000):
            break
        mid = (low + high) / 2
        if met(mid):
            high = mid
        else:
            low = mid
    rounded = _round_up(high)
    return rounded if rounded <= largest and met(rounded) else high


def goal_check(goal: str | None, expected: Sequence[ExpectedError], epsilon: Fraction) -> list[str]:
    """Where the forecast misses the policy's goal ("counts within ±50"): a line each; [] if met or uncheckable."""
    if not goal:
        return []
    found = _GOAL.search(goal)
    if found is None:
        return []
    word, number = found.group(1).lower().rstrip("s"), float(found.group(2).replace(",", ""))
    missed = []
    for e in expected:
        if e.statistic == word and e.bound is not None and e.bound > number:
            missed.append(
                f"the policy's accuracy goal {goal!r} is not met at ε = {_number(float(epsilon))}: "
                f"{e.name!r} is within ±{_number(e.bound)} with probability {e.confidence:g}"
            )
    return missed


def _round_up(value: Fraction) -> Fraction:
    """``value`` rounded up to three significant decimal digits (an ε a person can type)."""
    if value <= 0:
        return value
    exponent = math.floor(math.log10(float(value))) - 2
    step = Fraction(10) ** exponent
    return math.ceil(value / step) * step


def _number(value: float) -> str:
    return f"{value:,.2f}" if abs(value) < 1e6 else f"{value:.3g}"
