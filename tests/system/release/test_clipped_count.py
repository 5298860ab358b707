"""Clipping bias on request: a charged noisy count of the rows the clip moves, next to the mean it biases."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpsense as dp
from dpsense.core import PureDP
from tests.system.release.support import REGIONS, register


@pytest.fixture
def steward(tmp_path: Path) -> Iterator[dp.Session]:
    with dp.Session.open(f"sqlite:///{tmp_path / 'ledger.db'}", analyst="steward", role="steward") as session:
        yield session


def test_the_clipped_rows_are_counted_beside_the_mean(steward: dp.Session) -> None:
    persons = np.arange(8000)
    hours = np.where(persons % 10 == 0, 30.0, (persons % 20).astype(float))  # 10 % above the bound 24
    frame = pd.DataFrame(
        {"person_id": persons.astype(str), "region": np.array(REGIONS)[persons % 4], "hours": hours, "age": 40}
    )
    events = register(steward, frame, max_rows_per_unit=1)
    query = events.query().group_by("region").agg(m=dp.mean("hours"), clipped=dp.clipped_count("hours"))
    release = steward.release(query, epsilon=2)
    table = release.table.set_index("region")
    for region in REGIONS:
        truth = int(((frame["region"] == region) & (frame["hours"] > 24)).sum())
        assert abs(table.loc[region, "clipped"] - truth) <= table.loc[region, "clipped_error95"] * 3
    assert release.charged == PureDP(2)
    plan = steward.preview(query, epsilon=2)
    (step,) = [s for s in plan.steps if s.output == "clipped_count(hours)"]  # the plan names it by meaning
    assert (step.mechanism, step.sensitivity) == ("laplace", 1)  # one row per unit


def test_the_clipped_count_needs_bounds_before_any_charge(steward: dp.Session) -> None:
    frame = pd.DataFrame({"person_id": ["a", "b"], "region": ["north", "south"], "hours": [1.0, 2.0], "age": [1, 2]})
    events = register(steward, frame, bounds={"age": (0, 120)})
    with pytest.raises(dp.DPSenseError, match="bounds"):
        steward.release(events.query().agg(c=dp.clipped_count("hours")), epsilon=1)
    assert steward.ledger.charges("events") == []
