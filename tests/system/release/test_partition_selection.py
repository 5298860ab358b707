"""Private partition selection through the Session: group keys that are not public, released with δ > 0."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpsense as dp
from dpsense.core import ApproxDP
from tests.system.release.support import planted, register


@pytest.fixture
def steward(tmp_path: Path) -> Iterator[dp.Session]:
    with dp.Session.open(f"sqlite:///{tmp_path / 'ledger.db'}", analyst="steward", role="steward") as session:
        yield session


def cities() -> pd.DataFrame:
    """Large cities (hundreds of persons), and rare ones with a single person each."""
    big = {f"city{i}": 400 for i in range(5)}
    rare = {f"rare{i}": 1 for i in range(40)}
    names = [c for c, n in {**big, **rare}.items() for _ in range(n)]
    persons = np.arange(len(names))
    return pd.DataFrame(
        {"person_id": [f"p{p}" for p in persons], "city": names, "hours": (persons % 24).astype(float), "age": 30}
    )


def test_keys_without_public_list_are_selected_privately(steward: dp.Session) -> None:
    events = register(steward, cities(), keys={}, max_groups_per_unit={"city": 1})
    query = events.query().group_by("city").agg(n=dp.count(), m=dp.mean("hours"))
    release = steward.release(query, epsilon=1, delta=1e-8)
    released = set(release.table["city"])
    assert {f"city{i}" for i in range(5)} <= released  # 400 persons each: far above the threshold
    assert not any(c.startswith("rare") for c in released)  # one person each: released w.p. <= δ
    assert list(release.table["city"]) == sorted(released)
    assert release.charged == ApproxDP(1, 1e-8)
    text = release.explain()
    assert "partition selection" in text and "Korolova" in text


def test_partition_selection_needs_delta_and_a_group_bound_before_any_charge(steward: dp.Session) -> None:
    events = register(steward, cities(), keys={}, max_groups_per_unit={"city": 1})
    with pytest.raises(dp.DPSenseError, match="delta > 0"):
        steward.release(events.query().group_by("city").agg(n=dp.count()), epsilon=1)
    unbounded = register(steward, planted(), name="events2", keys={})
    with pytest.raises(dp.DPSenseError, match="max_groups_per_unit"):
        steward.release(unbounded.query().group_by("region").agg(n=dp.count()), epsilon=1, delta=1e-8)
    with pytest.raises(dp.DPSenseError, match="histogram needs public keys"):
        steward.release(unbounded.query().agg(h=dp.histogram("region")), epsilon=1, delta=1e-8)
    assert steward.ledger.charges("events") == [] and steward.ledger.charges("events2") == []


def test_partition_selection_in_sql(steward: dp.Session) -> None:
    register(steward, cities(), keys={}, max_groups_per_unit={"city": 1})
    release = steward.sql("SELECT city, COUNT(*) AS n FROM events GROUP BY city", epsilon=1, delta=1e-8)
    assert {f"city{i}" for i in range(5)} <= set(release.table["city"])


def rare_cities() -> pd.DataFrame:
    """Only keys seen with one person each: every one is kept with probability <= δ / k."""
    persons = np.arange(30)
    return pd.DataFrame(
        {"person_id": [f"p{p}" for p in persons], "city": [f"rare{p}" for p in persons], "hours": 1.0, "age": 30}
    )


def test_no_key_kept_gives_an_empty_table_charged_normally(steward: dp.Session) -> None:
    events = register(steward, rare_cities(), keys={}, max_groups_per_unit={"city": 1})
    query = events.query().group_by("city").agg(n=dp.count(), m=dp.mean("hours"), med=dp.median("hours"))
    release = steward.release(query, epsilon=1, delta=1e-8)
    assert len(release.table) == 0
    assert release.charged == ApproxDP(1, 1e-8)
    assert sorted(release.table.columns) == sorted(["city", "n", "m", "med"])
    # the same columns, in the same order, as a release of the same query that keeps keys
    kept = register(steward, cities(), name="events2", keys={}, max_groups_per_unit={"city": 1})
    full = steward.release(
        kept.query().group_by("city").agg(n=dp.count(), m=dp.mean("hours"), med=dp.median("hours")),
        epsilon=1,
        delta=1e-8,
    )
    # error columns are left out where every row's is empty (all of them in an empty table), and a
    # ``_noise_dominated`` column stands only beside its statistic's error column
    shown = [c for c in full.table.columns if not c.endswith(("_error95", "_noise_dominated"))]
    assert list(release.table.columns) == shown
    assert release.charged == ApproxDP(1, 1e-8)


def test_no_key_kept_over_sql_gives_an_empty_table(steward: dp.Session) -> None:
    register(steward, rare_cities(), keys={}, max_groups_per_unit={"city": 1})
    release = steward.sql("SELECT city, COUNT(*) AS n FROM events GROUP BY city", epsilon=1, delta=1e-8)
    assert sorted(release.table.columns) == ["city", "n"]
    assert len(release.table) == 0
    assert release.charged == ApproxDP(1, 1e-8)
