"""Data-dependent release steps: order statistics, minimum distance, trimmed mean, triangle count, keys.

These mechanisms calibrate to the data (smooth sensitivity, inverse sensitivity, the exponential
mechanism) and run per record; every step here runs at the plan step's ε / M per call (M, the step's
``record_cost``: C, or more under replace with public groups, where a replaced unit can leave one group
while its replacement enters another; ``query._planner_rules.unit_record_cost``), so that group privacy
(Dwork-Roth Thm 2.2) over the public groups gives the step's ε for a unit. Every step is total: empty
groups, one record and ties give the mechanism's own answer, never an exception (docs/design.md invariant 6).
No data-dependent scale is ever reported as accuracy.
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpsense import mechanisms as mech
from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import InternalError
from dpsense.core.numbers import inward_interval
from dpsense.core.privacy_loss import ApproxDP, PrivacyLoss, PureDP
from dpsense.core.steps import DecimalStep
from dpsense.engine import BoundedView, GroupColumns, ReleaseEngine, count_present, count_units
from dpsense.mechanisms.quantile import (
    DEFAULT_RESOLUTION,
    integer_candidates,
    point_grids,
    rank_slack_candidates,
    step_candidates,
    utility_sensitivity,
)
from dpsense.query import AggregateIR, AggregateKind, Family, Mechanism, Plan, PlanStep, StepPart
from dpsense.query._aggregates import quantile_label
from dpsense.sensitivity.graph import UndirectedGraph
from dpsense.sensitivity.order_statistics import RankedValues
from dpsense.sensitivity.public_n import resize_to_public_n
from dpsense.statistics._steps import (
    ALL_ROWS,
    CONFIDENCE,
    Output,
    additive_noise,
    check_result_loss,
    group_privacy,
    joint_release,
    order_releases,
    ptr_note,
    ptr_record_budget,
)


class DataDependentSteps(ABC):
    """The data-dependent handlers of a release runner (mixed into ``_executor._Runner``)."""

    engine: ReleaseEngine
    group_column: GroupColumns | None
    keys: Sequence[Any] | None
    plan: Plan
    constant_work: int | None
    engine_key: Callable[[Any], Any]
    max_collect_rows: int | None

    @abstractmethod
    def view(self, rows: int, group_column: GroupColumns | None = None) -> BoundedView:
        """The release's bounded view with at most ``rows`` rows per unit (the runner caches them)."""

    def step_rows(self, step: PlanStep) -> int:
        if step.max_rows_per_unit is None:
            raise InternalError(f"step {step.output!r} has no contribution bound")
        return step.max_rows_per_unit

    def _values_by_group(self, view: BoundedView, columns: list[str]) -> list[NDArray[np.float64]]:
        if self.group_column is None:
            data = self.engine.collect(view, columns=columns, max_rows=self.max_collect_rows)
            return [_stacked(data, columns)]
        groups = [self.group_column] if isinstance(self.group_column, str) else list(self.group_column)
        data = self.engine.collect(view, columns=[*groups, *columns], max_rows=self.max_collect_rows)
        return split_by_key([np.asarray(data[g]) for g in groups], _stacked(data, columns), self.keys or [])

    def order_statistic(self, agg: AggregateIR, steps: list[PlanStep]) -> tuple[Output, list[PrivacyLoss]]:
        q = Fraction(1, 2) if agg.kind is AggregateKind.MEDIAN else agg.q
        if q is None:
            raise InternalError("a quantile without q")
        by_part = {s.part: s for s in steps}
        if StepPart.COUNT in by_part:  # smooth sensitivity or PTR: they need a public n
            return self._public_n_statistic(agg, by_part[StepPart.COUNT], by_part[StepPart.VALUE], q=q)
        step = by_part[StepPart.VALUE]
        low, high, integers, points = _candidates(agg, step)
        recorded = agg.step if step.mechanism is Mechanism.EM_QUANTILE else None
        eps = step.mechanism_epsilon
        values: list[Any] = order_releases(
            step,
            self.present_values(agg, step),
            q,
            (low, high),
            eps,
            self.plan.adjacency,
            integers=integers,
            decimal_points=points,
            recording_step=recorded,
        )
        note = order_rank_note(agg, step, self.plan.adjacency)
        return Output(agg.name, values, [None] * len(values), note), [group_privacy(eps, step.unit_cost)]

    def joint_quantiles(self, agg: AggregateIR, step: PlanStep) -> tuple[list[Output], list[PrivacyLoss]]:
        """Per group the m quantiles of ``agg.qs`` by recursive splitting (``statistics.quantiles``).

        The candidates: the 2^32 cells of each split's domain and, for every column, the decimal points
        of the declared bounds (an integer column's whole numbers among them), or the points of the
        column's declared recording step alone: public facts only.
        """
        if agg.qs is None:
            raise InternalError("quantiles without qs")
        low, high = inward_interval(*agg.bounds[0])
        eps = step.mechanism_epsilon
        points = agg.step is None and bool(point_grids((low, high)))
        per_group = [
            joint_release(
                step, x, agg.qs, (low, high), eps, self.plan.adjacency, decimal_points=points, recording_step=agg.step
            )
            for x in self.present_values(agg, step)
        ]
        depth = max(1, math.ceil(math.log2(len(agg.qs) + 1)))
        note = (
            f"{step.mechanism}: {len(agg.qs)} quantiles over {depth} levels of disjoint splits, each split the "
            f"exponential-mechanism quantile at ε = {float(eps) / depth:.4g}"
            f"{' / 2 (replace)' if self.plan.adjacency is Adjacency.REPLACE else ''} per record; the error is in "
            "ranks of each split's records and no value bound is published; the values are sorted"
        )
        errors: list[float | None] = [None] * len(per_group)
        outputs = [
            Output(f"{agg.name}_{quantile_label(q)}", [values[i] for values in per_group], errors, note)
            for i, q in enumerate(agg.qs)
        ]
        return outputs, [group_privacy(eps, step.unit_cost)]

    def present_values(self, agg: AggregateIR, step: PlanStep) -> list[NDArray[np.float64]]:
        """Per output group, the bounded values of the statistic's column (missing ones left out)."""
        groups = self._values_by_group(self.view(self.step_rows(step)), [agg.columns[0]])
        return [g[:, 0][~np.isnan(g[:, 0])] for g in groups]

    def _public_n_statistic(
        self, agg: AggregateIR, count_step: PlanStep, value_step: PlanStep, *, q: Fraction | None = None
    ) -> tuple[Output, list[PrivacyLoss]]:
        """A noisy count as the public n, then the statistic on the values resized to that n.

        Step 1 (global sensitivity, Laplace): n^ = round(noisy count of present values) clamped to
        [1, the public cap] (``public_size``), a release followed by post-processing. Step 2 runs on
        the values resized to n^ (``sensitivity.public_n``: padding with L and U or trimming
        alternately, so one added or removed record is at most one replacement): smooth sensitivity
        (Cauchy noise), inverse sensitivity, or Propose-Test-Release, at the step's ε / M per call of
        ``step.changes_per_call`` record changes, so group privacy over the step's ``record_cost`` calls gives
        the step's loss for a unit, also when a replaced unit leaves one public group while its replacement
        enters another (``query._planner_rules.unit_record_cost``). Each public group has its own n^. The order
        statistic's rank is ceil(q n^) (the median rank (n^ + 1) // 2), the trimmed mean trims floor(t n^) at
        each end.
        """
        low, high = inward_interval(*agg.bounds[0])
        groups: list[NDArray[np.float64] | RankedValues]
        if self._reads_by_rank(agg, value_step):
            groups = [self._ranked_values(agg, value_step, (low, high))]
        else:
            groups = [*self.present_values(agg, value_step)]
        noisy = additive_noise(count_step, np.array([x.size for x in groups], dtype=np.float64))
        cap = public_size_cap(self.max_collect_rows, value_step.mechanism)
        public_ns = [public_size(float(v), cap) for v in np.atleast_1d(noisy.value)]
        values: list[Any] = []
        notes: set[str] = set()
        for x, n in zip(groups, public_ns, strict=True):
            value, note = self._resized_release(agg, value_step, x, n, (low, high), q)
            values.append(value)
            notes.add(note)
        note = (
            f"{value_step.mechanism} on the values resized to the released noisy count n^; the noise scale "
            "depends on the data, so no error bound is published. " + " ".join(sorted(notes))
        ).strip()
        post = [f"the noisy count rounded to an integer in [1, {cap}] and used as the public n"]
        return Output(agg.name, values, [None] * len(values), note, post), [noisy.loss, value_step.loss]

    def _reads_by_rank(self, agg: AggregateIR, step: PlanStep) -> bool:
        """An ungrouped smooth quantile reads only a window of ranks (the engine's distributed selection)."""
        return (
            self.group_column is None
            and agg.kind in (AggregateKind.MEDIAN, AggregateKind.QUANTILE)
            and step.mechanism.family is Family.SMOOTH
        )

    def _ranked_values(self, agg: AggregateIR, step: PlanStep, bounds: tuple[float, float]) -> RankedValues:
        view = self.view(self.step_rows(step))
        column = agg.columns[0]
        (row,) = self.engine.group_aggregates(
            view, group_column=None, keys=None, aggregates=[count_present(column, "present")]
        )
        return _EngineRanks(self.engine, view, column, bounds, row.counts["present"])

    def _resized_release(
        self,
        agg: AggregateIR,
        step: PlanStep,
        x: NDArray[np.float64] | RankedValues,
        n: int,
        bounds: tuple[float, float],
        q: Fraction | None,
    ) -> tuple[float | None, str]:
        eps, changes = step.mechanism_epsilon, step.changes_per_call
        mechanism = step.mechanism
        if mechanism.family is Family.PTR:
            eps_r, delta_r = ptr_record_budget(step)
            common: dict[str, Any] = {
                "bounds": bounds,
                "proposed_bound": _proposed(agg),
                "epsilon_test": eps_r / 2,
                "epsilon_release": eps_r / 2,
                "delta": delta_r,
                "adjacency": Adjacency.ADD_REMOVE,
                "public_n": n,
            }
            if agg.kind is AggregateKind.TRIMMED_MEAN:
                answer = mech.ptr_trimmed_mean(_array(x), trim=_trim(agg, n), **common)
            else:
                answer = mech.ptr_order_statistic(_array(x), rank=_rank(q, n), **common)
            check_result_loss(answer, ApproxDP(eps_r, delta_r), step)
            value = None if isinstance(answer, mech.Refusal) else float(answer.value)
            return value, ptr_note(answer)
        if mechanism.family is Family.SMOOTH:
            shared: dict[str, Any] = {
                "bounds": bounds,
                "noise": "cauchy",
                "epsilon": eps,
                "adjacency": Adjacency.ADD_REMOVE,
                "public_n": n,
                "max_records_per_unit": changes,
                "constant_work": self.constant_work,
            }
            if agg.kind is AggregateKind.TRIMMED_MEAN:
                result = mech.smooth_trimmed_mean(_array(x), trim=_trim(agg, n), **shared)
            else:
                result = mech.smooth_quantile(x, rank=_rank(q, n), **shared)
            check_result_loss(result, PureDP(eps), step)
            return float(result.value), ""
        if mechanism is Mechanism.INVERSE_SENSITIVITY_TRIMMED_MEAN:
            resized = resize_to_public_n(_array(x), public_n=n, bounds=bounds)
            result = mech.inverse_sensitivity_trimmed_mean(resized, trim=_trim(agg, n), bounds=bounds, epsilon=eps)
            check_result_loss(result, PureDP(eps), step)
            return float(result.value), ""
        raise InternalError(f"{mechanism!r} does not run on a public n")

    def min_distance(self, agg: AggregateIR, step: PlanStep) -> tuple[Output, list[PrivacyLoss]]:
        low, high = inward_interval(*agg.bounds[0])
        points = self._values_by_group(self.view(self.step_rows(step)), list(agg.columns))[0]
        points = points[~np.isnan(points).any(axis=1)]
        eps = step.mechanism_epsilon
        if step.mechanism is Mechanism.PTR_MIN_DISTANCE:
            eps_r, delta_r = ptr_record_budget(step)
            answer = mech.ptr_min_distance(
                points,
                box=(low, high),
                proposed_bound=_proposed(agg),
                epsilon_test=eps_r / 2,
                epsilon_release=eps_r / 2,
                delta=delta_r,
                adjacency=Adjacency.ADD_REMOVE,
            )
            check_result_loss(answer, ApproxDP(eps_r, delta_r), step)
            value = None if isinstance(answer, mech.Refusal) else float(answer.value)
            return Output(agg.name, [value], [None], ptr_note(answer)), [step.loss]
        if step.mechanism is Mechanism.SMOOTH_MIN_DISTANCE:
            result = mech.smooth_min_distance(
                points, box=(low, high), adjacency=Adjacency.ADD_REMOVE, epsilon=eps, constant_work=self.constant_work
            )
        else:
            result = mech.inverse_sensitivity_min_distance(
                points, box=(low, high), epsilon=eps, adjacency=Adjacency.ADD_REMOVE
            )
        check_result_loss(result, PureDP(eps), step)
        note = f"{step.mechanism}: the noise scale depends on the data, so no error bound is published"
        return Output(agg.name, [float(result.value)], [None], note), [group_privacy(eps, step.unit_cost)]

    def select_keys(self, step: PlanStep) -> tuple[list[Any], PrivacyLoss]:
        """The grouping's keys by private partition selection (``mechanisms.partition_selection``).

        Candidates are the keys present in the rows bounded to ``max_groups_per_unit`` keys per unit
        (value combinations, tuples, for several group columns); each is kept iff its distinct-unit
        count plus discrete Laplace noise reaches the public threshold. A key with a NULL (in any
        column) is never a candidate. The kept keys are sorted by value, a public order; they are a
        release, so the later steps use them as public keys.
        """
        if self.group_column is None or step.max_groups_per_unit is None or not isinstance(step.loss, ApproxDP):
            raise InternalError("partition selection without a grouping, a group bound or δ")
        rows = self.engine.group_aggregates(
            self.view(ALL_ROWS), group_column=self.group_column, keys=None, aggregates=[count_units("units")]
        )
        candidates = [(r.key, r.counts["units"]) for r in rows if not _has_null(r.key)]
        chosen = mech.select_partitions(
            np.array([c for _, c in candidates], dtype=np.int64),
            max_partitions_per_unit=step.max_groups_per_unit,
            replace=self.plan.adjacency is Adjacency.REPLACE,
            epsilon=step.mechanism_epsilon,
            delta=step.loss.delta,
        )
        kept = [key for (key, _), keep in zip(candidates, chosen.keep, strict=True) if keep]
        return sorted(kept, key=_key_order), chosen.loss

    def trimmed_mean(self, agg: AggregateIR, steps: list[PlanStep]) -> tuple[Output, list[PrivacyLoss]]:
        """A noisy count as the public n, then the floor(t n^)-trimmed mean (``_public_n_statistic``)."""
        by_part = {s.part: s for s in steps}
        return self._public_n_statistic(agg, by_part[StepPart.COUNT], by_part[StepPart.VALUE])

    def triangle_count(self, agg: AggregateIR, step: PlanStep) -> tuple[Output, list[PrivacyLoss]]:
        """Triangles of the graph on the public vertex set whose edges are the bounded rows (edge-level DP).

        Each kept row is an undirected edge; rows with an endpoint outside the public vertex set, self
        loops and repeated edges are dropped (a rule on each row alone), so one unit changes at most C
        edges (2C under replace: the step's ``record_cost``). The mechanism runs edge-level at
        ε / record_cost: group privacy.
        """
        vertices = [self.engine_key(v) for v in agg.keys or ()]
        index = {v: i for i, v in enumerate(vertices)}
        view = self.view(self.step_rows(step))
        data = self.engine.collect(view, columns=list(agg.columns), max_rows=self.max_collect_rows)
        src, dst = (data[c] for c in agg.columns)
        pairs = {
            (min(a, b), max(a, b))
            for a, b in ((index.get(_scalar(u)), index.get(_scalar(w))) for u, w in zip(src, dst, strict=True))
            if a is not None and b is not None and a != b
        }
        edges = np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)
        graph = UndirectedGraph(edges, num_vertices=max(len(vertices), 1))
        eps = step.mechanism_epsilon
        top = float(math.comb(len(vertices), 3))
        if step.mechanism is Mechanism.PTR_TRIANGLE_COUNT:
            eps_r, delta_r = ptr_record_budget(step)
            answer = mech.ptr_triangle_count(
                graph,
                privacy_unit="edge",
                proposed_bound=_proposed(agg),
                epsilon_test=eps_r / 2,
                epsilon_release=eps_r / 2,
                delta=delta_r,
                count_bound=top,
            )
            check_result_loss(answer, ApproxDP(eps_r, delta_r), step)
            value = None if isinstance(answer, mech.Refusal) else float(answer.value)
            return Output(agg.name, [value], [None], ptr_note(answer)), [step.loss]
        if step.mechanism is Mechanism.SMOOTH_TRIANGLE_COUNT:
            result = mech.smooth_triangle_count(
                graph, privacy_unit="edge", epsilon=eps, constant_work=self.constant_work, count_bound=top
            )
        else:
            result = mech.inverse_sensitivity_triangle_count(graph, privacy_unit="edge", count_bound=top, epsilon=eps)
        check_result_loss(result, PureDP(eps), step)
        note = f"{step.mechanism} (edge-level); the noise scale depends on the data, so no error bound is published"
        loss = group_privacy(eps, step.unit_cost)
        return Output(agg.name, [float(result.value)], [None], note), [loss]


def _stacked(data: dict[str, NDArray[Any]], columns: list[str]) -> NDArray[np.float64]:
    """The collected ``columns`` as the columns of one float64 array (one column: a view, no copy)."""
    if len(columns) == 1:
        return np.asarray(data[columns[0]], dtype=np.float64).reshape(-1, 1)
    return np.column_stack([np.asarray(data[c], dtype=np.float64) for c in columns])


def split_by_key(
    labels: Sequence[NDArray[Any]], rows: NDArray[np.float64], keys: Sequence[Any]
) -> list[NDArray[np.float64]]:
    """``rows`` split by their group labels, one array per public key in order (empty for an absent key).

    ``labels`` holds one array per group column; with one column a key is a value, with several a
    tuple of values in that column order. ``Engine.collect`` returns rows sorted by the group columns,
    so each group is one run: the runs are found in one pass (where any label changes) and looked up
    by key, instead of a mask over every row per key (1 000 groups over 10^7 rows took seconds). Rows
    keep their order. Should the labels not come sorted, a key in two runs, the masks are used (same
    result).
    """
    size = rows.shape[0]
    if size == 0:
        return [rows[:0] for _ in keys]
    changed = np.zeros(size - 1, dtype=bool)
    for column in labels:
        changed |= column[1:] != column[:-1]
    starts = np.concatenate(([0], np.flatnonzero(changed) + 1, [size]))
    several = len(labels) > 1

    def key_at(i: int) -> Any:
        return tuple(_scalar(column[i]) for column in labels) if several else _scalar(labels[0][i])

    runs = {key_at(int(a)): (a, b) for a, b in itertools.pairwise(starts)}
    if len(runs) != len(starts) - 1:
        return [rows[_matching(labels, key if several else (key,))] for key in keys]
    empty = rows[:0]
    return [rows[runs[key][0] : runs[key][1]] if key in runs else empty for key in keys]


def _matching(labels: Sequence[NDArray[Any]], key: tuple[Any, ...]) -> NDArray[np.bool_]:
    mask = np.ones(labels[0].shape[0], dtype=bool)
    for column, value in zip(labels, key, strict=True):
        mask &= np.asarray(column == value)
    return mask


def _has_null(key: Any) -> bool:
    return key is None or (isinstance(key, tuple) and any(v is None for v in key))


def _key_order(key: Any) -> Any:
    """A public order of selected keys: by type name, then value (part by part for tuples)."""
    parts = key if isinstance(key, tuple) else (key,)
    return tuple((type(v).__name__, v) for v in parts)


def _candidates(agg: AggregateIR, step: PlanStep) -> tuple[float, float, bool, bool]:
    """The clip [low, high] of an order statistic and its candidates: integers, decimal points (public facts)."""
    low, high = inward_interval(*agg.bounds[0])
    em = step.mechanism is Mechanism.EM_QUANTILE
    integers = agg.integer_candidates and em
    # a numeric column: the points of the decimal grids of [L, U] join the cells (the bounds alone decide)
    points = em and not integers and bool(point_grids((low, high)))
    return low, high, integers, points


def order_rank_note(agg: AggregateIR, step: PlanStep, adjacency: Adjacency) -> str:
    """The public rank accuracy of an order statistic released without a public n (EM, inverse sensitivity).

    From public facts only (ε, adjacency, the bounds and the candidates), so a forecast states it before
    the release and the release states it again.
    """
    q = Fraction(1, 2) if agg.kind is AggregateKind.MEDIAN else agg.q
    if q is None:
        raise InternalError("a quantile without q")
    low, high, integers, points = _candidates(agg, step)
    if agg.step is not None and step.mechanism is Mechanism.EM_QUANTILE:
        return _rank_note(step, q, step.mechanism_epsilon, adjacency, None, recorded=(agg.step, (low, high)))
    return _rank_note(step, q, step.mechanism_epsilon, adjacency, (low, high) if integers else None, points=points)


def _rank_note(
    step: PlanStep,
    q: Fraction,
    eps: Fraction,
    adjacency: Adjacency,
    integer_bounds: tuple[float, float] | None,
    *,
    points: bool = False,
    recorded: tuple[DecimalStep, tuple[float, float]] | None = None,
) -> str:
    """The public rank accuracy of an EM or inverse-sensitivity order statistic (Dwork-Roth Thm 3.11)."""
    em = step.mechanism is Mechanism.EM_QUANTILE
    em_adjacency = adjacency if em and adjacency is Adjacency.ADD_REMOVE else None
    sens = utility_sensitivity(q, em_adjacency, fitted=points) if em else 1  # points: decimal grids beside the cells
    count: float
    if recorded is not None:
        grid, first, last = step_candidates(recorded[1], recorded[0])
        count, cells = last - first + 1, f"K = {last - first + 1} points of the declared step {grid.text()}"
    elif integer_bounds is not None:
        first, last = integer_candidates(integer_bounds)
        count, cells = last - first + 1, f"K = {last - first + 1} integer candidates"
    elif points:
        count = rank_slack_candidates(DEFAULT_RESOLUTION, points=True)
        cells = "K = 2^32 public cells and the decimal points of the bounds"
    else:
        count, cells = DEFAULT_RESOLUTION, "K = 2^32 public cells"
    rank_error = 2.0 * float(sens) / float(eps) * math.log(count / (1 - CONFIDENCE))
    return (
        f"{step.mechanism}: its error is in ranks, not value units: with probability {CONFIDENCE:g} the "
        f"released value lies between the records ranked {rank_error:,.0f} below and above the target rank "
        f"(2Δu/ε ln(K/β) with Δu = {sens}, ε = {float(eps):.4g} per record and {cells}; Dwork-Roth Thm 3.11)"
    )


class _EngineRanks:
    """The clipped values of one column of a bounded view, read by rank (``Engine.order_statistics_window``).

    The engine selects order statistics without sending the column to the driver (DuckDB: a window
    over the sorted view; Spark: distributed selection); the count of present values is the one the
    noisy count releases, so ranks 1..size are exactly the values the collected column would hold.
    """

    def __init__(
        self, engine: ReleaseEngine, view: BoundedView, column: str, bounds: tuple[float, float], size: int
    ) -> None:
        self._engine, self._view, self._column = engine, view, column
        self._bounds = bounds
        self._size = size

    @property
    def size(self) -> int:
        """The number of present values in the view."""
        return self._size

    def ranks(self, first: int, last: int) -> NDArray[np.float64]:
        """The sorted clipped values of ranks ``first..last`` (1-based, inclusive)."""
        center = (first + last) // 2
        width = max(center - first, last - center)
        low, high = self._bounds
        window = self._engine.order_statistics_window(
            self._view, column=self._column, low=low, high=high, rank=center, width=width
        )
        keep = (window.ranks >= first) & (window.ranks <= last)
        return window.values[keep]


#: The largest public n a statistic resizes its values to: 2^25 values (256 MiB of float64). The noisy
#: count's tail at a tiny ε would otherwise ask for an array no machine holds, a failure after data
#: access (docs/design.md invariant 6); clamping a released count to a public constant is post-processing.
MAX_PUBLIC_SIZE = 1 << 25
#: Lower caps for mechanisms whose work grows faster than n log n: the inverse-sensitivity trimmed mean
#: is quadratic in n (1 s at 2^15 values on this project's test machine). Above the cap the values are
#: resized to the cap, i.e. the extremes are trimmed alternately (``sensitivity.public_n``).
_SIZE_CAPS: dict[str, int] = {Mechanism.INVERSE_SENSITIVITY_TRIMMED_MEAN: 1 << 15}


def public_size_cap(collect_bound: int | None, mechanism: str = "") -> int:
    """The public cap on n^: the policy's population x C when known, at most the mechanism's size cap.

    No view of a registered snapshot holds more than population x C values; the size cap is 2^25, or
    2^15 for the quadratic inverse-sensitivity trimmed mean.
    """
    top = _SIZE_CAPS.get(mechanism, MAX_PUBLIC_SIZE)
    return top if collect_bound is None else max(1, min(collect_bound, top))


def public_size(noisy_count: float, cap: int) -> int:
    """n^: the noisy count rounded and clamped to [1, cap] (post-processing; any finite or infinite value)."""
    if not noisy_count < cap:  # also +inf and NaN: the public cap
        return cap
    if not noisy_count > 1:  # also -inf
        return 1
    return max(1, round(noisy_count))


def _array(values: NDArray[np.float64] | RankedValues) -> NDArray[np.float64]:
    """The collected values (only the smooth quantile reads by rank)."""
    if isinstance(values, RankedValues):
        raise InternalError("this mechanism needs the collected values, not values by rank")
    return values


def _scalar(value: Any) -> Any:
    """A numpy scalar as the Python value the public vertex keys use."""
    return value.item() if isinstance(value, np.generic) else value


def _trim(agg: AggregateIR, n: int) -> int:
    if agg.trim_fraction is None:
        raise InternalError("a trimmed mean without a trim fraction")
    return math.floor(agg.trim_fraction * n)


def _rank(q: Fraction | None, n: int) -> int:
    """The target rank on the public n: the median rank (n + 1) // 2, else max(1, ceil(q n))."""
    if q is None:
        raise InternalError("an order statistic without q")
    return (n + 1) // 2 if q == Fraction(1, 2) else max(1, math.ceil(q * n))


def _proposed(agg: AggregateIR) -> Fraction:
    if agg.proposed_bound is None:  # the builder refuses a PTR mechanism without one
        raise InternalError(f"PTR for {agg.name!r} without a proposed bound")
    return agg.proposed_bound
