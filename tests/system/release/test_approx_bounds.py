"""Bounds estimated with a private mechanism that is charged: dp.approx_bounds through the Session.

A column registered without bounds cannot be summed (that would need bounds read off the data); an
``approx_bounds`` release charges its ε, returns two power-of-two edges, and those released edges
then serve as the public clipping range of a later statistic.
"""

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


def _incomes() -> pd.DataFrame:
    persons = np.arange(6000)
    income = 1031.25 + (persons * 7919 % 5000) * 9.0  # in [1031.25, 46023): bins [2^10, 2^11) .. [2^15, 2^16)
    income[7] = 9.0e12  # one outlier: its bin holds a single row
    return pd.DataFrame(
        {"person_id": persons.astype(str), "region": np.array(REGIONS)[persons % 4], "income": income, "age": 30}
    )


def test_bounds_are_charged_and_then_used_as_a_public_clip(steward: dp.Session) -> None:
    frame = _incomes()
    events = register(steward, frame, bounds={"age": (0, 120)}, max_rows_per_unit=1)
    with pytest.raises(dp.DPSenseError, match="bounds"):
        steward.release(events.query().agg(s=dp.sum("income")), epsilon=1)
    assert steward.ledger.charges("events") == []

    query = events.query().agg(b=dp.approx_bounds("income"))
    plan = steward.preview(query, epsilon=1)
    (step,) = plan.steps
    assert (step.mechanism, step.sensitivity, step.max_rows_per_unit) == ("approx_bounds", 1, 1)
    release = steward.release(query, epsilon=1)
    assert release.charged == PureDP(1) and len(steward.ledger.charges("events")) == 1
    low, high = release.table["b_low"].iloc[0], release.table["b_high"].iloc[0]
    # The bulk's outer bins hold >= 130 rows each, far above τ = 8, so they always pass: the bounds
    # cover [1024, 65536). With probability >= 0.95 (the public success probability; the unit tests
    # check the exact law) no empty bin and not the lone outlier's passes, and the bounds are exactly that.
    assert low <= 1024.0 and high >= 65536.0
    assert np.log2(abs(low)) % 1 == 0 and np.log2(abs(high)) % 1 == 0
    assert "approx_bounds" in release.explain()
    again = steward.release(query, epsilon=1)
    assert again.cached and len(steward.ledger.charges("events")) == 1

    mean = steward.release(events.query().agg(m=dp.mean("income", bounds=(low, high))), epsilon=1)
    truth = float(np.clip(frame["income"], low, high).mean())
    assert abs(mean.table["m"].iloc[0] - truth) <= mean.table["m_error95"].iloc[0] * 3


def test_bounds_refuse_a_grouping_and_a_name_clash_before_any_charge(steward: dp.Session) -> None:
    events = register(steward, _incomes(), bounds={"age": (0, 120)}, max_rows_per_unit=1)
    with pytest.raises(dp.DPSenseError, match="whole dataset"):
        steward.release(events.query().group_by("region").agg(b=dp.approx_bounds("income")), epsilon=1)
    with pytest.raises(dp.DPSenseError, match="rename"):
        steward.release(events.query().agg(b=dp.approx_bounds("income"), b_low=dp.count()), epsilon=1)
    with pytest.raises(dp.DPSenseError, match="numeric"):
        steward.release(events.query().agg(b=dp.approx_bounds("region")), epsilon=1)
    assert steward.ledger.charges("events") == []


def test_replace_adjacency_doubles_the_histogram_sensitivity(steward: dp.Session) -> None:
    events = register(steward, _incomes(), bounds={"age": (0, 120)}, max_rows_per_unit=3, adjacency="replace")
    (step,) = steward.preview(events.query().agg(b=dp.approx_bounds("income")), epsilon=1).steps
    assert step.sensitivity == 6


def test_the_true_extremes_never_reach_the_release(steward: dp.Session) -> None:
    frame = _incomes()
    events = register(steward, frame, bounds={"age": (0, 120)}, max_rows_per_unit=1)
    release = steward.release(events.query().agg(b=dp.approx_bounds("income")), epsilon=1)
    text = repr(release.table) + release.explain() + repr(release.record)
    for true_value in (frame["income"].max(), frame["income"].min(), frame["income"].nlargest(2).iloc[1]):
        assert repr(float(true_value)) not in text and f"{true_value:g}" not in text
