"""Variance through the Session: three noisy sums (centred sum, centred squares, count) on DuckDB + SQLite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpsense as dp
from dpsense.core import PureDP
from tests.system.release.support import REGIONS, planted, policy, register


@pytest.fixture
def steward(tmp_path: Path) -> Iterator[dp.Session]:
    with dp.Session.open(f"sqlite:///{tmp_path / 'ledger.db'}", analyst="steward", role="steward") as session:
        yield session


def population_variance(frame: pd.DataFrame, column: str, low: float, high: float) -> pd.Series:
    clipped = frame.assign(v=frame[column].clip(low, high))
    return clipped.groupby("region")["v"].var(ddof=0)


def test_a_grouped_variance_is_close_to_the_truth_within_its_error_bound(steward: dp.Session) -> None:
    frame = planted(persons=4000)  # 3 rows per person, every row kept (C = 5)
    events = register(steward, frame, budget=dp.Budget(epsilon=10, delta=1e-8))
    query = events.query().group_by("region").agg(v=dp.variance("hours"), m=dp.mean("hours"))
    release = steward.release(query, epsilon=2)
    table = release.table.set_index("region")
    truth = population_variance(frame, "hours", 0, 24)
    for region in REGIONS:
        error = abs(table.loc[region, "v"] - truth[region])
        assert error <= table.loc[region, "v_error95"], region
        assert error < 0.5 * truth[region], region  # useful, not just within a loose bound
    assert (table["v"] >= 0).all() and (table["v"] <= 144).all()
    assert release.charged == PureDP(2)


def test_the_explain_report_names_the_three_parts_and_their_sensitivities(steward: dp.Session) -> None:
    events = register(steward, planted())
    plan_text = steward.preview(events.query().agg(v=dp.variance("hours")), epsilon=1).explain()
    assert "noisy sum of squared centered values" in plan_text
    assert "noisy centered sum" in plan_text and "noisy count" in plan_text
    assert "720/1" in plan_text or "720" in plan_text  # C h^2 = 5 * 12^2 for bounds [0, 24]


def test_variance_error_bound_covers_at_least_95_percent_of_groups(steward: dp.Session) -> None:
    # 100 public groups of 1,000 persons each, one row per person; ε = 1 per release
    groups = 100
    persons = np.arange(groups * 1000)
    frame = pd.DataFrame(
        {
            "person_id": persons.astype(str),
            "region": (persons % groups).astype(np.int64),
            "hours": (persons * 7919 % 97) / 4.0,
            "age": np.full(persons.size, 40, dtype=np.int64),
        }
    )
    keys = list(range(groups))
    events = register(steward, frame, keys={"region": keys}, max_rows_per_unit=1)
    release = steward.release(events.query().group_by("region").agg(v=dp.variance("hours")), epsilon=1)
    table = release.table.set_index("region")
    truth = population_variance(frame, "hours", 0, 24)
    covered = np.mean([abs(table.loc[k, "v"] - truth[k]) <= table.loc[k, "v_error95"] for k in keys])
    assert covered >= 0.95
    # and the bound is informative: the reported error shrinks with the group size
    assert table["v_error95"].median() < 144 / 10


def test_variance_and_stddev_in_sql_share_one_release(steward: dp.Session) -> None:
    register(steward, planted(persons=2000))
    first = steward.sql("SELECT region, VARIANCE(hours) AS v FROM events GROUP BY region", epsilon=1)
    second = steward.sql("SELECT region, STDDEV(hours) AS s FROM events GROUP BY region", epsilon=1)
    assert second.cached
    np.testing.assert_allclose(second.table["s"] ** 2, first.table["v"])
    assert steward.budget("events").spent.epsilon == 1


def test_variance_under_replace_adjacency(steward: dp.Session) -> None:
    events = register(steward, planted(persons=2000), adjacency="replace", policy=policy())
    release = steward.release(events.query().agg(v=dp.variance("age")), epsilon=1)
    assert 0 <= release.table["v"].iloc[0] <= 3600
