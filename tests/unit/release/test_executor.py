"""The release executor's steps, on a real DuckDB engine: bounded views, one scan per view, dispatch, bounds.

``_Runner`` owns one bounded view per (contribution bound C, capped group column), fetches every
additive statistic of a view in one ``group_aggregates`` scan, and hands each aggregate to its
statistic in ``dpsense.statistics.STATISTICS``; ``collect_bound`` is the public worst case of rows a
release collects. The engine is wrapped only to count its calls; every call reaches DuckDB.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from fractions import Fraction
from typing import Any

import pandas as pd
import pytest

from dpsense.core.errors import InternalError
from dpsense.engine import BoundedView, DuckDBEngine, GroupRow, count_rows, predicate
from dpsense.noise.testing import deterministic_entropy
from dpsense.query import AggregateKind, Query, Schema, StepPart, count, histogram, mean, median, min_distance
from dpsense.query import quantile as q_quantile
from dpsense.query import sum as q_sum
from dpsense.release._executor import _predicate, _Runner, collect_bound, execute
from dpsense.statistics import STATISTICS, Statistic, plan

SCHEMA = Schema(
    {"person": "unit", "hours": "numeric", "region": "categorical", "device": "categorical", "x": "point"},
    bounds={"hours": (0, 10), "x": (0, 1)},
    keys={"region": ["a", "b"], "device": ["phone", "laptop"]},
)
SALT = bytes(range(32))

# person 1: five rows in a; person 2: two in b; person 3: one in a, one in b; person 4: three in b.
ROWS = [(1, "a")] * 5 + [(2, "b")] * 2 + [(3, "a"), (3, "b")] + [(4, "b")] * 3


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "person": [p for p, _ in ROWS],
            "hours": [float(i % 7) for i in range(len(ROWS))],
            "region": [r for _, r in ROWS],
            "device": ["phone" if i % 2 else "laptop" for i in range(len(ROWS))],
            "x": [i / len(ROWS) for i in range(len(ROWS))],
        }
    )


class RecordingEngine:
    """A DuckDBEngine that notes each bounded_rows and group_aggregates call (and still runs it)."""

    def __init__(self, engine: DuckDBEngine) -> None:
        self.engine = engine
        self.bounded: list[dict[str, Any]] = []
        self.scans: list[tuple[BoundedView, list[Any]]] = []

    def bounded_rows(self, table: str, **kwargs: Any) -> BoundedView:
        self.bounded.append(kwargs)
        return self.engine.bounded_rows(table, **kwargs)

    def group_aggregates(self, view: BoundedView, **kwargs: Any) -> list[GroupRow]:
        self.scans.append((view, list(kwargs["aggregates"])))
        return self.engine.group_aggregates(view, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


@pytest.fixture
def engine() -> Iterator[RecordingEngine]:
    with DuckDBEngine() as e:
        e.register("t", frame())
        yield RecordingEngine(e)


def engine_key(value: Any) -> Any:
    return (int(value) if value.denominator == 1 else float(value)) if isinstance(value, Fraction) else value


def runner_for(engine: RecordingEngine, query: Query) -> tuple[_Runner, Any]:
    ir = query.build(SCHEMA)
    the_plan = plan(ir, epsilon=1, adjacency="add_remove")
    group = ir.group_by[0] if ir.group_by else None
    runner = _Runner(
        engine,  # type: ignore[arg-type]
        "t",
        "person",
        SALT,
        [],
        None if group is None else group.column,
        None if group is None else list(group.keys),
        ir.max_groups_per_unit,
        the_plan,
        constant_work=None,
        engine_key=engine_key,
        max_collect_rows=None,
    )
    return runner, ir


def steps_of(runner: _Runner, name: str) -> list[Any]:
    return [s for s in runner.plan.steps if s.output == name]


def by_region() -> Query:
    return Query("t").group_by("region", keys=["a", "b"])


# ---------------------------------------------------------------- view


def test_one_bounded_view_per_contribution_bound(engine: RecordingEngine) -> None:
    runner, _ = runner_for(engine, by_region().agg(n=count(max_rows_per_unit=2)))
    two = runner.view(2)
    assert runner.view(2) is two  # cached: the second call builds nothing
    one = runner.view(1)
    assert one is not two
    assert [b["max_rows_per_unit"] for b in engine.bounded] == [2, 1]
    assert all(b["salt"] == SALT and b["unit_column"] == "person" for b in engine.bounded)
    # the views really hold at most C rows per unit: C = 1 keeps one row per person, C = 2 at most two
    (row_1,) = engine.engine.group_aggregates(one, group_column=None, keys=None, aggregates=[count_rows()])
    (row_2,) = engine.engine.group_aggregates(two, group_column=None, keys=None, aggregates=[count_rows()])
    assert (row_1.counts["count_rows"], row_2.counts["count_rows"]) == (4, 2 + 2 + 2 + 2)


def test_without_a_group_cap_the_group_column_does_not_split_the_cache(engine: RecordingEngine) -> None:
    runner, _ = runner_for(engine, by_region().agg(n=count(max_rows_per_unit=2)))
    assert runner.view(2, "device") is runner.view(2) is runner.view(2, "region")
    (call,) = engine.bounded
    assert call["group_column"] is None and call["max_groups_per_unit"] is None


def test_with_a_group_cap_each_capped_column_has_its_own_view(engine: RecordingEngine) -> None:
    runner, _ = runner_for(engine, by_region().max_groups_per_unit(1).agg(n=count(max_rows_per_unit=2)))
    region = runner.view(2)
    assert runner.view(2, "region") is region  # the release's group column is the default
    device = runner.view(2, "device")
    assert device is not region
    assert [(b["group_column"], b["max_groups_per_unit"]) for b in engine.bounded] == [("region", 1), ("device", 1)]


# ---------------------------------------------------------------- prefetch and fetched


def several_additive() -> Query:
    return by_region().agg(
        n=count(max_rows_per_unit=2),
        s=q_sum("hours", max_rows_per_unit=2),
        m=mean("hours", max_rows_per_unit=3),
        med=median("hours", max_rows_per_unit=2),  # data-dependent: nothing to prefetch
    )


def test_prefetch_scans_each_view_once_for_all_its_additive_statistics(engine: RecordingEngine) -> None:
    runner, ir = runner_for(engine, several_additive())
    runner.prefetch(ir)
    assert len(engine.scans) == 2  # C = 2 (count and sum) and C = 3 (the mean's two parts), not one per statistic
    assert sorted(runner.fetched_rows) == [2, 3]
    names = {view.name: {a.name for a in aggs} for view, aggs in engine.scans}
    assert {"n|n", "s|s"} in names.values()
    assert set(runner.fetched_rows) == {b["max_rows_per_unit"] for b in engine.bounded}
    # the prefetched rows are the bounded counts per public key: C = 2 keeps 2 of person 1's rows in a
    counts = {r.key: r.counts["n|n"] for r in runner.fetched_rows[2]}
    assert counts == {"a": 2 + 1, "b": 2 + 1 + 2}


def test_fetched_hands_out_the_prefetched_rows_and_refuses_otherwise(engine: RecordingEngine) -> None:
    runner, ir = runner_for(engine, several_additive())
    n = next(a for a in ir.aggregates if a.name == "n")
    with pytest.raises(InternalError, match="no prefetched aggregates for 'n'"):
        runner.fetched(n, steps_of(runner, "n"))
    runner.prefetch(ir)
    assert runner.fetched(n, steps_of(runner, "n")) is runner.fetched_rows[2]
    med = next(a for a in ir.aggregates if a.name == "med")
    with pytest.raises(InternalError, match="no prefetched aggregates for 'med'"):
        runner.fetched(med, steps_of(runner, "med"))


def test_a_whole_release_scans_each_view_once(engine: RecordingEngine) -> None:
    """execute: the statistics' runs read the prefetched rows; no statistic scans its view again."""
    ir = by_region().agg(n=count(max_rows_per_unit=2), s=q_sum("hours", max_rows_per_unit=2)).build(SCHEMA)
    the_plan = plan(ir, epsilon=1, adjacency="add_remove")
    with deterministic_entropy(11):
        executed = execute(
            engine,  # type: ignore[arg-type]
            "t",
            ir=ir,
            plan=the_plan,
            unit_column="person",
            salt=SALT,
            engine_key=engine_key,
        )
    assert len(engine.bounded) == 1 and len(engine.scans) == 1
    assert [o.name for o in executed.outputs] == ["n", "s"]
    assert executed.keys == ["a", "b"] and all(len(o.values) == 2 for o in executed.outputs)
    assert executed.realised == [s.loss for s in the_plan.steps if s.output == "n"] + [
        s.loss for s in the_plan.steps if s.output == "s"
    ]


# ---------------------------------------------------------------- run


def test_run_dispatches_to_the_registered_statistic(engine: RecordingEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    runner, ir = runner_for(engine, several_additive())
    (agg,) = [a for a in ir.aggregates if a.name == "s"]
    seen: list[tuple[Any, Any, Any]] = []

    class Recorded(Statistic):
        kind = AggregateKind.SUM

        def run(self, runner: Any, agg: Any, steps: list[Any]) -> Any:
            seen.append((runner, agg, steps))
            return ["sentinel"], []

    monkeypatch.setitem(STATISTICS, AggregateKind.SUM, Recorded())
    steps = steps_of(runner, "s")
    assert runner.run(agg, steps) == (["sentinel"], [])
    assert seen == [(runner, agg, steps)]


def test_run_releases_a_count_per_public_key_at_the_planned_loss(engine: RecordingEngine) -> None:
    runner, ir = runner_for(engine, several_additive())
    runner.prefetch(ir)
    (agg,) = [a for a in ir.aggregates if a.name == "n"]
    steps = steps_of(runner, "n")
    with deterministic_entropy(5):
        outputs, losses = runner.run(agg, steps)
    (out,) = outputs
    assert out.name == "n" and len(out.values) == 2  # one value per public key of region
    assert all(isinstance(v, int) and v >= 0 for v in out.values)  # rounded, negatives set to 0
    assert losses == [steps[0].loss]
    assert len(engine.scans) == 2  # run read the prefetched rows: no new scan


# ---------------------------------------------------------------- collect_bound


def collect_bound_of(query: Query, population: int | None) -> int | None:
    ir = query.build(SCHEMA)
    return collect_bound(plan(ir, epsilon=1, adjacency="replace"), population)


def test_collect_bound_is_population_times_the_largest_c_of_a_collecting_step() -> None:
    query = by_region().agg(
        med=median("hours", max_rows_per_unit=2),
        p90=q_quantile("hours", 0.9, max_rows_per_unit=5),
        m=mean("hours", max_rows_per_unit=9),  # larger C, but a mean never collects
    )
    assert collect_bound_of(query, 100) == 100 * 5
    assert collect_bound_of(Query("t").agg(d=min_distance(["x"], max_rows_per_unit=3)), 7) == 7 * 3


def test_an_adaptive_mean_collects_for_its_clip_step() -> None:
    """The approximate bounds of an adaptive-clip mean read the column's values: the collect bound counts them."""
    query = by_region().agg(m=mean("hours", max_rows_per_unit=9, mechanism="adaptive_clip"))
    assert collect_bound_of(query, 100) == 100 * 9


def test_collect_bound_is_none_without_a_collecting_step_or_a_population() -> None:
    additive = by_region().agg(n=count(max_rows_per_unit=4), s=q_sum("hours", max_rows_per_unit=6))
    assert collect_bound_of(additive, 100) is None
    assert collect_bound_of(Query("t").agg(h=histogram("region", max_rows_per_unit=3)), 100) is None
    assert collect_bound_of(by_region().agg(med=median("hours", max_rows_per_unit=2)), None) is None


def test_collect_bound_counts_only_the_value_step_of_a_collecting_statistic() -> None:
    query = by_region().agg(med=median("hours", max_rows_per_unit=2))
    the_plan = plan(query.build(SCHEMA), epsilon=1, adjacency="replace")
    (value,) = [s for s in the_plan.steps if s.part is StepPart.VALUE]
    other = replace(value, part=StepPart.COUNT, max_rows_per_unit=50)  # a non-value step with a larger C
    widened = replace(the_plan, steps=(*the_plan.steps, other))
    assert collect_bound(widened, 10) == 10 * 2


# ---------------------------------------------------------------- _predicate


def test_predicate_binds_each_public_value_through_the_engine_key() -> None:
    assert _predicate("hours", ">=", Fraction(18), engine_key) == predicate("hours", ">=", 18)
    assert _predicate("hours", "<", Fraction(1, 4), engine_key) == predicate("hours", "<", 0.25)
    got = _predicate("region", "in", ("a", Fraction(3)), engine_key)
    assert got == predicate("region", "in", ["a", 3])
    assert isinstance(got.values[1], int)  # 3, not Fraction(3): the engine binds plain values
    assert _predicate("region", "==", "a", engine_key) == predicate("region", "==", "a")
    assert _predicate("region", "==", ("a",), engine_key) == predicate("region", "==", "a")  # one-value tuple


def test_the_bound_predicate_filters_before_bounding(engine: RecordingEngine) -> None:
    runner, _ = runner_for(engine, by_region().agg(n=count(max_rows_per_unit=2)))
    runner.where = [_predicate("region", "==", "a", engine_key)]
    view = runner.view(5)
    (row,) = engine.engine.group_aggregates(view, group_column=None, keys=None, aggregates=[count_rows()])
    assert row.counts["count_rows"] == 5 + 1  # the rows in a only (person 1's five, person 3's one)
