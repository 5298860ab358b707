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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dpsense.accounting import compose_basic
from dpsense.core.errors import InternalError, UnsupportedRequest
from dpsense.core.memo import IdentityMemo
from dpsense.core.privacy_loss import PrivacyLoss
from dpsense.engine import (
    BoundedView,
    GroupColumns,
    GroupRow,
    Predicate,
    ReleaseEngine,
    predicate,
)
from dpsense.query import AggregateIR, AggregateKind, Plan, PlanStep, QueryIR, StepPart
from dpsense.release._data_dependent import DataDependentSteps
from dpsense.statistics import STATISTICS
from dpsense.statistics._steps import (
    Output,
)


@dataclass
class Executed:
    """The noisy result of a plan, with the realised loss of every step (for the charge check).

    ``group_column`` is the grouping's column, or a tuple of several whose ``keys`` are tuples.
    """

    group_column: GroupColumns | None
    keys: list[Any] | None
    outputs: list[Output]
    realised: list[PrivacyLoss]

    @property
    def total_loss(self) -> PrivacyLoss:
        """Basic composition of the realised step losses (Dwork-Roth Thm 3.16)."""
        return compose_basic(self.realised)


def check_executable(ir: QueryIR, plan: Plan) -> None:
    """Refuse, before any charge, what the executor cannot run (names the alternative)."""
    for agg in ir.aggregates:
        STATISTICS[agg.kind].check_executable(ir, agg, plan)
    if plan.public_n is not None and (
        ir.filters or ir.group_by or any(s.part is StepPart.VALUE and s.max_rows_per_unit != 1 for s in _means(plan))
    ):
        # sum / n with a public n is safe only when both neighbours have exactly n rows: replace adjacency,
        # one row per unit, the whole snapshot (``release._profile.public_units`` decides; this re-checks)
        raise UnsupportedRequest(
            "a public n holds only for an ungrouped, unfiltered mean with one row per unit",
            plan.public_n,
            "drop the filter or grouping, or bound the mean to max_rows_per_unit=1",
        )


def _means(plan: Plan) -> list[PlanStep]:
    return [s for s in plan.steps if s.statistic is AggregateKind.MEAN]


def execute(
    engine: ReleaseEngine,
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
    group_column, public_keys = _grouping(ir)
    if group_column is None and ir.aggregates[0].kind is AggregateKind.HISTOGRAM:  # released alone: keys as rows
        group_column, public_keys = ir.aggregates[0].columns[0], ir.aggregates[0].keys
    several = isinstance(group_column, tuple)

    keys = None if public_keys is None else engine_keys(public_keys, engine_key, several=several)
    where = [_predicate(f.column, f.op.value, f.value, engine_key) for f in ir.filters]
    runner = _Runner(
        engine,
        table,
        unit_column,
        salt,
        where,
        group_column,
        keys,
        ir.max_groups_per_unit,
        plan,
        constant_work=constant_work,
        engine_key=engine_key,
        max_collect_rows=max_collect_rows,
    )
    outputs: list[Output] = []
    realised: list[PrivacyLoss] = []
    released_keys: list[Any] | None = None if public_keys is None else list(public_keys)
    selection = next((s for s in plan.steps if s.part is StepPart.KEYS), None)
    if selection is not None:
        selected, loss = runner.select_keys(selection)
        listed = _listed_parts(ir, engine_key)
        if listed:  # columns with public keys: their unlisted values are dropped (post-processing of the selection)
            selected = [k for k in selected if all(k[j] in values for j, values in listed.items())]
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
    census = STATISTICS[ir.aggregates[0].kind].released_groups(ir, ir.aggregates[0])  # a census table: its nodes
    if census is not None:
        group_column, released_keys = census
    return Executed(group_column, released_keys, outputs, realised)


def engine_keys(keys: tuple[Any, ...], engine_key: Callable[[Any], Any], *, several: bool = False) -> tuple[Any, ...]:
    """Public keys as the engine binds them (each a tuple of values when ``several``), once per key tuple.

    A release converts the same declared keys for its admission and for its aggregates, and every
    release of the schema reads the same tuple: ``core.memo.IdentityMemo`` per conversion function.
    """
    memo = _ENGINE_KEYS.get((engine_key, several))
    if memo is None:

        def convert(values: tuple[Any, ...]) -> tuple[Any, ...]:
            if several:
                return tuple(tuple(engine_key(v) for v in key) for key in values)
            return tuple(engine_key(key) for key in values)

        memo = _ENGINE_KEYS.setdefault((engine_key, several), IdentityMemo(convert))
    return memo(keys)


_ENGINE_KEYS: dict[tuple[Callable[[Any], Any], bool], IdentityMemo[tuple[Any, ...], tuple[Any, ...]]] = {}


def _grouping(ir: QueryIR) -> tuple[GroupColumns | None, tuple[Any, ...] | None]:
    """The engine's grouping (a column, or a tuple of several) and its public keys (``None``: selected)."""
    columns = ir.group_columns
    if not columns:
        return None, None
    return (columns[0] if len(columns) == 1 else columns), ir.group_keys


def _listed_parts(ir: QueryIR, engine_key: Callable[[Any], Any]) -> dict[int, set[Any]]:
    """Position -> engine values of each group column that has public keys, in a grouping by several columns.

    Some other column has none (else the keys are public and nothing is selected), so the combinations
    are selected privately; a combination with an unlisted value of a listed column is then dropped.
    """
    if len(ir.group_by) < 2:
        return {}
    return {j: {engine_key(v) for v in g.keys} for j, g in enumerate(ir.group_by) if g.keys is not None}


def _predicate(column: str, op: str, value: Any, engine_key: Callable[[Any], Any]) -> Predicate:
    values = value if isinstance(value, tuple) else (value,)
    return predicate(column, op, [engine_key(v) for v in values] if op == "in" else engine_key(values[0]))


class _Runner(DataDependentSteps):
    """One release's bounded views, their prefetched aggregates and the data-dependent machinery.

    Every attribute is set at construction; the statistics (``dpsense.statistics``) run through it.
    """

    def __init__(
        self,
        engine: ReleaseEngine,
        table: str,
        unit: str,
        salt: bytes,
        where: Sequence[Predicate],
        group_column: GroupColumns | None,
        keys: Sequence[Any] | None,
        max_groups: int | None,
        plan: Plan,
        *,
        constant_work: int | None,
        engine_key: Callable[[Any], Any],
        max_collect_rows: int | None,
    ) -> None:
        self.engine, self.table, self.unit, self.salt, self.where = engine, table, unit, salt, where
        self.group_column, self.keys, self.max_groups, self.plan = group_column, keys, max_groups, plan
        self.views: dict[tuple[int, GroupColumns | None], BoundedView] = {}
        self.fetched_rows: dict[int, list[GroupRow]] = {}
        self.constant_work = constant_work
        self.max_collect_rows = max_collect_rows
        self.engine_key = engine_key

    def prefetch(self, ir: QueryIR) -> None:
        """One ``group_aggregates`` call per bounded view for every additive statistic (one scan, not k)."""
        wanted: dict[int, list[Any]] = {}
        for agg in ir.aggregates:
            steps = [s for s in self.plan.steps if s.output == agg.name]
            specs = STATISTICS[agg.kind].additive_specs(self, agg, steps)
            if specs is not None:
                wanted.setdefault(specs[0], []).extend(specs[1])
        for rows, aggregates in wanted.items():
            self.fetched_rows[rows] = self._groups(self.view(rows), aggregates)

    def fetched(self, agg: AggregateIR, steps: list[PlanStep]) -> list[GroupRow]:
        """The prefetched group aggregates of a global statistic (its view's one scan)."""
        specs = STATISTICS[agg.kind].additive_specs(self, agg, steps)
        if specs is None or specs[0] not in self.fetched_rows:
            raise InternalError(f"no prefetched aggregates for {agg.name!r}")
        return self.fetched_rows[specs[0]]

    def group_rows(self, step: PlanStep, aggregates: list[Any]) -> list[GroupRow]:
        """Group aggregates on the step's bounded view (a clip released by an earlier step of the statistic)."""
        return self._groups(self.view(self.step_rows(step)), aggregates)

    def view(self, rows: int, group_column: GroupColumns | None = None) -> BoundedView:
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
        """The output columns of one aggregate and their step losses: its statistic's run (``dpsense.statistics``)."""
        return STATISTICS[agg.kind].run(self, agg, steps)

    def _groups(self, view: BoundedView, aggregates: list[Any]) -> list[GroupRow]:
        return self.engine.group_aggregates(view, group_column=self.group_column, keys=self.keys, aggregates=aggregates)


#: Statistics whose steps collect the bounded rows to the driver (``Engine.collect``): the registry's ``collects``.
COLLECTING_KINDS = frozenset(kind for kind, stat in STATISTICS.items() if stat.collects)


def collect_bound(plan: Plan, population: int | None) -> int | None:
    """The public worst case of rows a release collects: population x the largest C of a collecting step.

    A collecting step is the value step of a collecting statistic or a clip step (an adaptive mean's
    approximate bounds read the column's values).

    ``None`` when no step collects or the population is unknown. A unit keeps at most C rows of a
    view, and the policy's population bounds the number of units (registration refuses a snapshot
    with more units: ``release._datasets.check_population``), so no view of a registered snapshot
    holds more rows; the engine's check stays as defence in depth.
    """
    rows = [
        s.max_rows_per_unit
        for s in plan.steps
        if (s.statistic in COLLECTING_KINDS and s.part is StepPart.VALUE) or s.part is StepPart.CLIP
    ]
    bounded = [r for r in rows if r is not None]
    if population is None or not bounded:
        return None
    return population * max(bounded)
