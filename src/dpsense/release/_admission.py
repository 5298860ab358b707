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
  for every n^;
* partition selection: ``mechanisms.partition_selection.check_selection_parameters`` (its discrete
  Laplace scale);
* the public range every step's arithmetic is exact or finite in (``_admit_public_range``): ε per release
  and per record call in [2^-300, 2^40], δ at least 2^-300, declared or overridden bounds within ±2^1000
  (±2^400 for a variance, ±2^480 for the minimum distance) and, unless both are 0, reaching at least
  2^-900 in magnitude (the exact sums' grid), L < U for the statistics that divide by or scale with the
  bounds' width, and a data-dependent step's width over its ε per call at most 2^900. Beyond these,
  float calibrations overflow or underflow, exact samplers' acceptance steps stop accepting, and a
  sum's fixed-point grid leaves its exponent range: failures after data access that this step turns
  into refusals.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import InvalidBounds, InvalidPrivacyParameter
from dpsense.core.privacy_loss import ApproxDP
from dpsense.engine import TableInfo, check_group_keys, check_predicates, predicate
from dpsense.mechanisms.gaussian import gaussian_scale_ok
from dpsense.mechanisms.laplace import laplace_scale_ok
from dpsense.mechanisms.partition_selection import check_selection_parameters
from dpsense.mechanisms.ptr import check_plan_parameters, ptr_distance_cap
from dpsense.noise import exact
from dpsense.query import AggregateIR, AggregateKind, Family, Mechanism, Plan, PlanStep, QueryIR, StepPart
from dpsense.release._executor import engine_keys
from dpsense.statistics import STATISTICS
from dpsense.statistics._steps import _sensitivity, ptr_record_budget

M = Mechanism
#: ε of a release, and of each call a data-dependent step makes (ε / its record cost M), at least 2^-300 ...
EPSILON_FLOOR = Fraction(1, 2**300)
#: ... and at most 2^40 (about 1.1e12): beyond, exponential weights are a point mass in float and exact
#: acceptance steps (exp(-huge)) never accept.
EPSILON_CEILING = Fraction(2**40)
#: δ of a step that spends it, at least 2^-300 (the exact Gaussian calibration's search stalls below).
DELTA_FLOOR = Fraction(1, 2**300)
#: Bounds within ±2^1000: their width and midpoint stay finite doubles (the noise scales have their own
#: limits: ``grid.MAX_NOISE_EXPONENT``, ``MAX_DATA_DEPENDENT_SCALE``) ...
MAX_BOUND = Fraction(2**1000)
#: ... within ±2^400 for a variance (its squares, 2^800 a row, stay finite) ...
VARIANCE_MAX_BOUND = Fraction(2**400)
#: ... and within ±2^480 for the minimum distance (``sensitivity.closest_pair``'s exact coordinates).
POINT_MAX_BOUND = Fraction(2**480)
#: A smooth, inverse-sensitivity or PTR step's noise scales with (U - L) / (ε per call): at most 2^900, so its
#: heavy-tailed draws (up to 2^64 scales) stay finite.
MAX_DATA_DEPENDENT_SCALE = Fraction(2**900)
#: The largest |bound| at least 2^-900 (or both bounds 0): an exact sum's grid 2^(e - 40) stays above 2^-1000.
MIN_BOUND = Fraction(1, 2**900)
#: Statistics whose release divides by or scales with the bounds' width (U - L): refused for L = U.
_NEEDS_WIDTH = frozenset(
    {AggregateKind.MEAN, AggregateKind.VARIANCE, AggregateKind.TRIMMED_MEAN, AggregateKind.MIN_DISTANCE}
)
_WIDTH_FAMILIES = frozenset({Family.SMOOTH, Family.INVERSE_SENSITIVITY, Family.PTR})
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
    _admit_public_range(ir, plan)
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
        elif step.part is StepPart.KEYS:
            check_selection_parameters(
                max_partitions_per_unit=step.max_groups_per_unit or 1,
                replace=plan.adjacency is Adjacency.REPLACE,
                epsilon=step.mechanism_epsilon,
            )


def _admit_public_range(ir: QueryIR, plan: Plan) -> None:
    """ε, δ and bounds inside the range every step's arithmetic holds in (the module docstring's last rule)."""
    for step in plan.steps:
        for what, eps in (("ε", step.loss.epsilon), ("ε per record call", step.mechanism_epsilon)):
            if not EPSILON_FLOOR <= eps <= EPSILON_CEILING:
                too_small = eps < EPSILON_FLOOR
                raise InvalidPrivacyParameter(
                    f"{what} of {step.output!r} must lie in [2^-300, 2^40] (about 4.9e-91 to 1.1e12): beyond, the"
                    " release's calibrations leave the doubles",
                    {"output": step.output, "epsilon": float(eps)},
                    "ask for a larger epsilon (a data-dependent statistic runs at ε over its record cost: a smaller"
                    " max_rows_per_unit or max_groups_per_unit raises it)"
                    if too_small
                    else "ask for a smaller epsilon (at 2^40 a release is already the exact value to float precision)",
                )
        if isinstance(step.loss, ApproxDP) and 0 < step.loss.delta < DELTA_FLOOR:
            raise InvalidPrivacyParameter(
                f"δ of {step.output!r} must be at least 2^-300 (about 4.9e-91)",
                {"output": step.output, "delta": float(step.loss.delta)},
                "ask for a larger delta (1e-12 is already far below 1/n for any n)",
            )
    for agg in ir.aggregates:
        steps = [s for s in plan.steps if s.output == agg.name]
        for column, (low, high) in zip(agg.columns, agg.bounds, strict=False):
            _admit_bounds(agg, steps, column, low, high)


def _admit_bounds(agg: AggregateIR, steps: list[PlanStep], column: str, low: Fraction, high: Fraction) -> None:
    given = (float(low), float(high))
    largest = max(abs(low), abs(high))
    limit, why = MAX_BOUND, "the bounds' width and midpoint must stay finite doubles"
    if agg.kind is AggregateKind.VARIANCE:
        limit, why = VARIANCE_MAX_BOUND, "a variance sums the squares of its values"
    elif agg.kind is AggregateKind.MIN_DISTANCE:
        limit, why = POINT_MAX_BOUND, "the closest pair's exact distances hold coordinates up to 2^480"
    if largest > limit:
        raise InvalidBounds(
            f"the bounds of {column!r} for {agg.name!r} must lie within ±{float(limit):.3g}: {why}",
            given,
            "declare or pass bounds that cover the values a steward expects, not the doubles' range",
        )
    if 0 < largest < MIN_BOUND:
        raise InvalidBounds(
            f"the bounds of {column!r} for {agg.name!r} must reach at least 2^-900 in magnitude (or both be 0): an"
            " exact sum's fixed-point grid cannot be finer than 2^-1000",
            given,
            "rescale the column (e.g. to micro-units) and its bounds",
        )
    calibrated = [s for s in steps if s.mechanism.family in _WIDTH_FAMILIES]
    if low == high and (agg.kind in _NEEDS_WIDTH or calibrated):
        raise InvalidBounds(
            f"the bounds of {column!r} for {agg.name!r} are the single point {given[0]:g}: every value clips to it,"
            f" and this {agg.kind.value} scales with the bounds' width",
            given,
            "declare or pass bounds L < U that cover the values",
        )
    for step in calibrated:  # noise on the value scale: up to the width over the ε each call runs at
        if (high - low) / step.mechanism_epsilon > MAX_DATA_DEPENDENT_SCALE:
            raise InvalidPrivacyParameter(
                f"the {step.mechanism} noise of {agg.name!r} may reach the bounds' width over ε per record call,"
                " beyond 2^900 here: its draws would overflow the doubles",
                {
                    "output": agg.name,
                    "width": float(high - low),
                    "epsilon per record call": float(step.mechanism_epsilon),
                },
                "ask for a larger epsilon or declare narrower bounds",
            )


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
        check_group_keys(table, column, list(engine_keys(keys, engine_key)))


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
