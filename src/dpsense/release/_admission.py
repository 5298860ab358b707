"""Admission: refuse, before the ledger is touched, every release a public limit would stop after reading.

docs/design.md invariant 6: what can be judged from the query, the schema and the parameters is judged here,
with an error naming the rule and the fix, and nothing is charged. Each rule has one home, below the
release layer, used both here and by the step that would trip it (which keeps its check as defence
in depth but can no longer trip on an admitted release):

* filters: the engine's own predicate checks (``dpsense.engine.predicate`` for literal widths,
  ``dpsense.engine.check_predicates`` for literal kinds against the declared column kinds);
* additive noise: the exact samplers' scale limits (``noise.exact.geometric_scale_ok``,
  ``mechanisms.laplace.laplace_scale_ok``, ``mechanisms.gaussian.gaussian_scale_ok``), checked at
  the largest number of groups the release can have (the scale grows with it);
* PTR: ``mechanisms.ptr.check_plan_parameters`` on the per-record (ε_r / 2, δ_r) the executor runs
  the test and the release at, and a work limit: the distance scan may take up to
  ``ptr_distance_cap(ε_r / 2, δ_r)`` steps (about 20 / ε_test), refused above ``MAX_PTR_SCAN`` so no
  admitted release scans for hours after the charge. None of these limits depends on n, so they hold
  for every n^.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dpsense.core.errors import InvalidPrivacyParameter
from dpsense.core.privacy_loss import ApproxDP
from dpsense.engine import TableInfo, check_group_keys, check_predicates, predicate
from dpsense.mechanisms.gaussian import gaussian_scale_ok
from dpsense.mechanisms.laplace import laplace_scale_ok
from dpsense.mechanisms.ptr import check_plan_parameters, ptr_distance_cap
from dpsense.noise import exact
from dpsense.query import AggregateKind, Family, Mechanism, Plan, PlanStep, QueryIR, StepPart
from dpsense.statistics import STATISTICS
from dpsense.statistics._steps import _sensitivity, ptr_record_budget

M = Mechanism
_FIX = "ask for a larger epsilon (or, for a grouped release, fewer public keys)"
#: The most distances a release's PTR scan may evaluate (the public cap of ``ptr_distance_cap``): 2^20.
MAX_PTR_SCAN = 1 << 20


def admit(
    ir: QueryIR,
    plan: Plan,
    *,
    table: TableInfo,
    population: int | None,
    engine_key: Callable[[Any], Any],
) -> None:
    """Raise a ``UsageError`` for any public limit the release would trip after data access."""
    _admit_filters(ir, table, engine_key)
    _admit_keys(ir, table, engine_key)
    groups = _max_groups(ir, plan, population)
    aggregates = {a.name: a for a in ir.aggregates}
    for step in plan.steps:
        if step.mechanism.is_global:
            agg = aggregates.get(step.output)
            for run in [step] if agg is None else STATISTICS[agg.kind].noise_steps(agg, step):
                _admit_additive(run, groups)
        elif step.mechanism.family is Family.PTR and step.part is StepPart.VALUE:
            _admit_ptr(ir, plan, step)


def _admit_filters(ir: QueryIR, table: TableInfo, engine_key: Callable[[Any], Any]) -> None:
    where = []
    for f in ir.filters:
        values = f.value if isinstance(f.value, tuple) else (f.value,)
        bound = [engine_key(v) for v in values]
        where.append(predicate(f.column, f.op.value, bound if f.op.value == "in" else bound[0]))
    check_predicates(table, where)


def _admit_keys(ir: QueryIR, table: TableInfo, engine_key: Callable[[Any], Any]) -> None:
    """Refuse public keys the group column's type cannot hold (``engine.check_group_keys``), before the charge."""
    lists: list[tuple[str, tuple[Any, ...]]] = [(g.column, g.keys) for g in ir.group_by if g.keys is not None]
    lists += [(a.columns[0], a.keys) for a in ir.aggregates if a.kind is AggregateKind.HISTOGRAM and a.keys is not None]
    for column, keys in lists:
        check_group_keys(table, column, [engine_key(k) for k in keys])


def _max_groups(ir: QueryIR, plan: Plan, population: int | None) -> int | None:
    """The most values an additive step adds noise to: the public keys, else what key selection can keep.

    Selected keys are distinct values some unit holds: at most population x (groups per unit).
    ``None`` when no public bound exists (no population declared).
    """
    if ir.group_by:
        public = ir.public_groups
        if public is not None:
            return public
        selection = next((s for s in plan.steps if s.part is StepPart.KEYS), None)
        per_unit = None if selection is None else (selection.max_groups_per_unit or selection.max_rows_per_unit)
        return None if population is None or per_unit is None else max(1, population * per_unit)
    return ir.public_groups or 1


def _admit_additive(step: PlanStep, groups: int | None) -> None:
    sens = _sensitivity(step)
    eps = step.loss.epsilon
    dims = sorted({1, groups or 1})
    if step.mechanism in (M.GEOMETRIC, M.APPROX_BOUNDS):  # approx_bounds is a geometric histogram
        ok = exact.geometric_scale_ok(sens, eps)
    elif step.mechanism is M.LAPLACE:
        ok = all(laplace_scale_ok(sensitivity=sens, epsilon=eps, dimension=d) for d in dims)
    else:
        delta = step.loss.delta if isinstance(step.loss, ApproxDP) else 0
        ok = all(gaussian_scale_ok(sensitivity=sens, epsilon=eps, delta=delta, dimension=d) for d in dims)
    if not ok:
        raise InvalidPrivacyParameter(
            f"the {step.mechanism} noise of {step.output!r} at this ε has a scale beyond the exact sampler's "
            "2^52 grid steps (sensitivity / ε too large, or not representable with a small numerator)",
            {"output": step.output, "epsilon": float(eps), "sensitivity": float(sens)},
            _FIX + ("; for geometric, a decimal ε with few digits such as 0.3" if step.mechanism != "laplace" else ""),
        )


def _admit_ptr(ir: QueryIR, plan: Plan, step: PlanStep) -> None:
    agg = next(a for a in ir.aggregates if a.name == step.output)
    eps_r, delta_r = ptr_record_budget(step)  # the step's record cost M (query._planner_rules.unit_record_cost)
    check_plan_parameters(
        epsilon_test=eps_r / 2,
        epsilon_release=eps_r / 2,
        delta=delta_r,
        proposed_bound=agg.proposed_bound if agg.proposed_bound is not None else 1,
    )
    if ptr_distance_cap(eps_r / 2, delta_r) > MAX_PTR_SCAN:
        raise InvalidPrivacyParameter(
            "Propose-Test-Release at this ε would scan up to ~20/epsilon_test distances after the charge "
            f"(epsilon_test = ε / (2 x {step.unit_cost}) per record here), more than the release system's "
            f"limit of {MAX_PTR_SCAN}",
            {"output": step.output, "epsilon_test": str(eps_r / 2)},
            "ask for a larger epsilon, or a smaller contribution bound, or omit mechanism= for a pure ε-DP default",
        )
