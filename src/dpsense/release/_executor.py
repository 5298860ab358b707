"""Run a plan on an engine: bounded relational steps, then the DP mechanisms, then free post-processing.

Only this module touches private values, and only inside the process: the engine returns unnoised
aggregates, order statistics or points; a mechanism from ``dpsense.mechanisms`` runs on them at the
plan step's exact budget share; what leaves is the noisy value, its public accuracy and the realised
privacy loss of each step (which the Session checks against the charge).

Rules kept here:

* every step runs on a bounded view: at most C rows (and C0 groups) per unit, chosen by a keyed hash
  under a fresh secret salt per release, after the public filters;
* data-dependent mechanisms (quantiles, minimum distance) run at the step's ε / C per record, so that
  group privacy (Dwork-Roth Thm 2.2) gives the step's ε for the unit; per public group they compose in
  parallel (each unit's C rows are split across the groups);
* accuracy is reported only where it is a function of public facts: the global-sensitivity noise scale,
  and for a mean with a noisy denominator a bound computed from the released noisy count (post-processing);
  a data-dependent scale (smooth sensitivity) is never reported;
* empty public groups of an order statistic release a uniform public cell: the exponential and
  inverse-sensitivity mechanisms on no records (every candidate scores the same).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpsense import mechanisms as mech
from dpsense.accounting import compose_basic
from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import InternalError, UnsupportedRequest
from dpsense.core.privacy_loss import ApproxDP, PrivacyLoss, PureDP
from dpsense.engine import (
    BoundedView,
    Engine,
    GroupRow,
    Predicate,
    centered_squares,
    clipped_sum,
    count_present,
    count_rows,
    count_units,
    predicate,
)
from dpsense.mechanisms import MechanismResult
from dpsense.mechanisms.quantile import DEFAULT_RESOLUTION
from dpsense.noise import exact
from dpsense.query import AggregateIR, AggregateKind, Plan, PlanStep, QueryIR, StepPart
from dpsense.sensitivity import Sqrt
from dpsense.sensitivity.graph import UndirectedGraph
from dpsense.sensitivity.public_n import resize_to_public_n

#: Confidence of the reported error bounds (each released value's |error| stays below it w.p. >= 0.95).
CONFIDENCE = 0.95
#: A bound on rows per unit large enough to keep every row (for distinct-unit counts).
_ALL_ROWS = (1 << 31) - 1
#: Fixed-point sums keep 2**40 grid steps below the largest bound's magnitude.
_SUM_GRID_BITS = 40

_ORDER_KINDS = (AggregateKind.MEDIAN, AggregateKind.QUANTILE)
_REFUSED: dict[AggregateKind, str] = {}


@dataclass
class Output:
    """One released statistic: a value per group (or one), its public error bound and how it was made."""

    name: str
    values: list[Any]
    error: list[float | None]
    accuracy_note: str
    post_processing: list[str] = field(default_factory=list)


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
    for step in plan.steps:
        if step.mechanism.startswith("smooth_") and step.statistic in _ORDER_KINDS:
            # The smooth quantile needs a public number of records. After contribution bounding and
            # filters the number of rows is private under both adjacencies (a unit keeps min(rows, C)).
            raise UnsupportedRequest(
                "a smooth-sensitivity quantile needs a public number of records, which a bounded release lacks",
                step.output,
                "omit mechanism= (the exponential / inverse-sensitivity quantile needs no n), or call "
                "dpsense.mechanisms.smooth_quantile on an array with a public n",
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
) -> Executed:
    """Run every plan step of ``ir`` on ``table`` (inside the caller's release scope).

    ``constant_work``: when set, every smooth-sensitivity step evaluates exactly that many terms of its
    family (public work) instead of stopping early on the data.
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
    outputs: list[Output] = []
    realised: list[PrivacyLoss] = []
    released_keys: list[Any] | None = None if public_keys is None else list(public_keys)
    selection = next((s for s in plan.steps if s.part is StepPart.KEYS), None)
    if selection is not None:
        selected, loss = runner.select_keys(selection)
        runner.keys = released_keys = selected
        realised.append(loss)
    runner.prefetch(ir)
    for agg in ir.aggregates:
        steps = [s for s in plan.steps if s.output == agg.name]
        output, losses = runner.run(agg, steps)
        outputs.append(output)
        realised.extend(losses)
    return Executed(group_column, released_keys, outputs, realised)


def _predicate(column: str, op: str, value: Any, engine_key: Callable[[Any], Any]) -> Predicate:
    values = value if isinstance(value, tuple) else (value,)
    return predicate(column, op, [engine_key(v) for v in values] if op == "in" else engine_key(values[0]))


class _Runner:
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
            return (_ALL_ROWS if self.group_column is not None else 1), [count_units(f"{agg.name}|n")]
        if kind in (AggregateKind.COUNT, AggregateKind.HISTOGRAM):
            return self._rows(steps[0]), [count_rows(f"{agg.name}|n")]
        if kind in (AggregateKind.SUM, AggregateKind.MEAN, AggregateKind.VARIANCE):
            low, high = agg.bounds[0]
            column = agg.columns[0]
            grid = _grid(low, high)
            spec = clipped_sum(column, low=float(low), high=float(high), grid_exponent=grid, name=f"{agg.name}|s")
            if kind is AggregateKind.SUM:
                return self._rows(steps[0]), [spec]
            # the denominator counts the rows whose value is present, as the clipped sum does
            specs: list[Any] = [spec, count_present(column, f"{agg.name}|n")]
            if kind is AggregateKind.VARIANCE:
                specs.append(centered_squares(column, low=float(low), high=float(high), name=f"{agg.name}|q"))
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

    def run(self, agg: AggregateIR, steps: list[PlanStep]) -> tuple[Output, list[PrivacyLoss]]:
        kind = agg.kind
        if kind in (AggregateKind.COUNT, AggregateKind.COUNT_UNITS, AggregateKind.HISTOGRAM):
            return self._count(agg, steps[0])
        if kind is AggregateKind.SUM:
            return self._sum(agg, steps[0])
        if kind is AggregateKind.MEAN:
            return self._mean(agg, steps)
        if kind is AggregateKind.VARIANCE:
            return self._variance(agg, steps)
        if kind in _ORDER_KINDS:
            return self._order_statistic(agg, steps[0])
        if kind is AggregateKind.MIN_DISTANCE:
            return self._min_distance(agg, steps[0])
        if kind is AggregateKind.TRIMMED_MEAN:
            return self._trimmed_mean(agg, steps)
        if kind is AggregateKind.TRIANGLE_COUNT:
            return self._triangle_count(agg, steps[0])
        raise InternalError(f"no executor for {kind.value}")  # check_executable refuses these first

    # -- additive statistics -------------------------------------------------------------------------

    def _rows(self, step: PlanStep) -> int:
        if step.max_rows_per_unit is None:
            raise InternalError(f"step {step.output!r} has no contribution bound")
        return step.max_rows_per_unit

    def _count(self, agg: AggregateIR, step: PlanStep) -> tuple[Output, list[PrivacyLoss]]:
        rows = self._fetched(agg, [step])  # a histogram is released alone: the runner groups by its column
        counts = np.array([r.counts[f"{agg.name}|n"] for r in rows], dtype=np.int64)
        result = additive_noise(step, counts)
        values = [max(0, round(float(v))) for v in np.atleast_1d(result.value)]
        error = _error(result, len(values))
        out = Output(agg.name, values, error, _accuracy_note(result), ["rounded to an integer, negatives set to 0"])
        if agg.kind is AggregateKind.HISTOGRAM:
            out.post_processing.append(f"one value per public key of {agg.columns[0]!r}, in key order")
        return out, [result.loss]

    def _groups(self, view: BoundedView, aggregates: list[Any]) -> list[GroupRow]:
        return self.engine.group_aggregates(view, group_column=self.group_column, keys=self.keys, aggregates=aggregates)

    def _sum(self, agg: AggregateIR, step: PlanStep) -> tuple[Output, list[PrivacyLoss]]:
        rows = self._fetched(agg, [step])
        sums = np.array([float(r.sums[f"{agg.name}|s"].value) for r in rows], dtype=np.float64)
        result = additive_noise(step, sums)
        values = [float(v) for v in np.atleast_1d(result.value)]
        return Output(agg.name, values, _error(result, len(values)), _accuracy_note(result)), [result.loss]

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
            errors.append(_mean_error(noisy_sum, noisy_count, c, half))
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
            errors.append(_variance_error(noisy_sum, noisy_squares, noisy_count, float(n), half))
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

    # -- data-dependent statistics -------------------------------------------------------------------

    def _values_by_group(self, view: BoundedView, columns: list[str]) -> list[NDArray[np.float64]]:
        if self.group_column is None:
            data = self.engine.collect(view, columns=columns)
            return [np.column_stack([np.asarray(data[c], dtype=np.float64) for c in columns])]
        data = self.engine.collect(view, columns=[self.group_column, *columns])
        labels = data[self.group_column]
        stacked = np.column_stack([np.asarray(data[c], dtype=np.float64) for c in columns])
        return [stacked[np.asarray(labels == key)] for key in self.keys or []]

    def _order_statistic(self, agg: AggregateIR, step: PlanStep) -> tuple[Output, list[PrivacyLoss]]:
        low, high = (float(b) for b in agg.bounds[0])
        q = Fraction(1, 2) if agg.kind is AggregateKind.MEDIAN else agg.q
        if q is None:
            raise InternalError("a quantile without q")
        view = self.view(self._rows(step))
        eps = step.mechanism_epsilon
        values: list[Any] = []
        for group_values in self._values_by_group(view, [agg.columns[0]]):
            x = group_values[:, 0]
            x = x[~np.isnan(x)]  # missing values are left out, as in every engine aggregate
            values.append(_order_release(step, x, q, (low, high), eps, self.plan.adjacency))
        rank_error = 2.0 / float(eps) * math.log(DEFAULT_RESOLUTION / (1 - CONFIDENCE))
        note = (
            f"{step.mechanism}: its error is in ranks, not value units: with probability {CONFIDENCE:g} the "
            f"released value lies between the records ranked {rank_error:,.0f} below and above the target rank "
            f"(2/ε ln(K/β) with ε = {float(eps):.4g} per record and K = 2^32 public cells; Dwork-Roth Thm 3.11)"
        )
        rows = self._rows(step)
        return Output(agg.name, values, [None] * len(values), note), [_group_privacy(eps, rows)]

    def _min_distance(self, agg: AggregateIR, step: PlanStep) -> tuple[Output, list[PrivacyLoss]]:
        low, high = (float(b) for b in agg.bounds[0])
        points = self._values_by_group(self.view(self._rows(step)), list(agg.columns))[0]
        points = points[~np.isnan(points).any(axis=1)]
        eps = step.mechanism_epsilon
        if step.mechanism == "smooth_min_distance":
            result = mech.smooth_min_distance(
                points, box=(low, high), adjacency=Adjacency.ADD_REMOVE, epsilon=eps, constant_work=self.constant_work
            )
        else:
            result = mech.inverse_sensitivity_min_distance(
                points, box=(low, high), epsilon=eps, adjacency=Adjacency.ADD_REMOVE
            )
        _check_result_loss(result, PureDP(eps), step)
        note = f"{step.mechanism}: the noise scale depends on the data, so no error bound is published"
        return Output(agg.name, [float(result.value)], [None], note), [_group_privacy(eps, self._rows(step))]

    def select_keys(self, step: PlanStep) -> tuple[list[Any], PrivacyLoss]:
        """The grouping's keys by private partition selection (``mechanisms.partition_selection``).

        Candidates are the keys present in the rows bounded to ``max_groups_per_unit`` keys per unit;
        each is kept iff its distinct-unit count plus discrete Laplace noise reaches the public
        threshold. A NULL key is never a candidate. The kept keys are sorted (type, value), a public
        order; they are a release, so the later steps use them as public keys.
        """
        if self.group_column is None or step.max_groups_per_unit is None or not isinstance(step.loss, ApproxDP):
            raise InternalError("partition selection without a grouping, a group bound or δ")
        rows = self.engine.group_aggregates(
            self.view(_ALL_ROWS), group_column=self.group_column, keys=None, aggregates=[count_units("units")]
        )
        candidates = [(r.key, r.counts["units"]) for r in rows if r.key is not None]
        chosen = mech.select_partitions(
            np.array([c for _, c in candidates], dtype=np.int64),
            max_partitions_per_unit=step.max_groups_per_unit,
            replace=self.plan.adjacency is Adjacency.REPLACE,
            epsilon=step.mechanism_epsilon,
            delta=step.loss.delta,
        )
        kept = [key for (key, _), keep in zip(candidates, chosen.keep, strict=True) if keep]
        return sorted(kept, key=lambda k: (type(k).__name__, k)), chosen.loss

    def _record_changes(self) -> int:
        """Record-level changes one of a unit's C rows stands for: 1 under add/remove, 2 under replace.

        A unit keeps at most C rows; adding or removing it adds or removes them, and replacing it
        removes its rows and adds at most C others, so each of the C steps of group privacy is at
        most one removal and one addition (two replacements once resized to a public n).
        """
        return 2 if self.plan.adjacency is Adjacency.REPLACE else 1

    def _trimmed_mean(self, agg: AggregateIR, steps: list[PlanStep]) -> tuple[Output, list[PrivacyLoss]]:
        """A noisy count as the public n, then the trimmed mean of the values resized to that n.

        Step 1 (global sensitivity, Laplace): n^ = max(1, round(noisy count of present values)), a
        release. Step 2 runs on the values resized to n^ (``sensitivity.public_n``: padding with L and U
        or trimming alternately, so one added or removed record is at most one replacement) with
        m = floor(t n^) values trimmed at each end: smooth sensitivity with Cauchy noise (Bun-Steinke
        2019; Nissim-Raskhodnikova-Smith 2007) or inverse sensitivity, at ε / C per record group of
        ``_record_changes`` record changes, so group privacy gives the step's ε for a unit. Public
        groups compose in parallel, each with its own n^.
        """
        by_part = {s.part: s for s in steps}
        count_step, value_step = by_part[StepPart.COUNT], by_part[StepPart.VALUE]
        low, high = (float(b) for b in agg.bounds[0])
        t = agg.trim_fraction
        if t is None:
            raise InternalError("a trimmed mean without a trim fraction")
        view = self.view(self._rows(value_step))
        groups = [g[:, 0][~np.isnan(g[:, 0])] for g in self._values_by_group(view, [agg.columns[0]])]
        noisy = additive_noise(count_step, np.array([x.size for x in groups], dtype=np.float64))
        public_ns = [max(1, round(float(v))) for v in np.atleast_1d(noisy.value)]
        eps = value_step.mechanism_epsilon
        per_record = eps / self._record_changes()
        values: list[Any] = []
        for x, n in zip(groups, public_ns, strict=True):
            trim = math.floor(t * n)
            if value_step.mechanism == "smooth_trimmed_mean":
                result = mech.smooth_trimmed_mean(
                    x,
                    trim=trim,
                    bounds=(low, high),
                    noise="cauchy",
                    epsilon=eps,
                    adjacency=Adjacency.ADD_REMOVE,
                    public_n=n,
                    max_records_per_unit=self._record_changes(),
                    constant_work=self.constant_work,
                )
                _check_result_loss(result, PureDP(eps), value_step)
            else:
                resized = resize_to_public_n(x, public_n=n, bounds=(low, high))
                result = mech.inverse_sensitivity_trimmed_mean(
                    resized, trim=trim, bounds=(low, high), epsilon=per_record
                )
                _check_result_loss(result, PureDP(per_record), value_step)
            values.append(float(result.value))
        note = (
            f"{value_step.mechanism} on the values resized to the released noisy count n^ (trimming floor({float(t):g} "
            "n^) values at each end); the noise scale depends on the data, so no error bound is published"
        )
        post = ["the noisy count rounded to an integer >= 1 and used as the public n"]
        loss = _group_privacy(eps, self._rows(value_step))
        return Output(agg.name, values, [None] * len(values), note, post), [noisy.loss, loss]

    def _triangle_count(self, agg: AggregateIR, step: PlanStep) -> tuple[Output, list[PrivacyLoss]]:
        """Triangles of the graph on the public vertex set whose edges are the bounded rows (edge-level DP).

        Each kept row is an undirected edge; rows with an endpoint outside the public vertex set, self
        loops and repeated edges are dropped (a rule on each row alone), so one unit changes at most C
        edges (2C under replace). The mechanism runs edge-level at ε / (C x record changes): group privacy.
        """
        vertices = [self.engine_key(v) for v in agg.keys or ()]
        index = {v: i for i, v in enumerate(vertices)}
        data = self.engine.collect(self.view(self._rows(step)), columns=list(agg.columns))
        src, dst = (data[c] for c in agg.columns)
        pairs = {
            (min(a, b), max(a, b))
            for a, b in ((index.get(_scalar(u)), index.get(_scalar(w))) for u, w in zip(src, dst, strict=True))
            if a is not None and b is not None and a != b
        }
        edges = np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)
        graph = UndirectedGraph(edges, num_vertices=max(len(vertices), 1))
        eps = step.mechanism_epsilon / self._record_changes()
        top = float(math.comb(len(vertices), 3))
        if step.mechanism == "smooth_triangle_count":
            result = mech.smooth_triangle_count(
                graph, privacy_unit="edge", epsilon=eps, constant_work=self.constant_work, count_bound=top
            )
        else:
            result = mech.inverse_sensitivity_triangle_count(graph, privacy_unit="edge", count_bound=top, epsilon=eps)
        _check_result_loss(result, PureDP(eps), step)
        note = f"{step.mechanism} (edge-level); the noise scale depends on the data, so no error bound is published"
        loss = _group_privacy(eps * self._record_changes(), self._rows(step))
        return Output(agg.name, [float(result.value)], [None], note), [loss]


def _scalar(value: Any) -> Any:
    """A numpy scalar as the Python value the public vertex keys use."""
    return value.item() if isinstance(value, np.generic) else value


# -- mechanisms --------------------------------------------------------------------------------------


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
    if step.mechanism == "laplace":
        result = mech.laplace(values, sensitivity=sens, epsilon=eps, confidence=confidence)
    elif step.mechanism == "gaussian":
        if not isinstance(step.loss, ApproxDP):
            raise InternalError("a Gaussian step without δ")
        result = mech.gaussian(values, sensitivity=sens, epsilon=eps, delta=step.loss.delta, confidence=confidence)
    elif step.mechanism == "geometric":
        result = mech.geometric(np.rint(values).astype(np.int64), sensitivity=sens, epsilon=eps, confidence=confidence)
    else:
        raise InternalError(f"{step.mechanism!r} is not a global-sensitivity mechanism")
    _check_result_loss(result, step.loss, step)
    return result


def _order_release(
    step: PlanStep, x: NDArray[np.float64], q: Fraction, bounds: tuple[float, float], eps: Fraction, adj: Adjacency
) -> float:
    if x.size == 0:
        return _uniform_cell(bounds)
    if step.mechanism == "em_quantile":
        result = mech.em_quantile(x, q=q, bounds=bounds, epsilon=eps)
    elif step.mechanism.startswith("inverse_sensitivity"):
        rank = max(1, math.ceil(q * x.size))  # shifts by at most 1 between neighbours: utility stays 1-Lipschitz
        result = mech.inverse_sensitivity_order_statistic(x, rank=rank, bounds=bounds, epsilon=eps)
    else:  # smooth_median / smooth_quantile, replace adjacency: n = len(x) is public
        result = mech.smooth_quantile(x, q=float(q), bounds=bounds, epsilon=eps, adjacency=adj)
    _check_result_loss(result, PureDP(eps), step)
    return float(result.value)


def _uniform_cell(bounds: tuple[float, float]) -> float:
    """The midpoint of a uniform public cell of [L, U] (the order-statistic mechanisms on no records)."""
    low, high = bounds
    cell = int(exact.uniform_below(np.array([DEFAULT_RESOLUTION], dtype=np.int64))[0])
    fraction = (cell + 0.5) / DEFAULT_RESOLUTION
    return float(min(max(2.0 * (low * 0.5 + fraction * (high * 0.5 - low * 0.5)), low), high))


def _check_result_loss(result: MechanismResult, expected: PrivacyLoss, step: PlanStep) -> None:
    if _pair(result.loss) != _pair(expected):
        raise InternalError(f"step {step.output!r} ran at {result.loss}, not the planned {expected}")


def _pair(loss: PrivacyLoss) -> tuple[Fraction, Fraction]:
    if isinstance(loss, ApproxDP):
        return (loss.epsilon, loss.delta)
    if isinstance(loss, PureDP):
        return (loss.epsilon, Fraction(0))
    raise InternalError("a zCDP loss in a (ε, δ) plan")


def _group_privacy(eps: Fraction, rows: int) -> PrivacyLoss:
    """ε per record over a unit's ``rows`` records (Dwork-Roth Thm 2.2)."""
    return PureDP(eps * rows)


def _grid(low: Fraction, high: Fraction) -> int:
    magnitude = max(abs(low), abs(high))
    top = 0 if magnitude == 0 else math.floor(math.log2(magnitude))
    return top - _SUM_GRID_BITS


def _error(result: MechanismResult, size: int) -> list[float | None]:
    if result.accuracy is None:
        return [None] * size
    return [float(result.accuracy.error_bound)] * size


def _accuracy_note(result: MechanismResult) -> str:
    if result.accuracy is None:
        return result.mechanism
    return f"{result.accuracy.noise}: |error| <= bound with probability {result.accuracy.confidence:g} per value"


def _variance_error(
    noisy_sum: MechanismResult, noisy_squares: MechanismResult, noisy_count: MechanismResult, count: float, half: float
) -> float:
    top = half * half
    accuracies = [r.accuracy for r in (noisy_sum, noisy_squares, noisy_count)]
    bounds = [float(a.error_bound) for a in accuracies if a is not None]
    if len(bounds) != len(accuracies):
        return top
    b1, b2, bn = bounds
    return float(min((b2 + top * bn + 2 * half * (b1 + half * bn)) / count, top))


def _mean_error(noisy_sum: MechanismResult, noisy_count: MechanismResult, count: float, half: float) -> float:
    if noisy_sum.accuracy is None or noisy_count.accuracy is None or count < 1:
        return 2 * half
    bound = (noisy_sum.accuracy.error_bound + half * noisy_count.accuracy.error_bound) / count
    return float(min(bound, 2 * half))
