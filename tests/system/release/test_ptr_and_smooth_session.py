"""Propose-Test-Release and smooth-sensitivity quantiles through the Session (a noisy count as the public n)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpsense as dp
from dpsense.core import ApproxDP, PureDP
from dpsense.core.adjacency import Adjacency
from dpsense.query import AggregateKind, PlanStep, StepPart
from dpsense.statistics import ALLOWED_MECHANISMS
from dpsense.statistics._steps import ptr_record_budget
from tests.system.release.support import REGIONS, planted, policy, register
from tests.system.release.test_beyond_global_session import edge_table, register_graph


@pytest.fixture
def steward(tmp_path: Path) -> Iterator[dp.Session]:
    with dp.Session.open(f"sqlite:///{tmp_path / 'ledger.db'}", analyst="steward", role="steward") as session:
        yield session


def test_a_smooth_median_runs_on_a_noisy_public_n(steward: dp.Session) -> None:
    # 10,000 persons per region over 61 ages: the median is stable for hundreds of changes, so the
    # smooth bound (and the heavy-tailed Cauchy noise scaled to it) is tiny
    frame = planted(persons=40_000)
    events = register(steward, frame)
    query = events.query().group_by("region").agg(m=dp.median("age", mechanism="smooth_median"))
    release = steward.release(query, epsilon=2)
    table = release.table.set_index("region")
    for region in REGIONS:
        truth = float(np.median(frame.loc[frame["region"] == region, "age"]))
        assert abs(table.loc[region, "m"] - truth) <= 10, region  # ages 20..80, dense
    steps = steward.preview(query, epsilon=2).steps
    assert [s.part for s in steps] == [StepPart.COUNT, StepPart.VALUE]
    assert release.charged == PureDP(2)


def test_a_ptr_median_answers_on_stable_data(steward: dp.Session) -> None:
    # one row per person, ~330 persons per age and the median rank mid-block: its local sensitivity
    # stays 0 for ~160 changes, far above the test's threshold ln(1/δ)/ε_test ≈ 41, so the test passes
    # and the Laplace noise has scale b / ε_release = 0.5 / 0.5
    frame = planted(persons=20_000)
    events = register(steward, frame, max_rows_per_unit=1)
    agg = dp.median("age", mechanism="ptr_order_statistic", proposed_bound=0.5)
    release = steward.release(events.query().agg(m=agg), epsilon=2, delta=1e-9)
    truth = float(np.median(frame.groupby("person_id")["age"].first()))
    assert abs(release.table["m"].iloc[0] - truth) <= 12  # |Laplace(1)| > 12 w.p. e^-12
    assert release.charged == ApproxDP(2, Fraction(1, 10**9))
    assert "passed its test" in release.explain()


def test_a_ptr_refusal_is_an_answer_and_is_charged(steward: dp.Session) -> None:
    frame = planted(persons=40)  # 40 persons spread over ages 20..80: far from stable for b = 1e-6
    events = register(steward, frame)
    agg = dp.median("age", mechanism="ptr_order_statistic", proposed_bound=1e-6)
    release = steward.release(events.query().agg(m=agg), epsilon=1, delta=1e-9)
    assert pd.isna(release.table["m"].iloc[0])  # the refusal: no value
    assert "refused" in release.explain()
    assert release.charged == ApproxDP(1, Fraction(1, 10**9))
    assert steward.budget("events").spent == ApproxDP(1, Fraction(1, 10**9))


def test_ptr_trimmed_mean_min_distance_and_triangles_run(steward: dp.Session) -> None:
    events = register(steward, planted(persons=3000), kinds={"hours": "point"})
    trimmed = dp.trimmed_mean("age", 0.1, mechanism="ptr_trimmed_mean", proposed_bound=0.5)
    release = steward.release(events.query().agg(t=trimmed), epsilon=1, delta=1e-9)
    value = release.table["t"].iloc[0]
    assert pd.isna(value) or 0 <= value <= 120
    closest = dp.min_distance(["hours"], mechanism="ptr_min_distance", proposed_bound=0.01)
    release = steward.release(events.query().agg(g=closest), epsilon=1, delta=1e-9)
    assert pd.isna(release.table["g"].iloc[0]) or 0 <= release.table["g"].iloc[0] <= 24
    edges = edge_table(8, list(itertools.combinations(range(8), 2)))
    graph = register_graph(steward, edges, 8, budget=dp.Budget(epsilon=10, delta=1e-6))
    tri = dp.triangle_count(["src", "dst"], mechanism="ptr_triangle_count", proposed_bound=8)
    release = steward.release(graph.query().agg(t=tri), epsilon=1, delta=1e-9)
    assert pd.isna(release.table["t"].iloc[0]) or 0 <= release.table["t"].iloc[0] <= 56


def test_ptr_under_replace_adjacency(steward: dp.Session) -> None:
    events = register(steward, planted(persons=3000), adjacency="replace", policy=policy())
    agg = dp.median("age", mechanism="ptr_order_statistic", proposed_bound=1)
    release = steward.release(events.query().agg(m=agg), epsilon=1, delta=1e-9)
    assert release.charged == ApproxDP(1, Fraction(1, 10**9))


@pytest.mark.parametrize(
    ("agg", "kwargs", "match"),
    [
        (lambda: dp.median("age", mechanism="ptr_order_statistic", proposed_bound=1), {}, "delta > 0"),
        (lambda: dp.median("age", mechanism="ptr_order_statistic"), {"delta": 1e-9}, "proposed_bound"),
        (lambda: dp.median("age", proposed_bound=1), {"delta": 1e-9}, "only by Propose-Test-Release"),
        (lambda: dp.median("age", mechanism="ptr_order_statistic", proposed_bound=-1), {}, "> 0"),
    ],
)
def test_ptr_requests_are_checked_before_any_charge(steward: dp.Session, agg: object, kwargs: dict, match: str) -> None:
    events = register(steward, planted())
    with pytest.raises(dp.DPSenseError, match=match):
        steward.release(events.query().agg(m=agg()), epsilon=1, **kwargs)  # type: ignore[operator]
    assert steward.ledger.charges("events") == []


def test_every_ptr_mechanism_is_offered_for_its_statistic() -> None:
    offered = {name for names in ALLOWED_MECHANISMS.values() for name in names if name.startswith("ptr_")}
    assert offered == {"ptr_order_statistic", "ptr_trimmed_mean", "ptr_min_distance", "ptr_triangle_count"}


@pytest.mark.parametrize("rows", [1, 2, 5, 30])
@pytest.mark.parametrize("changes", [1, 2])
@pytest.mark.parametrize("eps", [Fraction(1, 10), Fraction(1), Fraction(4)])
def test_ptr_group_privacy_keeps_the_unit_within_the_charge(rows: int, changes: int, eps: Fraction) -> None:
    delta = Fraction(1, 10**8)
    step = PlanStep(
        output="m",
        part=StepPart.VALUE,
        statistic=AggregateKind.MEDIAN,
        mechanism="ptr_order_statistic",
        noise=None,
        theorem="",
        chosen_by="analyst",
        reason="",
        adjacency=Adjacency.ADD_REMOVE,
        max_rows_per_unit=rows,
        max_groups_per_unit=None,
        sensitivity=None,
        norm=None,
        loss=ApproxDP(eps, delta),
        mechanism_epsilon=eps / (rows * changes),
        record_cost=rows * changes,
    )
    eps_r, delta_r = ptr_record_budget(step)
    k = rows * changes
    assert eps_r * k == eps
    unit_delta = k * math.exp((k - 1) * float(eps_r)) * float(delta_r)  # Vadhan 2017, Lemma 2.2
    assert unit_delta <= float(delta)
    assert unit_delta >= 0.999 * float(delta)  # and not needlessly small


def test_an_ungrouped_smooth_median_reads_a_window_of_ranks_not_the_column(
    steward: dp.Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = planted(persons=40_000)
    events = register(steward, frame)
    engine = steward._engine  # the session's real DuckDB engine

    def no_collect(*args: object, **kwargs: object) -> None:
        raise AssertionError("the column was collected")

    monkeypatch.setattr(engine, "collect", no_collect)
    windows: list[int] = []
    real = engine.order_statistics_window

    def recording(view: object, **kwargs: int) -> object:
        windows.append(2 * kwargs["width"] + 1)
        return real(view, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "order_statistics_window", recording)
    release = steward.release(events.query().agg(m=dp.median("age", mechanism="smooth_median")), epsilon=2)
    assert abs(release.table["m"].iloc[0] - float(np.median(frame["age"]))) <= 10
    assert windows and max(windows) < len(frame) / 10  # a window around the rank, not 120,000 values
