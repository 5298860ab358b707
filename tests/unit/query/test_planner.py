from __future__ import annotations

import re
from fractions import Fraction

import pytest

import dpsense.mechanisms as mechanisms
import dpsense.query as q
from dpsense.accounting import compose_basic
from dpsense.core.errors import InternalError, UnsupportedRequest, UsageError
from dpsense.core.privacy_loss import ApproxDP, PureDP
from dpsense.query import Family, Mechanism, Plan, Query, RecordCost, Schema, StepPart, assert_loss_equals
from dpsense.query._mechanisms import MECHANISMS
from dpsense.sensitivity import (
    Bounds,
    ContributionBound,
    Norm,
    centered_sum_sensitivity,
    count_rows_sensitivity,
    count_units_sensitivity,
    histogram_sensitivity,
    mean_private_n_plan,
    mean_sensitivity_public_n,
    sum_sensitivity,
)
from dpsense.statistics import ALLOWED_MECHANISMS, plan

ADJ = ("add_remove", "replace")


def build(schema: Schema, **aggs: q.Aggregate) -> q.QueryIR:
    return Query("events").agg(**aggs).build(schema)


def one(schema: Schema, agg: q.Aggregate, *, epsilon: object = 1, **kw: object) -> q.PlanStep:
    steps = plan(build(schema, a=agg), epsilon=epsilon, **kw).steps  # type: ignore[arg-type]
    assert len(steps) == 1
    return steps[0]


def test_every_named_mechanism_exists() -> None:
    names = {n for allowed in ALLOWED_MECHANISMS.values() for n in allowed}
    combined = {n for n in names if n.family is Family.COMBINED}
    assert combined == {Mechanism.ADAPTIVE_CLIP}  # a name for several steps' mechanisms, each of which exists
    assert names - combined <= set(mechanisms.__all__)
    assert set(MECHANISMS) == set(Mechanism) == names | {Mechanism.PARTITION_SELECTION}
    assert Mechanism.PARTITION_SELECTION.value == "partition_selection"
    assert all(m.theorem for m in Mechanism)


def test_the_mechanism_table_states_each_family_once() -> None:
    """The facts the planner used to read off names (prefixes and suffixes) are the table's now."""
    for m in Mechanism:
        assert m.uses_delta == (
            m is Mechanism.GAUSSIAN or m.value.startswith("ptr_") or m.value == "partition_selection"
        )
        assert (m.noise == "cauchy") == m.value.startswith("smooth_")
        assert m.is_global == (m.value in ("laplace", "gaussian", "geometric", "approx_bounds"))
        assert (m.family is Family.COMBINED) == (m is Mechanism.ADAPTIVE_CLIP)
        if m.info.record_cost is not None:
            one_change = m.value.endswith("triangle_count") or m.value.startswith("ptr_")
            one_change = one_change or m is Mechanism.INVERSE_SENSITIVITY_TRIMMED_MEAN
            expected = (
                RecordCost.ONE_CHANGE
                if one_change
                else RecordCost.SMOOTH
                if m.value.startswith("smooth_")
                else RecordCost.ORDER
            )
            assert m.record_cost is expected, m
    with pytest.raises(UsageError, match="no per-record cost"):
        _ = Mechanism.LAPLACE.record_cost


@pytest.mark.parametrize("epsilon", ["0.1", 1, 5])
@pytest.mark.parametrize("adjacency", ["add_remove", "replace"])
def test_default_mechanism_per_statistic(schema: Schema, epsilon: object, adjacency: str) -> None:
    kw = {"epsilon": epsilon, "adjacency": adjacency, "max_rows_per_unit": 1}
    assert one(schema, q.count(), **kw).mechanism == "laplace"
    assert one(schema, q.count_units(), **kw).mechanism == "laplace"
    assert one(schema, q.sum("hours"), **kw).mechanism == "laplace"
    assert one(schema, q.histogram("region"), **kw).mechanism == "laplace"
    # the EM quantile at every ε under both adjacencies (Δu = max(q, 1 - q) under add/remove, 1 under replace)
    assert one(schema, q.median("age"), **kw).mechanism == "em_quantile"
    assert one(schema, q.quantile("age", "0.9"), **kw).mechanism == "em_quantile"
    for agg, name in [
        (q.min_distance(["x", "y"]), "smooth_min_distance"),
        (q.triangle_count(["src", "dst"]), "smooth_triangle_count"),
    ]:
        step = one(schema, agg, **kw)
        assert (step.mechanism, step.noise, step.sensitivity) == (name, "cauchy", None)
        assert step.loss == PureDP(Fraction(str(epsilon)))
    # the trimmed mean: a Laplace count (its public n) at ε/10, then the smooth release at 9ε/10
    count, value = plan(build(schema, a=q.trimmed_mean("hours", "0.1")), **kw).steps  # type: ignore[arg-type]
    assert (count.part, count.mechanism, count.sensitivity) == (StepPart.COUNT, "laplace", 1)
    assert (value.part, value.mechanism, value.noise, value.sensitivity) == (
        StepPart.VALUE,
        "smooth_trimmed_mean",
        "cauchy",
        None,
    )
    assert (count.loss, value.loss) == (PureDP(Fraction(str(epsilon)) / 10), PureDP(Fraction(str(epsilon)) * 9 / 10))


def test_the_default_median_runs_at_the_epsilon_of_its_step_over_the_record_cost(schema: Schema) -> None:
    # ε = 1 shared by two steps: each median runs at 1/2; C = 2 under replace (ungrouped: M = C) halves it again
    two = plan(
        build(schema, a=q.median("age"), b=q.median("hours")), epsilon=1, adjacency="replace", max_rows_per_unit=1
    )
    assert {s.mechanism for s in two.steps} == {"em_quantile"}
    step = one(schema, q.median("age", max_rows_per_unit=2), epsilon=2, adjacency="replace")
    assert step.mechanism == "em_quantile" and step.mechanism_epsilon == 1
    step = one(schema, q.median("age", max_rows_per_unit=4), epsilon=2, adjacency="replace")
    assert step.mechanism == "em_quantile" and step.mechanism_epsilon == Fraction(1, 2)


def test_mean_is_two_steps_or_sum_over_public_n(schema: Schema) -> None:
    ir = build(schema, m=q.mean("hours", max_rows_per_unit=3))
    p = plan(ir, epsilon=1, adjacency="add_remove")
    assert [s.part for s in p.steps] == [StepPart.CENTERED_SUM, StepPart.COUNT]
    ref = mean_private_n_plan(Bounds(0, 24), epsilon=1, adjacency="add_remove", contribution=ContributionBound(3))
    assert [s.sensitivity for s in p.steps] == [ref.centered_sum_sensitivity, ref.count_sensitivity]
    assert [s.loss.epsilon for s in p.steps] == [ref.epsilon_sum, ref.epsilon_count]
    pub = plan(ir, epsilon=1, adjacency="replace", public_n=100)
    assert [s.part for s in pub.steps] == [StepPart.VALUE]
    assert pub.steps[0].sensitivity == mean_sensitivity_public_n(
        Bounds(0, 24), 100, adjacency="replace", contribution=ContributionBound(3)
    )
    assert len(plan(ir, epsilon=1, adjacency="replace").steps) == 2
    with pytest.raises(UsageError, match="public_n applies only under replace"):
        plan(ir, epsilon=1, adjacency="add_remove", public_n=100)


def test_the_mean_splits_its_budget_13_to_9_and_explain_says_so(schema: Schema) -> None:
    """The centred sum takes 13/22 of the mean's ε, the count 9/22; a public-n smooth median's value step 9/10."""
    p = plan(build(schema, m=q.mean("hours", max_rows_per_unit=3)), epsilon=1, adjacency="add_remove")
    assert [s.loss.epsilon for s in p.steps] == [Fraction(13, 22), Fraction(9, 22)]
    assert "ε 13/22 + 9/22, weighted by the statistics' rules" in p.explain()
    both = plan(
        build(schema, m=q.mean("hours", max_rows_per_unit=3), n=q.count(max_rows_per_unit=3)),
        epsilon=1,
        adjacency="add_remove",
    )
    # three steps of 1/3: the mean's two shares are split 13:9 among its steps, the count keeps its own
    assert [s.loss.epsilon for s in both.steps] == [Fraction(13, 33), Fraction(9, 33), Fraction(1, 3)]
    smooth = plan(
        build(schema, m=q.median("hours", mechanism="smooth_median", max_rows_per_unit=1)),
        epsilon=1,
        adjacency="add_remove",
    )
    assert [(s.part, s.loss.epsilon) for s in smooth.steps] == [
        (StepPart.COUNT, Fraction(1, 10)),
        (StepPart.VALUE, Fraction(9, 10)),
    ]
    even = plan(
        build(schema, n=q.count(max_rows_per_unit=1), k=q.count(max_rows_per_unit=2)), epsilon=1, adjacency="add_remove"
    )
    assert "split over 2 step(s) (evenly)" in even.explain()


def test_the_mean_split_minimises_the_variance_averaged_over_the_domain() -> None:
    """1/s² + (1/3)/(1 - s)², the variance for a mean uniform on [L, U] (B² averages h²/3), is least near 13/22."""

    def variance(s: float) -> float:
        return 1 / s**2 + (1 / 3) / (1 - s) ** 2

    grid = [i / 1000 for i in range(1, 1000)]
    best = min(grid, key=variance)
    assert abs(best - 13 / 22) < 0.002
    assert variance(13 / 22) < 0.92 * variance(0.5)  # 9 % less variance on average; 28 % less at B = 0


@pytest.mark.parametrize("adjacency", ADJ)
@pytest.mark.parametrize("c", [1, 7])
def test_sensitivities_match_the_sensitivity_module(schema: Schema, adjacency: str, c: int) -> None:
    cb = ContributionBound(c)
    kw = {"adjacency": adjacency, "max_rows_per_unit": c}
    assert one(schema, q.count(), **kw).sensitivity == count_rows_sensitivity(adjacency=adjacency, contribution=cb)
    assert one(schema, q.count_units(), **kw).sensitivity == count_units_sensitivity(adjacency=adjacency)
    for col, lo, hi in [("hours", 0, 24), ("age", 0, 120)]:
        expected = sum_sensitivity(Bounds(lo, hi), adjacency=adjacency, contribution=cb)
        assert one(schema, q.sum(col), **kw).sensitivity == expected
    shifted = one(schema, q.sum("hours", bounds=(20, 50)), **kw).sensitivity
    assert shifted == sum_sensitivity(Bounds(20, 50), adjacency=adjacency, contribution=cb)
    hist = one(schema, q.histogram("region"), **kw)
    assert hist.sensitivity == histogram_sensitivity("l1", adjacency=adjacency, contribution=cb)
    gauss = one(schema, q.histogram("region", mechanism="gaussian"), delta="1e-6", **kw)
    assert gauss.sensitivity == histogram_sensitivity("l2", adjacency=adjacency, contribution=cb)
    mean = plan(build(schema, m=q.mean("hours")), epsilon=1, **kw).steps  # type: ignore[arg-type]
    assert mean[0].sensitivity == centered_sum_sensitivity(Bounds(0, 24), adjacency=adjacency, contribution=cb)


def test_aggregate_bound_wins_over_dataset_bound_and_is_required(schema: Schema) -> None:
    step = one(schema, q.count(max_rows_per_unit=5), adjacency="add_remove", max_rows_per_unit=2)
    assert step.sensitivity == 5 and step.max_rows_per_unit == 5
    with pytest.raises(UsageError, match="contribution bound"):
        one(schema, q.count(), adjacency="add_remove")
    assert one(schema, q.count_units(), adjacency="add_remove").sensitivity == 1


@pytest.mark.parametrize("adjacency", ADJ)
def test_grouped_sensitivities_use_max_groups_per_unit(schema: Schema, adjacency: str) -> None:
    base = Query("events").group_by("region").max_groups_per_unit(2)
    ir = base.agg(n=q.count(), u=q.count_units(), s=q.sum("hours")).build(schema)
    steps = {s.output: s for s in plan(ir, epsilon=1, adjacency=adjacency, max_rows_per_unit=3).steps}
    factor = 2 if adjacency == "replace" else 1
    cb = ContributionBound(3, max_groups_per_unit=2)
    assert steps["n"].sensitivity == histogram_sensitivity("l1", adjacency=adjacency, contribution=cb)
    assert steps["u"].sensitivity == 2 * factor and steps["u"].max_groups_per_unit == 2
    assert steps["s"].sensitivity == factor * 3 * 24
    ungrouped = Query("events").group_by("region").agg(u=q.count_units()).build(schema)
    with pytest.raises(UsageError, match="max_groups_per_unit"):
        plan(ungrouped, epsilon=1, adjacency=adjacency)


def test_overrides_accepted_and_refused(schema: Schema) -> None:
    kw = {"adjacency": "add_remove", "max_rows_per_unit": 1}
    assert one(schema, q.count(mechanism="geometric"), **kw).chosen_by == "analyst"
    count_step, smooth = plan(build(schema, a=q.median("age", mechanism="smooth_median")), epsilon=1, **kw).steps  # type: ignore[arg-type]
    assert (count_step.part, count_step.mechanism, smooth.noise) == (StepPart.COUNT, "laplace", "cauchy")
    ptr = q.median("age", mechanism="ptr_order_statistic", proposed_bound=1)
    count_step, test = plan(build(schema, a=ptr), epsilon=1, delta="1e-8", **kw).steps  # type: ignore[arg-type]
    assert (test.mechanism, test.loss, count_step.loss) == (
        "ptr_order_statistic",
        ApproxDP(Fraction(9, 10), Fraction(1, 10**8)),
        PureDP(Fraction(1, 10)),
    )
    with pytest.raises(UsageError, match=r"Propose-Test-Release .* needs delta > 0"):
        plan(build(schema, a=ptr), epsilon=1, **kw)  # type: ignore[arg-type]
    step = one(schema, q.sum("hours", mechanism="gaussian"), delta="1e-8", **kw)
    assert (step.mechanism, step.norm, step.loss) == ("gaussian", Norm.L2, ApproxDP(1, Fraction(1, 10**8)))
    with pytest.raises(UsageError, match="needs delta > 0"):
        one(schema, q.sum("hours", mechanism="gaussian"), **kw)
    with pytest.raises(UsageError, match="em_quantile, inverse_sensitivity_median, smooth_median, ptr_order_statistic"):
        one(schema, q.median("age", mechanism="laplace"), **kw)
    with pytest.raises(UsageError, match="laplace, gaussian"):
        one(schema, q.sum("hours", mechanism="geometric"), **kw)
    with pytest.raises(UsageError, match="not valid"):
        one(schema, q.count(mechanism="no_such_thing"), **kw)


def test_variance_is_three_noisy_sums_with_their_sensitivities(schema: Schema) -> None:
    ir = Query("events").agg(v=q.variance("hours")).build(schema)
    for adjacency in ("add_remove", "replace"):
        result = plan(ir, epsilon=Fraction(3, 2), adjacency=adjacency, max_rows_per_unit=3)
        parts = {s.part.value: s for s in result.steps}
        assert set(parts) == {"centered_sum", "centered_squares", "count"}
        low, high = schema.column("hours").bounds or (Fraction(0), Fraction(0))
        half = (high - low) / 2
        assert parts["centered_squares"].sensitivity == 3 * half * half  # C h^2 under both adjacencies
        factor = 1 if adjacency == "add_remove" else 2
        assert parts["centered_sum"].sensitivity == factor * 3 * half
        assert all(s.loss.epsilon == Fraction(1, 2) for s in result.steps)


def test_refusals(schema: Schema) -> None:
    kw = {"adjacency": "add_remove", "max_rows_per_unit": 1}
    with pytest.raises(UnsupportedRequest, match="public keys"):
        one(schema, q.histogram("device"), **kw)
    with pytest.raises(UsageError, match="no step of this plan uses it"):
        one(schema, q.count(), delta="1e-6", **kw)


@pytest.mark.parametrize(("epsilon", "k"), [(1, 3), ("0.1", 7), ("0.3", 1), ("2.5", 6)])
def test_split_sums_exactly_to_the_request(schema: Schema, epsilon: object, k: int) -> None:
    aggs = [q.count(), q.count_units(), q.sum("hours"), q.sum("age"), q.median("age"), q.histogram("region")]
    ir = build(schema, **{f"a{i}": aggs[i % len(aggs)] for i in range(k)})
    p = plan(ir, epsilon=epsilon, adjacency="add_remove", max_rows_per_unit=2)  # type: ignore[arg-type]
    eps = Fraction(str(epsilon))
    assert len(p.steps) == k and {s.loss for s in p.steps} == {PureDP(eps / k)}
    assert p.total_loss == PureDP(eps) == compose_basic([s.loss for s in p.steps])
    assert_loss_equals(p, PureDP(eps))
    assert_loss_equals(p, ApproxDP(eps, 0))
    with pytest.raises(InternalError, match="This is a bug"):
        assert_loss_equals(p, PureDP(eps + Fraction(1, 10**30)))


def test_delta_split_over_the_gaussian_steps_only(schema: Schema) -> None:
    ir = build(
        schema,
        a=q.sum("hours", mechanism="gaussian"),
        b=q.count(),
        c=q.histogram("region", mechanism="gaussian"),
        m=q.mean("hours", mechanism="gaussian"),
    )
    p = plan(ir, epsilon="0.1", delta="1e-6", adjacency="replace", max_rows_per_unit=1)
    deltas = [s.loss.delta if isinstance(s.loss, ApproxDP) else None for s in p.steps]
    d = Fraction(1, 4 * 10**6)
    assert deltas == [d, None, d, d, d]
    assert p.total_loss == ApproxDP(Fraction(1, 10), Fraction(1, 10**6)) == p.requested


def _public_numbers(p: Plan) -> set[str]:
    nums: set[str] = {str(len(p.steps)), str(p.requested.epsilon), str(p.public_n)}
    if isinstance(p.requested, ApproxDP):
        nums.add(str(p.requested.delta))
    for s in p.steps:
        nums |= {str(s.loss.epsilon), str(s.mechanism_epsilon), str(s.max_rows_per_unit), str(s.max_groups_per_unit)}
        nums.add(str(s.record_cost))
        if isinstance(s.loss, ApproxDP):
            nums.add(str(s.loss.delta))
        if s.sensitivity is not None:
            nums.add(str(s.sensitivity).lstrip("√"))
    return nums


@pytest.mark.parametrize("adjacency", ADJ)
def test_explain_states_public_facts_only(schema: Schema, adjacency: str) -> None:
    ir = (
        Query("events")
        .group_by("region")
        .max_groups_per_unit(2)
        .agg(n=q.count(), s=q.sum("hours", mechanism="gaussian"), md=q.median("age", max_rows_per_unit=3))
        .build(schema)
    )
    p = plan(ir, epsilon="0.7", delta="1e-9", adjacency=adjacency, max_rows_per_unit=4)
    text = p.explain()
    for s in p.steps:
        assert f"'{s.output}'" in text and s.mechanism in text and s.theorem in text
        assert f"charged ε = {s.loss.epsilon}" in text
    assert adjacency.replace("_", "/") in text and "no data was read" in text
    stripped = text
    for phrase in {s.theorem for s in p.steps} | {s.reason for s in p.steps}:
        stripped = stripped.replace(phrase, "")
    numbers = set(re.findall(r"(?<![\w.])\d+(?:/\d+)?", stripped))
    assert numbers <= _public_numbers(p), numbers - _public_numbers(p)
    assert "L2 sensitivity" in text and "L1 sensitivity" in text and "group privacy" in text


def test_plan_is_deterministic_canonical_and_hashable(schema: Schema) -> None:
    left = (
        Query("events")
        .filter("age", ">=", 18)
        .filter("hours", "<", 10)
        .agg(m=q.mean("hours"), n=q.count(), md=q.median("age"))
        .build(schema)
    )
    right = (
        Query("events")
        .filter("hours", "<", 10.0)
        .filter("age", ">=", "18")
        .agg(md=q.median("age"), n=q.count(), m=q.mean("hours"))
        .build(schema)
    )
    kw = {"epsilon": "0.5", "adjacency": "add_remove", "max_rows_per_unit": 2}
    a, b = plan(left, **kw), plan(right, **kw)  # type: ignore[arg-type]
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a.canonical() == b.canonical() and a.fingerprint() == b.fingerprint()
    assert a.explain() == b.explain()
    assert a.query_fingerprint == left.fingerprint()
    other = plan(left, epsilon="0.5", adjacency="replace", max_rows_per_unit=2)
    assert other != a and other.fingerprint() != a.fingerprint()
