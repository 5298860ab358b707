"""Neighbouring datasets through the real release path: totality, measured sensitivities, exact losses.

Every cell below runs ``PAIRS`` random neighbouring pairs (fixed seeds, ``harness.make_pair``; the first
seeds of each context are the directed edge cases: a unit at the bounds moving between groups, a
filtered view empty on one side and holding only the target's rows on the other, all-NaN / all-tied
values, a whale with 3C + 1 rows at the bounds) through ``dp.Session.release`` on DuckDB and a SQLite
ledger, and checks on each pair (``harness.check_pair``):

* totality: no ``ChargedFailure`` or other exception on either side; a refusal before data access
  must be the same on both sides;
* each global-sensitivity step: the L1 / L2 change of the captured pre-noise vector between the two
  datasets <= the plan's stated sensitivity in the plan's norm;
* each data-dependent step: sum over groups of ceil(measured record changes / records calibrated for)
  x the ε the mechanism ran with <= the charged ε (δ likewise for PTR); for the EM quantile and the
  inverse-sensitivity order statistic the exact joint log-ratio of the output laws <= the charged ε.

Coverage (statistic x mechanism; A = add_remove, R = replace; g = grouped by public keys with
max_groups_per_unit(k), u = ungrouped; every cell both with and without ``filter("f", "==", 1)``; the
grouped cells also grouped by two public columns (g, w), unfiltered, partition selection then over
(h, w) pairs):

=====================  ==========================================================  ========================
statistic              mechanisms                                                  contexts
=====================  ==========================================================  ========================
count                  laplace, gaussian, geometric                                A/R x g/u
count_units            laplace, gaussian, geometric                                A/R x g/u
clipped_count          laplace, gaussian, geometric                                A/R x g/u
sum, mean, variance    laplace, gaussian                                           A/R x g/u
mean, sum              adaptive_clip (approx_bounds clip, then Laplace)             A/R x g/u
approx_bounds          approx_bounds                                               A/R x u (refused g)
histogram              laplace, gaussian, geometric                                A/R x u (keys as groups)
median                 em_quantile, inverse_sensitivity_median, smooth, ptr         A/R x g/u
quantile (q = 3/10)    em_quantile, inverse_sensitivity_order_statistic, smooth,    A/R x g/u
                       ptr
quantile (q = 1/4e18)  em_quantile, inverse_sensitivity_order_statistic             A/R x g/u
quantiles (1/4, 1/2,   recursive_quantiles (group privacy over the record changes)   A/R x g/u
9/10)
trimmed_mean (1/10)    smooth, inverse_sensitivity, ptr                             A/R x g/u
min_distance           smooth, inverse_sensitivity, ptr                             A x u (R, g: refusal)
triangle_count         smooth, inverse_sensitivity, ptr                             A/R x u (g: refusal)
partition selection    (count over keys selected privately)                         A/R x g
=====================  ==========================================================  ========================

The contexts with declared group caps also declare a recording step of 0.5 for v (``h.STEP``): there the
EM quantiles choose among the step's points, and the exact law checked is ``h.em_law(step=...)``.

Plus ``test_issue_13_grouped_median_under_replace``: the counter-example of docs/math/global-sensitivity.md §1.4,
and ``test_a_declared_step_median_under_replace_and_a_broken_epsilon`` (the same pair with a declared step).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpsense as dp
from tests.privacy import harness as h

PAIRS = 14  # per context; every cell of the context is checked on each pair
#: Pairs of the contexts grouped by two columns: seeds 0-6, one of each directed case of ``make_pair``
#: (they add the second column to what the one-column contexts cover with 14).
PAIRS_TWO_COLUMNS = 7


def pairs_of(ctx: h.Context) -> int:
    """How many neighbouring pairs the context runs."""
    return PAIRS if ctx.columns == 1 else PAIRS_TWO_COLUMNS


CONTEXTS = [
    h.Context(adjacency, grouped, filtered)
    for adjacency in ("add_remove", "replace")
    for grouped in (False, True)
    for filtered in (False, True)
]
# grouped by two public columns (g, w): a unit's rows spread over value pairs, and under replace a unit
# leaves its pairs while its replacement enters others; partition selection over (h, w) pairs with w public
CONTEXTS += [h.Context(adjacency, True, False, columns=2) for adjacency in ("add_remove", "replace")]
# the same with caps declared for g and w at registration: the engine keeps the units within the
# query's cap with no window and windows the others (``DuckDBEngine._indexed_view``), filtered too
CONTEXTS += [
    h.Context(adjacency, True, filtered, columns=2, declared_caps=True)
    for adjacency in ("add_remove", "replace")
    for filtered in (False, True)
]
DELTA = Fraction(1, 10**9)


@dataclass(frozen=True)
class Family:
    """Aggregates released together (one release per side and pair), with the release's ε and δ."""

    name: str
    aggregates: dict[str, dp.Aggregate]
    epsilon: Fraction
    delta: Fraction
    grouped: bool | None  # None: both; True: only grouped (partition selection); False: only ungrouped
    alone: bool = False  # each aggregate needs a release of its own (a histogram)
    select_keys: bool = False


def _global(grouped: bool) -> dict[str, dp.Aggregate]:
    aggs: dict[str, dp.Aggregate] = {}
    for m in ("laplace", "gaussian", "geometric"):
        aggs[f"count_{m}"] = dp.count(mechanism=m)
        aggs[f"count_units_{m}"] = dp.count_units(mechanism=m)
        aggs[f"clipped_count_{m}"] = dp.clipped_count("v", bounds=(10, 60), mechanism=m)
    for m in ("laplace", "gaussian"):
        aggs[f"sum_{m}"] = dp.sum("v", mechanism=m)
        aggs[f"mean_{m}"] = dp.mean("v", mechanism=m)
        aggs[f"variance_{m}"] = dp.variance("v", mechanism=m)
    aggs["mean_adaptive_clip"] = dp.mean("v", mechanism="adaptive_clip")
    aggs["sum_adaptive_clip"] = dp.sum("v", mechanism="adaptive_clip")
    if not grouped:
        aggs["approx_bounds"] = dp.approx_bounds("v")
    return aggs


ORDER = {
    "median_em_quantile": dp.median("v", mechanism="em_quantile"),
    "median_inverse_sensitivity": dp.median("v", mechanism="inverse_sensitivity_median"),
    "median_smooth": dp.median("v", mechanism="smooth_median"),
    "median_ptr": dp.median("v", mechanism="ptr_order_statistic", proposed_bound=5),
    "quantile_em_quantile": dp.quantile("v", Fraction(3, 10), mechanism="em_quantile"),
    "quantile_inverse_sensitivity": dp.quantile("v", Fraction(3, 10), mechanism="inverse_sensitivity_order_statistic"),
    "quantile_smooth": dp.quantile("v", Fraction(3, 10), mechanism="smooth_quantile"),
    "quantile_ptr": dp.quantile("v", Fraction(3, 10), mechanism="ptr_order_statistic", proposed_bound=5),
    "quantiles_recursive": dp.quantiles("v", [Fraction(1, 4), Fraction(1, 2), Fraction(9, 10)]),
    "trimmed_mean_smooth": dp.trimmed_mean("v", Fraction(1, 10), mechanism="smooth_trimmed_mean"),
    "trimmed_mean_inverse_sensitivity": dp.trimmed_mean(
        "v", Fraction(1, 10), mechanism="inverse_sensitivity_trimmed_mean"
    ),
    "trimmed_mean_ptr": dp.trimmed_mean("v", Fraction(1, 10), mechanism="ptr_trimmed_mean", proposed_bound=5),
}
HUGE_Q = Fraction(1, 4 * 10**18)
HUGE = {
    "quantile_huge_q_em_quantile": dp.quantile("v", HUGE_Q, mechanism="em_quantile"),
    "quantile_huge_q_inverse_sensitivity": dp.quantile("v", HUGE_Q, mechanism="inverse_sensitivity_order_statistic"),
}
MIN_DISTANCE = {
    "min_distance_smooth": dp.min_distance(["px", "py"], mechanism="smooth_min_distance"),
    "min_distance_inverse_sensitivity": dp.min_distance(["px", "py"], mechanism="inverse_sensitivity_min_distance"),
    "min_distance_ptr": dp.min_distance(["px", "py"], mechanism="ptr_min_distance", proposed_bound=1),
}
TRIANGLES = {
    "triangle_count_smooth": dp.triangle_count(["src", "dst"], mechanism="smooth_triangle_count"),
    "triangle_count_inverse_sensitivity": dp.triangle_count(
        ["src", "dst"], mechanism="inverse_sensitivity_triangle_count"
    ),
    "triangle_count_ptr": dp.triangle_count(["src", "dst"], mechanism="ptr_triangle_count", proposed_bound=1),
}
HISTOGRAMS = {f"histogram_{m}": dp.histogram("g", mechanism=m) for m in ("laplace", "gaussian", "geometric")}


def families(grouped: bool) -> list[Family]:
    return [
        Family("global", _global(grouped), Fraction(4), DELTA, None),
        Family("order", ORDER, Fraction(16), DELTA, None),
        Family("huge_q", HUGE, Fraction(2), Fraction(0), None),
        Family("min_distance", MIN_DISTANCE, Fraction(3), DELTA, None),
        Family("triangles", TRIANGLES, Fraction(3), DELTA, None),
        Family("histogram", HISTOGRAMS, Fraction(1), DELTA, False, alone=True),
        Family("partition_selection", {"selected_count": dp.count()}, Fraction(2), DELTA, True, select_keys=True),
    ]


def _query(ds: dp.Dataset, ctx: h.Context, pair: h.Pair, fam: Family, aggs: dict[str, dp.Aggregate]) -> dp.Query:
    q = ds.query()
    if ctx.filtered:
        q = q.filter("f", "==", 1)
    if fam.select_keys:
        q = q.group_by("h", *ctx.group_columns[1:]).max_groups_per_unit(pair.groups_per_unit)
    elif ctx.grouped and fam.name != "histogram":
        q = q.group_by(*ctx.group_columns).max_groups_per_unit(pair.groups_per_unit)
    return q.agg(**aggs)


def _delta(fam: Family, aggs: dict[str, dp.Aggregate]) -> Fraction:
    """The family's δ when some step of this release uses it (a δ no step uses is refused), else 0."""
    uses = fam.select_keys or any(
        a.mechanism is not None and (a.mechanism == "gaussian" or a.mechanism.startswith("ptr_")) for a in aggs.values()
    )
    return fam.delta if uses else Fraction(0)


@dataclass
class PairResult:
    pair: h.Pair
    outcomes: dict[str, tuple[h.Outcome, h.Outcome]] = field(default_factory=dict)  # per aggregate name


def _run_side(
    session: dp.Session, ctx: h.Context, pair: h.Pair, name: str, data: pd.DataFrame
) -> dict[str, list[tuple[str, h.Outcome]]]:
    """Every family's release(s) on one side; per family a list of (aggregates key, outcome)."""
    with h.deterministic_entropy(pair.seed * 1000):
        ds = h.register(session, name, data, ctx, pair.rows_per_unit)
    out: dict[str, list[tuple[str, h.Outcome]]] = {}
    for j, fam in enumerate(families(ctx.grouped)):
        if fam.grouped is not None and fam.grouped != ctx.grouped:
            continue
        runs: list[tuple[str, dict[str, dp.Aggregate]]]
        runs = [(a, {a: agg}) for a, agg in fam.aggregates.items()] if fam.alone else [("*", fam.aggregates)]
        out[fam.name] = []
        for i, (key, aggs) in enumerate(runs):
            seed = pair.seed * 1000 + 10 * (j + 1) + i
            outcome = h.release(
                session,
                _query(ds, ctx, pair, fam, aggs),
                epsilon=fam.epsilon,
                delta=_delta(fam, aggs),
                seed=seed,
                request_id=f"{name}-{fam.name}-{key}",
            )
            out[fam.name].append((key, outcome))
    return out


def _attribute(
    session: dp.Session, ctx: h.Context, pair: h.Pair, fam: Family, names: tuple[str, str]
) -> dict[str, tuple[h.Outcome, h.Outcome]]:
    """A combined release failed on one side: run each aggregate alone on both sides to find which."""
    result: dict[str, tuple[h.Outcome, h.Outcome]] = {}
    for i, (agg_name, agg) in enumerate(fam.aggregates.items()):
        sides = []
        for name in names:
            ds = session.dataset(name)
            sides.append(
                h.release(
                    session,
                    _query(ds, ctx, pair, fam, {agg_name: agg}),
                    epsilon=fam.epsilon,
                    delta=_delta(fam, {agg_name: agg}),
                    seed=pair.seed * 1000 + 500 + i,
                    request_id=f"{name}-{fam.name}-alone-{agg_name}",
                )
            )
        result[agg_name] = (sides[0], sides[1])
    return result


def run_context(ctx: h.Context, workdir: Path) -> list[PairResult]:
    results = []
    url = f"sqlite:///{workdir / (ctx.label + '.db')}"
    with dp.Session.open(url, analyst="steward", role="steward", allow_test_noise=True) as session:
        # the ledger's own secrets are drawn once, outside the deterministic blocks of the pairs
        warm = h.register(session, "warmup", h.frame(h.unit_rows(np.random.default_rng(0), "w", 1)), ctx, 1)
        session.release(warm.query().agg(n=dp.count()), epsilon=1)
        for seed in range(pairs_of(ctx)):
            pair = h.make_pair(ctx, seed)
            names = (f"p{seed}x", f"p{seed}y")
            sides = [
                _run_side(session, ctx, pair, name, data) for name, data in zip(names, (pair.x, pair.y), strict=True)
            ]
            res = PairResult(pair)
            for fam in families(ctx.grouped):
                if fam.name not in sides[0]:
                    continue
                runs_x, runs_y = sides[0][fam.name], sides[1][fam.name]
                if fam.alone:
                    for (key, ox), (_, oy) in zip(runs_x, runs_y, strict=True):
                        res.outcomes[key] = (ox, oy)
                    continue
                ox, oy = runs_x[0][1], runs_y[0][1]
                if ox.status == "failed" or oy.status == "failed":
                    res.outcomes.update(_attribute(session, ctx, pair, fam, names))
                else:
                    for agg_name in fam.aggregates:
                        res.outcomes[agg_name] = (ox, oy)
            if "partition_selection" in sides[0]:
                ox, oy = res.outcomes["selected_count"]
                res.outcomes["__keys__"] = (ox, oy)
            results.append(res)
    return results


_CACHE: dict[h.Context, list[PairResult]] = {}


@pytest.fixture(scope="module")
def context_results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[h.Context, list[PairResult]]]:
    workdir = tmp_path_factory.mktemp("privacy")

    class Lazy(dict[h.Context, list[PairResult]]):
        def __missing__(self, key: h.Context) -> list[PairResult]:
            if key not in _CACHE:
                _CACHE[key] = run_context(key, workdir)
            return _CACHE[key]

    yield Lazy()
    _CACHE.clear()


def _cells() -> list[Any]:
    cells = []
    for ctx in CONTEXTS:
        names: list[str] = []
        for fam in families(ctx.grouped):
            if fam.grouped is not None and fam.grouped != ctx.grouped:
                continue
            names.extend(fam.aggregates)
            if fam.select_keys:
                names.append("__keys__")
        for agg in names:
            cells.append(pytest.param(ctx, agg, id=f"{ctx.label}-{agg.strip('_')}"))
    return cells


def expected_to_run(ctx: h.Context, agg: str) -> bool:
    """False where the product refuses on public facts (the refusal must then match on both sides)."""
    if agg.startswith("min_distance"):
        return ctx.adjacency == "add_remove" and not ctx.grouped
    if agg.startswith("triangle_count"):
        return not ctx.grouped
    return True


@pytest.mark.parametrize(("ctx", "agg"), _cells())
def test_neighbours(ctx: h.Context, agg: str, context_results: dict[h.Context, list[PairResult]]) -> None:
    problems: list[str] = []
    ran = 0
    for res in context_results[ctx]:
        ox, oy = res.outcomes[agg]
        found = h.check_pair(agg, ox, oy, private_keys=agg == "selected_count")
        ran += ox.status == oy.status == "ok"
        problems.extend(f"pair {res.pair.seed} ({res.pair.note}, C={res.pair.rows_per_unit}): {p}" for p in found)
    assert len(context_results[ctx]) == pairs_of(ctx)
    assert not problems, f"{len(problems)} violation(s) in {ctx.label}/{agg}:\n" + "\n".join(problems[:6])
    if expected_to_run(ctx, agg):
        assert ran == pairs_of(ctx), f"{agg} ran on {ran} of {pairs_of(ctx)} pairs only (refused on the others)"


# ---------------------------------------------------------------------------------------------------
# the counter-example of docs/math/global-sensitivity.md §1.4 (issue 13 finding 2), as a directed pair


def _issue_frame(moved: bool) -> pd.DataFrame:
    rows = [("1", "a", 10.0), ("2", "a", 10.0), ("3", "a", 1000.0)]
    rows += [("4", "b", 990.0), ("5", "b", 990.0), ("6", "b", 1000.0)]
    rows.append(("0", "a" if moved else "b", 0.0))
    data = [{"uid": u, "g": g, "h": "p", "v": v, "px": 0.0, "py": 0.0, "f": 1, "src": 0, "dst": 1} for u, g, v in rows]
    return h.frame(data)


def _issue_13_releases(
    tmp_path: Path, aggregate: dp.Aggregate, steps: dict[str, str] | None = None
) -> tuple[h.Outcome, h.Outcome]:
    """``aggregate`` grouped by g on the issue-13 pair (C = 1, step ε = 1), before and after unit "0" moves.

    ``steps``: recording steps declared at registration (``register_dataset(steps=...)``).
    """
    url = f"sqlite:///{tmp_path / 'issue.db'}"
    ctx = h.Context("replace", True, False)
    outcomes = []
    with dp.Session.open(url, analyst="steward", role="steward", allow_test_noise=True) as session:
        warm = h.register(session, "warmup", h.frame(h.unit_rows(np.random.default_rng(0), "w", 1)), ctx, 1)
        session.release(warm.query().agg(n=dp.count()), epsilon=1)
        for name, moved in (("before", False), ("after", True)):
            with h.deterministic_entropy(7):
                ds = session.register_dataset(
                    name,
                    source=_issue_frame(moved),
                    privacy_unit="uid",
                    adjacency="replace",
                    bounds={"v": (0, 1000), "px": (0, 1000), "py": (0, 1000)},
                    kinds={"px": "point", "py": "point", "src": "edge", "dst": "edge"},
                    keys={"g": ["a", "b"], "src": list(h.VERTICES), "dst": list(h.VERTICES)},
                    max_rows_per_unit=1,
                    budget=dp.Budget(epsilon=10**7, delta=Fraction(1, 10**6)),
                    policy=h.policy(),
                    steps=steps,
                )
            query = ds.query().group_by("g").max_groups_per_unit(1).agg(out=aggregate)
            outcomes.append(h.release(session, query, epsilon=1, delta=0, seed=8, request_id=name))
    return outcomes[0], outcomes[1]


def test_issue_13_grouped_median_under_replace(tmp_path: Path) -> None:
    """A = {10, 10, 1000}, B = {0, 990, 990, 1000}, unit "0" moves B -> A: C = 1, step ε = 1, default mechanism."""
    outcomes = _issue_13_releases(tmp_path, dp.median("v"))
    ox, oy = outcomes
    assert ox.status == oy.status == "ok", (ox.error, oy.error)
    step = ox.plan.steps[0]
    assert step.loss.epsilon == 1
    laws = []
    for side in (ox, oy):
        calls = [c for c in side.calls if c.kind == "order"]
        assert len(calls) == 2  # groups a and b
        laws.append([h._exact_law(c) for c in calls])
    ranges = [h.log_ratio_range(a, b) for a, b in zip(laws[0], laws[1], strict=True) if a and b]
    assert len(ranges) == 2
    loss = h.joint_log_ratio(ranges)
    assert loss <= float(step.loss.epsilon) + h.TOLERANCE, f"exact joint log-ratio {loss:.4f} > charged ε 1"


@pytest.mark.parametrize("broken", [False, True])
def test_a_declared_step_median_under_replace_and_a_broken_epsilon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: bool
) -> None:
    """The issue-13 pair with v's recording step 10 declared: the median's exact law over the step's points.

    Both groups' calls choose among the 101 points of 10 Z in [0, 1000] (the law from the definition,
    ``h.em_law(step=...)``); the harness's checks pass and the joint log-ratio stays within the charged
    ε = 1. Control: the step's release run at twice the ε it was given is caught (group privacy over the
    measured record changes, at the ε the mechanism ran with, exceeds the charge).
    """
    if broken:
        from dpsense.release import _data_dependent

        original = _data_dependent.order_releases

        def doubled(step: Any, x: Any, q: Any, bounds: Any, eps: Fraction, adj: Any, **kw: Any) -> Any:
            return original(step, x, q, bounds, 2 * eps if kw.get("recording_step") else eps, adj, **kw)

        monkeypatch.setattr(_data_dependent, "order_releases", doubled)
    ox, oy = _issue_13_releases(tmp_path, dp.median("v"), steps={"v": "10"})
    assert ox.status == oy.status == "ok", (ox.error, oy.error)
    laws = []
    for side in (ox, oy):
        calls = [c for c in side.calls if c.kind == "order"]
        assert [h._mechanism(c)[1]["step"].text() for c in calls] == ["10", "10"]  # type: ignore[index]
        laws.append([h._exact_law(c) for c in calls])
    ranges = [h.log_ratio_range(a, b) for a, b in zip(laws[0], laws[1], strict=True) if a and b]
    assert len(ranges) == 2
    loss = h.joint_log_ratio(ranges)
    assert broken or loss <= 1 + h.TOLERANCE, f"exact joint log-ratio {loss:.4f} > charged ε 1"
    problems = h.check_pair("out", ox, oy)
    assert bool(problems) == broken, problems


@pytest.mark.parametrize("broken", [False, True])
def test_grouped_joint_quantiles_under_replace_and_a_broken_record_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: bool
) -> None:
    """The unit of issue 13 moves between groups under replace: the quantiles step pays for two groups' changes.

    Control: with the record cost forced to 1 (each group's call at the whole ε), the group-privacy check
    over the measured record changes (one per group, two groups) exceeds the charge and is caught.
    """
    if broken:
        from dpsense.query import planner

        monkeypatch.setattr(planner, "unit_record_cost", lambda *a, **k: 1)
    outcomes = _issue_13_releases(tmp_path, dp.quantiles("v", [Fraction(1, 4), Fraction(1, 2), Fraction(3, 4)]))
    ox, oy = outcomes
    assert ox.status == oy.status == "ok", (ox.error, oy.error)
    assert ox.plan.steps[0].record_cost == (1 if broken else 2)
    problems = h.check_pair("out", ox, oy)
    assert bool(problems) == broken, problems


def test_a_group_cap_that_counts_one_of_two_columns_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Control for the two-column contexts: the engine caps the values of g alone, not the (g, w) pairs.

    A unit then keeps rows in up to twice as many pairs as ``max_groups_per_unit``: the statistics whose
    sensitivity is the cap (a unit counted once per group it touches, the keys of a partition
    selection) see more change between neighbours than they were charged for.
    """
    from dpsense.engine.sql import _query

    original = _query.bounded_rows_query

    def uncapped(*args: Any, **kw: Any) -> Any:
        kw["group_columns"] = kw.get("group_columns", ())[:1]
        return original(*args, **kw)

    monkeypatch.setattr(_query, "bounded_rows_query", uncapped)
    _assert_caught(h.Context("add_remove", True, False, columns=2), tmp_path)


def _assert_caught(ctx: h.Context, workdir: Path) -> None:
    """The statistics whose sensitivity is the group cap find a violation, and every release is total."""
    problems = []
    for res in run_context(ctx, workdir):
        for agg in ("count_units_laplace", "count_units_geometric", "__keys__"):
            ox, oy = res.outcomes[agg]
            problems += h.check_pair(agg, ox, oy)
    assert problems and not any("not total" in p for p in problems), problems[:3]
    _CACHE.clear()


def test_a_stored_group_count_rule_that_reads_one_of_two_columns_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control for the declared-caps contexts: units counted as within the cap by g's count alone.

    A unit with one value of g but both values of w then keeps all its pairs on the window-free path,
    beyond a cap of 1: the statistics whose sensitivity is the cap see more change than charged for.
    """
    from dpsense.engine.sql import _index_query

    original = _index_query.within_cap_condition
    monkeypatch.setattr(_index_query, "within_cap_condition", lambda counts: original(counts[:1]))
    _assert_caught(h.Context("add_remove", True, False, columns=2, declared_caps=True), tmp_path)
