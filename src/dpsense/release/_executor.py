"""Run a plan on an engine: bounded relational steps, then the DP mechanisms, then free post-processing.

Only this module and its two helpers (``_data_dependent``, ``_steps``) touch private values, and only
inside the process: the engine returns unnoised
aggregates, order statistics or points; a mechanism from ``dpsense.mechanisms`` runs on them at the
plan step's exact budget share; what leaves is the noisy value, its public accuracy and the realised
privacy loss of each step (which the Session checks against the charge).

Rules kept here:

* every step runs on a bounded view: at most C rows (and C0 groups) per unit, chosen by a keyed hash
  under a fresh secret salt per release, after the public filters;
* data-dependent mechanisms (quantiles, minimum distance) run at the step's ε / M per call, M the step's
  record cost (C; 2C or C plus the odd parts under replace with public groups, where a replaced unit can
  leave one group while its replacement enters another), so that group privacy (Dwork-Roth Thm 2.2)
  over the public groups gives the step's ε for the unit;
* accuracy is reported only where it is a function of public facts: the global-sensitivity noise scale,
  and for a mean with a noisy denominator a bound computed from the released noisy count (post-processing);
  a data-dependent scale (smooth sensitivity) is never reported;
* empty public groups of an order statistic release a uniform public cell: the exponential and
  inverse-sensitivity mechanisms on no records (every candidate scores the same).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpsense.accounting import compose_basic
from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import InternalError, UnsupportedRequest, UsageError
from dpsense.core.numbers import inward_interval
from dpsense.core.privacy_loss import PrivacyLoss
from dpsense.engine import (
    BoundedView,
    Engine,
    GroupRow,
    Predicate,
    centered_squares,
    count_outside,
    count_present,
    count_rows,
    count_units,
    predicate,
)
from dpsense.query import AggregateIR, AggregateKind, Plan, PlanStep, QueryIR, StepPart
from dpsense.release._bounds import bounds_output_names, release_bounds
from dpsense.release._data_dependent import ALL_ROWS, DataDependentSteps
from dpsense.release._steps import (
    CONFIDENCE,
    Output,
    accuracy_note,
    additive_noise,
    bounded_sum,
    error_bounds,
    mean_error,
    variance_error,
)
from dpsense.statistics import STATISTICS

_ORDER_KINDS = (AggregateKind.MEDIAN, AggregateKind.QUANTILE)
_COUNT_KINDS = (AggregateKind.COUNT, AggregateKind.COUNT_UNITS, AggregateKind.HISTOGRAM, AggregateKind.CLIPPED_COUNT)
_REFUSED: dict[AggregateKind, str] = {}


@dataclass
class Executed:
    """The noisy result of a plan, with the realised loss of every step (for the charge check)."""

    group_column: str | None
    keys: list[Any] | None
    outputs: list[Output]
    realised: list[PrivacyLoss]

    @property
    def total_loss(self) -> PrivacyLoss:
        """Basic composition of the realised step losses (Dwork-Roth Thm 3.16)."""
        return compose_basic(self.realised)


def check_executable(ir: QueryIR, plan: Plan) -> None:
    """Refuse, before any charge, what the executor cannot run (names the alternative)."""
    if len(ir.group_by) > 1:
        raise UnsupportedRequest(
            "a release groups by at most one column",
            [g.column for g in ir.group_by],
            "combine the columns into one key column at registration, or release one grouping at a time",
        )
    for agg in ir.aggregates:
        if agg.kind in _REFUSED:
            raise UnsupportedRequest(
                f"the release system does not run {agg.kind.value} yet", agg.name, f"use {_REFUSED[agg.kind]}"
            )
        if agg.kind is AggregateKind.HISTOGRAM and (ir.group_by or len(ir.aggregates) > 1):
            raise UnsupportedRequest(
                "a histogram is released on its own (one row per public key)",
                agg.name,
                f"release it alone, or use group_by({agg.columns[0]!r}, keys=[...]).agg({agg.name}=count())",
            )
        if agg.kind is AggregateKind.APPROX_BOUNDS:
            _check_bounds_request(ir, agg)
        if agg.kind is AggregateKind.TRIANGLE_COUNT:
            if ir.group_by:
                raise UnsupportedRequest("a triangle count is released for the whole graph", agg.name, "drop group_by")
            if agg.keys is None:
                raise UnsupportedRequest(
                    f"the triangle count {agg.name!r} needs the public vertex set",
                    list(agg.columns),
                    "declare it at registration as keys of both edge columns, e.g. keys={'src': ids, 'dst': ids}",
                )
        if agg.kind is AggregateKind.MIN_DISTANCE:
            if plan.adjacency is not Adjacency.ADD_REMOVE:
                raise UnsupportedRequest(
                    "min_distance runs per record under add/remove; replacing a unit's rows changes the number "
                    "of records, so the release system runs it only on add/remove datasets",
                    agg.name,
                    "register the dataset with adjacency='add_remove', or call dpsense.mechanisms."
                    "smooth_min_distance on an array with a public n",
                )
            if ir.group_by:
                raise UnsupportedRequest("min_distance is released for the whole dataset", agg.name, "drop group_by")
            if len(set(agg.bounds)) != 1:
                raise UnsupportedRequest(
                    "min_distance needs the same public bounds on every coordinate (a box)",
                    agg.name,
                    "declare equal bounds for the point columns, or pass bounds=(L, U)",
                )
    if plan.public_n is not None:
        # sum / n with a public n is safe only when both neighbours have exactly n rows; the engine
        # cannot guarantee that after bounding and filters (a replaced unit may own fewer or more rows).
        raise UnsupportedRequest(
            "a public n cannot be enforced on a bounded release",
            plan.public_n,
            "drop public_n: the mean is then released as a noisy sum over a noisy count",
        )


def _check_bounds_request(ir: QueryIR, agg: AggregateIR) -> None:
    if ir.group_by:
        raise UnsupportedRequest(
            "approx_bounds is released for the whole dataset", agg.name, "drop group_by (bounds are per column)"
        )
    taken = {a.name for a in ir.aggregates}
    clash = [n for n in bounds_output_names(agg.name) if n in taken]
    if clash:
        raise UsageError(
            f"approx_bounds {agg.name!r} releases the columns {' and '.join(bounds_output_names(agg.name))}",
            clash[0],
            "rename one of the two aggregates",
        )


def execute(
    engine: Engine,
    table: str,
    *,
    ir: QueryIR,
    plan: Plan,
    unit_column: str,
    salt: bytes,
    engine_key: Callable[[Any], Any],
    constant_work: int | None = None,
    max_collect_rows: int | None = None,
    on_stage: Callable[[int], None] | None = None,
) -> Executed:
    """Run every plan step of ``ir`` on ``table`` (inside the caller's release scope).

    ``constant_work``: when set, every smooth-sensitivity step evaluates exactly that many terms of its
    family (public work) instead of stopping early on the data. ``max_collect_rows``: a public bound
    on the rows a data-dependent step collects (population x C); a view holding more raises the
    engine's ``CollectLimitExceeded`` after reading, which the Session charges. ``on_stage(i)`` hears
    stage i start (a progress bar): 0 the scan of the bounded rows, i >= 1 the i-th aggregate.
    """
    group = ir.group_by[0] if ir.group_by else None
    group_column = None if group is None else group.column
    public_keys = None if group is None else group.keys
    if group is None and ir.aggregates[0].kind is AggregateKind.HISTOGRAM:  # released alone: keys as rows
        group_column, public_keys = ir.aggregates[0].columns[0], ir.aggregates[0].keys
    keys = None if public_keys is None else [engine_key(k) for k in public_keys]
    where = [_predicate(f.column, f.op.value, f.value, engine_key) for f in ir.filters]
    runner = _Runner(engine, table, unit_column, salt, where, group_column, keys, ir.max_groups_per_unit, plan)
    runner.constant_work = constant_work
    runner.engine_key = engine_key
    runner.max_collect_rows = max_collect_rows
    outputs: list[Output] = []
    realised: list[PrivacyLoss] = []
    released_keys: list[Any] | None = None if public_keys is None else list(public_keys)
    selection = next((s for s in plan.steps if s.part is StepPart.KEYS), None)
    if selection is not None:
        selected, loss = runner.select_keys(selection)
        runner.keys = released_keys = selected
        realised.append(loss)
        if not selected:  # no key kept: every statistic is an empty column (post-processing of the selection)
            note = "no group key passed the private partition selection, so no group is released"
            empty = [Output(agg.name, [], [], note) for agg in ir.aggregates]  # approx_bounds has no group_by
            charged = [s.loss for s in plan.steps if s.part is not StepPart.KEYS]  # the planned charge stands
            return Executed(group_column, [], empty, [*realised, *charged])
    stage = on_stage if on_stage is not None else (lambda i: None)
    stage(0)
    runner.prefetch(ir)
    for i, agg in enumerate(ir.aggregates, start=1):
        stage(i)
        steps = [s for s in plan.steps if s.output == agg.name]
        produced, losses = runner.run(agg, steps)
        outputs.extend(produced)
        realised.extend(losses)
    return Executed(group_column, released_keys, outputs, realised)


def _predicate(column: str, op: str, value: Any, engine_key: Callable[[Any], Any]) -> Predicate:
    values = value if isinstance(value, tuple) else (value,)
    return predicate(column, op, [engine_key(v) for v in values] if op == "in" else engine_key(values[0]))


class _Runner(DataDependentSteps):
    """One release's bounded views and the handlers per statistic."""

    def __init__(
        self,
        engine: Engine,
        table: str,
        unit: str,
        salt: bytes,
        where: Sequence[Predicate],
        group_column: str | None,
        keys: list[Any] | None,
        max_groups: int | None,
        plan: Plan,
    ) -> None:
        self.engine, self.table, self.unit, self.salt, self.where = engine, table, unit, salt, where
        self.group_column, self.keys, self.max_groups, self.plan = group_column, keys, max_groups, plan
        self.views: dict[tuple[int, str | None], BoundedView] = {}
        self.fetched: dict[int, list[GroupRow]] = {}
        self.constant_work: int | None = None
        self.max_collect_rows: int | None = None
        self.engine_key: Callable[[Any], Any] = lambda value: value

    def prefetch(self, ir: QueryIR) -> None:
        """One ``group_aggregates`` call per bounded view for every additive statistic (one scan, not k)."""
        wanted: dict[int, list[Any]] = {}
        for agg in ir.aggregates:
            steps = [s for s in self.plan.steps if s.output == agg.name]
            specs = self._additive_specs(agg, steps)
            if specs is not None:
                wanted.setdefault(specs[0], []).extend(specs[1])
        for rows, aggregates in wanted.items():
            self.fetched[rows] = self._groups(self.view(rows), aggregates)

    def _additive_specs(self, agg: AggregateIR, steps: list[PlanStep]) -> tuple[int, list[Any]] | None:
        kind = agg.kind
        if kind is AggregateKind.COUNT_UNITS:
            return (ALL_ROWS if self.group_column is not None else 1), [count_units(f"{agg.name}|n")]
        if kind in (AggregateKind.COUNT, AggregateKind.HISTOGRAM):
            return self._rows(steps[0]), [count_rows(f"{agg.name}|n")]
        if kind is AggregateKind.CLIPPED_COUNT:
            # a double lies in the declared bounds exactly when it lies in their inward double interval
            lo, hi = inward_interval(*agg.bounds[0])
            outside = count_outside(agg.columns[0], low=lo, high=hi, name=f"{agg.name}|n")
            return self._rows(steps[0]), [outside]
        if kind in (AggregateKind.SUM, AggregateKind.MEAN, AggregateKind.VARIANCE):
            low, high = agg.bounds[0]
            column = agg.columns[0]
            spec = bounded_sum(column, low, high, name=f"{agg.name}|s")
            if kind is AggregateKind.SUM:
                return self._rows(steps[0]), [spec]
            # the denominator counts the rows whose value is present, as the clipped sum does
            specs: list[Any] = [spec, count_present(column, f"{agg.name}|n")]
            if kind is AggregateKind.VARIANCE:
                inside = inward_interval(low, high)  # the clip stays inside the bounds of the sensitivity
                specs.append(centered_squares(column, low=inside[0], high=inside[1], name=f"{agg.name}|q"))
            return self._rows(steps[0]), specs
        return None

    def _fetched(self, agg: AggregateIR, steps: list[PlanStep]) -> list[GroupRow]:
        specs = self._additive_specs(agg, steps)
        if specs is None or specs[0] not in self.fetched:
            raise InternalError(f"no prefetched aggregates for {agg.name!r}")
        return self.fetched[specs[0]]

    def view(self, rows: int, group_column: str | None = None) -> BoundedView:
        group_column = group_column or self.group_column
        capped = group_column if (group_column is not None and self.max_groups is not None) else None
        key = (rows, capped)
        if key not in self.views:
            self.views[key] = self.engine.bounded_rows(
                self.table,
                unit_column=self.unit,
                max_rows_per_unit=rows,
                salt=self.salt,
                group_column=capped,
                max_groups_per_unit=self.max_groups if capped else None,
                where=self.where,
            )
        return self.views[key]

    def run(self, agg: AggregateIR, steps: list[PlanStep]) -> tuple[list[Output], list[PrivacyLoss]]:
        """The output columns of one aggregate (one, or two for ``approx_bounds``) and their step losses."""
        if agg.kind is AggregateKind.APPROX_BOUNDS:
            return release_bounds(agg, steps[0], self.present_values(agg, steps[0])[0], self.plan.adjacency)
        output, losses = self._run_one(agg, steps)
        return [output], losses

    def _run_one(self, agg: AggregateIR, steps: list[PlanStep]) -> tuple[Output, list[PrivacyLoss]]:
        kind = agg.kind
        if kind in (
            AggregateKind.COUNT,
            AggregateKind.COUNT_UNITS,
            AggregateKind.HISTOGRAM,
            AggregateKind.CLIPPED_COUNT,
        ):
            return self._count(agg, steps[0])
        if kind is AggregateKind.SUM:
            return self._sum(agg, steps[0])
        if kind is AggregateKind.MEAN:
            return self._mean(agg, steps)
        if kind is AggregateKind.VARIANCE:
            return self._variance(agg, steps)
        if kind in _ORDER_KINDS:
            return self._order_statistic(agg, steps)
        if kind is AggregateKind.MIN_DISTANCE:
            return self._min_distance(agg, steps[0])
        if kind is AggregateKind.TRIMMED_MEAN:
            return self._trimmed_mean(agg, steps)
        if kind is AggregateKind.TRIANGLE_COUNT:
            return self._triangle_count(agg, steps[0])
        raise InternalError(f"no executor for {kind.value}")  # check_executable refuses these first

    # -- additive statistics -------------------------------------------------------------------------

    def _count(self, agg: AggregateIR, step: PlanStep) -> tuple[Output, list[PrivacyLoss]]:
        rows = self._fetched(agg, [step])  # a histogram is released alone: the runner groups by its column
        counts = np.array([r.counts[f"{agg.name}|n"] for r in rows], dtype=np.int64)
        result = additive_noise(step, counts)
        values = [max(0, round(float(v))) for v in np.atleast_1d(result.value)]
        error = error_bounds(result, len(values))
        out = Output(agg.name, values, error, accuracy_note(result), ["rounded to an integer, negatives set to 0"])
        if agg.kind is AggregateKind.HISTOGRAM:
            out.post_processing.append(f"one value per public key of {agg.columns[0]!r}, in key order")
        return out, [result.loss]

    def _groups(self, view: BoundedView, aggregates: list[Any]) -> list[GroupRow]:
        return self.engine.group_aggregates(view, group_column=self.group_column, keys=self.keys, aggregates=aggregates)

    def _sum(self, agg: AggregateIR, step: PlanStep) -> tuple[Output, list[PrivacyLoss]]:
        rows = self._fetched(agg, [step])
        name = f"{agg.name}|s"
        # float(units) rounds once, scaling by a power of two is exact: float(Fraction) without the Fraction
        sums = np.array([math.ldexp(float(r.sums[name].units), r.sums[name].grid_exponent) for r in rows])
        result = additive_noise(step, sums)
        values = [float(v) for v in np.atleast_1d(result.value)]
        return Output(agg.name, values, error_bounds(result, len(values)), accuracy_note(result)), [result.loss]

    def _mean(self, agg: AggregateIR, steps: list[PlanStep]) -> tuple[Output, list[PrivacyLoss]]:
        low, high = agg.bounds[0]
        by_part = {s.part: s for s in steps}
        clamp = f"clamped to the public bounds [{float(low):g}, {float(high):g}]"
        total, count = by_part[StepPart.CENTERED_SUM], by_part[StepPart.COUNT]
        rows = self._fetched(agg, steps)
        s_name, n_name = f"{agg.name}|s", f"{agg.name}|n"
        mid = (low + high) / 2
        centered = np.array([float(r.sums[s_name].value - mid * r.counts[n_name]) for r in rows], dtype=np.float64)
        counts = np.array([r.counts[n_name] for r in rows], dtype=np.float64)
        beta = 1 - CONFIDENCE
        noisy_sum = additive_noise(total, centered, confidence=1 - beta / 2)
        noisy_count = additive_noise(count, counts, confidence=1 - beta / 2)
        sums_out = np.atleast_1d(noisy_sum.value).astype(np.float64)
        counts_out = np.atleast_1d(noisy_count.value).astype(np.float64)
        half = float(high - low) / 2
        values: list[Any] = []
        errors: list[float | None] = []
        for s, c in zip(sums_out, counts_out, strict=True):
            estimate = float(mid) + (s / c if c >= 1 else 0.0)
            values.append(min(max(estimate, float(low)), float(high)))
            errors.append(mean_error(noisy_sum, noisy_count, c, half))
        note = (
            "noisy centered sum / noisy count; the error bound uses the released noisy count n^: "
            "|error| <= (b_sum + (U-L)/2 * b_count) / n^ with b at 97.5% each, so it grows as the group "
            "shrinks and is the full range when n^ < 1"
        )
        post = [clamp, "the midpoint when the noisy count is below 1"]
        return Output(agg.name, values, errors, note, post), [noisy_sum.loss, noisy_count.loss]

    def _variance(self, agg: AggregateIR, steps: list[PlanStep]) -> tuple[Output, list[PrivacyLoss]]:
        """Population variance from three noisy releases: centred sum S1, centred squares S2, count N.

        With a = S2/N in [0, h**2] and m = S1/N in [-h, h] (h the public half-width), the estimate is
        ``clamp(S2^/N^ - clamp(S1^/N^, -h, h)**2, 0, h**2)``. Post-processing of the three releases, so
        is its error bound: |S2^/N^ - a| <= (b2 + h**2 bn)/N^ and |m^ - m| <= (b1 + h bn)/N^, whence
        |error| <= (b2 + h**2 bn + 2 h (b1 + h bn)) / N^ (capped at h**2), with each b at 1 - β/3 so the
        three hold together with probability >= 0.95 (union bound).
        """
        low, high = agg.bounds[0]
        by_part = {s.part: s for s in steps}
        rows = self._fetched(agg, steps)
        s_name, n_name, q_name = f"{agg.name}|s", f"{agg.name}|n", f"{agg.name}|q"
        mid = (low + high) / 2
        centered = np.array([float(r.sums[s_name].value - mid * r.counts[n_name]) for r in rows], dtype=np.float64)
        squares = np.array([float(r.sums[q_name].value) for r in rows], dtype=np.float64)
        counts = np.array([r.counts[n_name] for r in rows], dtype=np.float64)
        confidence = 1 - (1 - CONFIDENCE) / 3
        noisy_sum = additive_noise(by_part[StepPart.CENTERED_SUM], centered, confidence=confidence)
        noisy_squares = additive_noise(by_part[StepPart.CENTERED_SQUARES], squares, confidence=confidence)
        noisy_count = additive_noise(by_part[StepPart.COUNT], counts, confidence=confidence)
        half = float(high - low) / 2
        top = half * half
        values: list[Any] = []
        errors: list[float | None] = []
        for s1, s2, n in zip(
            np.atleast_1d(noisy_sum.value).astype(np.float64),
            np.atleast_1d(noisy_squares.value).astype(np.float64),
            np.atleast_1d(noisy_count.value).astype(np.float64),
            strict=True,
        ):
            if n < 1:
                values.append(top / 3)  # the variance of a uniform value on the bounds: public
                errors.append(top)
                continue
            m = min(max(float(s1) / n, -half), half)
            values.append(min(max(float(s2) / n - m * m, 0.0), top))
            errors.append(variance_error(noisy_sum, noisy_squares, noisy_count, float(n), half))
        note = (
            "population variance (divisor n^) from a noisy centred sum, a noisy sum of squared centred values "
            "and a noisy count; the error bound uses the released n^: |error| <= (b_sq + h^2 b_n + 2h (b_sum + "
            "h b_n)) / n^ with h = (U-L)/2 and each b at 98.3%, so it grows as the group shrinks"
        )
        post = [
            f"clamped to [0, ((U-L)/2)^2] = [0, {top:g}]",
            "the variance of a uniform value on the bounds when the noisy count is below 1",
        ]
        return Output(agg.name, values, errors, note, post), [noisy_sum.loss, noisy_squares.loss, noisy_count.loss]


#: Statistics whose steps collect the bounded rows to the driver (``Engine.collect``): the registry's ``collects``.
COLLECTING_KINDS = frozenset(kind for kind, stat in STATISTICS.items() if stat.collects)


def collect_bound(plan: Plan, population: int | None) -> int | None:
    """The public worst case of rows a release collects: population x the largest C of a collecting step.

    ``None`` when no step collects or the population is unknown. A unit keeps at most C rows of a
    view, and the policy's population bounds the number of units (registration refuses a snapshot
    with more units: ``release._datasets.check_population``), so no view of a registered snapshot
    holds more rows; the engine's check stays as defence in depth.
    """
    rows = [s.max_rows_per_unit for s in plan.steps if s.statistic in COLLECTING_KINDS and s.part is StepPart.VALUE]
    bounded = [r for r in rows if r is not None]
    if population is None or not bounded:
        return None
    return population * max(bounded)
