"""End to end through the Python API on real DuckDB and a real SQLite / PostgreSQL ledger."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import dpsense as dp
from dpsense.core import ApproxDP, RegistrationConflict
from tests.system.release.support import REGIONS, planted, policy, register


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture
def steward(url: str) -> Iterator[dp.Session]:
    with dp.Session.open(url, analyst="steward", role="steward") as session:
        yield session


def grouped_query(dataset: dp.Dataset) -> dp.Query:
    return (
        dataset.query()
        .group_by("region")
        .max_groups_per_unit(1)
        .agg(
            people=dp.count_units(),
            events=dp.count(),
            mean_hours=dp.mean("hours"),
            median_age=dp.median("age"),
            p90=dp.quantile("age", 0.9),
            total_hours=dp.sum("hours"),
        )
    )


def test_a_grouped_release_has_every_public_key_accuracy_and_the_exact_charge(steward: dp.Session) -> None:
    events = register(steward, planted())
    release = steward.release(grouped_query(events), epsilon=1.5)
    table = release.table
    assert list(table["region"]) == sorted(REGIONS)  # keys in canonical (sorted) order
    assert {"people", "people_error95", "events", "mean_hours", "mean_hours_error95", "median_age", "p90"} <= set(
        table.columns
    )
    assert "median_age_error95" not in table.columns  # no public value-unit bound for a quantile
    assert (table["people"] >= 0).all() and (table["events"] >= 0).all()
    assert table["mean_hours"].between(0, 24).all() and table["median_age"].between(0, 120).all()
    # 150 persons per region: with ε/6 per statistic the counts are still within a few hundred
    assert (abs(table["people"] - 150) < 400).all()
    assert release.charged == dp.PureDP(1.5)
    assert steward.budget("events").spent == ApproxDP(1.5, 0)
    assert release.cached is False
    text = release.explain()
    assert "laplace" in text and "Dwork-Roth" in text and "Post-processing" in text


def test_the_same_request_returns_the_stored_release_at_no_cost(steward: dp.Session, url: str) -> None:
    events = register(steward, planted())
    first = steward.release(grouped_query(events), epsilon=1)
    again = steward.release(grouped_query(events), epsilon=1)
    assert again.cached and again.charged is None
    pd.testing.assert_frame_equal(first.table, again.table)
    steward.add_analyst("bob")
    with dp.Session.open(url, analyst="bob") as bob:
        bob.dataset("events", source=planted())
        other = bob.release(grouped_query(events), epsilon=1)  # another analyst, same question: no fresh noise
    assert other.cached
    pd.testing.assert_frame_equal(first.table, other.table)
    assert steward.budget("events").spent == ApproxDP(1, 0)
    different = steward.release(grouped_query(events), epsilon=0.5)  # another ε is another request
    assert not different.cached
    assert steward.budget("events").spent == ApproxDP(1.5, 0)


def test_a_retried_request_id_charges_once(steward: dp.Session) -> None:
    events = register(steward, planted())
    query = events.query().agg(n=dp.count())
    first = steward.release(query, epsilon=0.5, request_id="job-1")
    second = steward.release(query, epsilon=0.5, request_id="job-1")
    assert second.cached and second.record.release_id == first.record.release_id
    assert len(steward.ledger.charges("events")) == 1


def test_registering_the_same_data_again_links_to_its_budget(steward: dp.Session) -> None:
    first = register(steward, planted())
    steward.release(first.query().agg(n=dp.count()), epsilon=1)
    copy = register(steward, planted(), name="events_copy")
    assert copy.linked and copy.name == "events"
    assert steward.datasets() == ["events"]
    assert steward.budget("events").spent == ApproxDP(1, 0)


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"adjacency": "replace"}, "adjacency: registered 'add_remove', given 'replace'"),
        ({"bounds": {"hours": (0, 12), "age": (0, 120)}}, "bounds of column 'hours'"),
        ({"keys": {"region": ["north", "south"]}}, "keys of column 'region'"),
        ({"policies": {"hours": "clamp"}}, "policy of column 'hours'"),
        ({"max_rows_per_unit": 2}, "max_rows_per_unit: registered 5, given 2"),
        ({"budget": dp.Budget(epsilon=99, delta=1e-8)}, "budget: registered"),
        ({"policy": policy(population=5000)}, "privacy policy population: registered 1000000, given 5000"),
    ],
)
def test_the_same_data_with_other_declarations_is_refused_and_nothing_is_written(
    steward: dp.Session, changes: dict[str, object], named: str
) -> None:
    register(steward, planted())
    before = steward.verify_log()
    with pytest.raises(RegistrationConflict) as refused:
        register(steward, planted(), name="events_copy", **changes)
    assert refused.value.dataset == "events" and refused.value.snapshot == "v1"
    assert any(named in d for d in refused.value.differences), refused.value.differences
    assert len(refused.value.differences) == 1  # only the declaration that differs is named
    assert "already registered as dataset 'events'" in str(refused.value)
    assert "register with the same declarations to link" in refused.value.fix
    after = steward.verify_log()
    assert (after.entries, after.head_hash) == (before.entries, before.head_hash)
    assert steward.datasets() == ["events"] and steward.ledger.snapshots("events") == ["v1"]


def test_another_privacy_unit_is_refused_even_as_a_new_snapshot_of_the_same_data(steward: dp.Session, url: str) -> None:
    frame = planted().assign(household=lambda f: f["person_id"].str[:-1])
    register(steward, frame)
    with dp.Session.open(url, analyst="steward", role="steward") as again:
        with pytest.raises(RegistrationConflict, match="privacy_unit: registered 'person_id', given 'household'"):
            register(again, frame, snapshot="v2", privacy_unit="household")
        same = register(again, frame, snapshot="v2")  # the same declarations: linked to v1, nothing new
    assert same.linked and same.snapshot == "v1"
    assert steward.ledger.snapshots("events") == ["v1"]


def test_a_changed_source_is_not_the_registered_snapshot(steward: dp.Session, url: str) -> None:
    register(steward, planted())
    changed = planted()
    changed.loc[0, "hours"] = 3.25
    steward.add_analyst("bob")
    with dp.Session.open(url, analyst="bob") as bob, pytest.raises(dp.DPSenseError, match="fingerprint differs"):
        bob.dataset("events", source=changed)


def test_releases_from_a_file_source_reattach_from_the_registered_path(tmp_path: Path, url: str) -> None:
    path = tmp_path / "events.parquet"
    planted().to_parquet(path, index=False)
    with dp.Session.open(url, analyst="steward", role="steward") as steward:
        register(steward, planted(), source=path)
        steward.add_analyst("carol")
    with dp.Session.open(url, analyst="carol") as carol:
        release = carol.release(carol.dataset("events").query().agg(n=dp.count()), epsilon=0.5)
        assert release.table["n"].iloc[0] >= 0
        assert [r.release_id for r in carol.history("events")] == [release.record.release_id]


def test_filters_apply_before_the_release(steward: dp.Session) -> None:
    events = register(steward, planted(persons=2000, rows_per_person=1))
    query = events.query().filter("region", "==", "north").filter("age", ">=", 50).agg(n=dp.count())
    expected = sum(1 for p in range(2000) if p % 4 == 0 and 20 + (p * 7) % 61 >= 50)
    release = steward.release(query, epsilon=2)
    assert abs(release.table["n"].iloc[0] - expected) < 40  # Laplace(1/2): |noise| < 40 w.p. 1 - e^-80


def test_the_release_removes_its_temporary_tables(steward: dp.Session) -> None:
    events = register(steward, planted())
    steward.release(grouped_query(events), epsilon=1)
    assert steward._engine.temporary_names() == []


def test_postgresql_ledger_end_to_end(ledger_url: str) -> None:
    with dp.Session.open(ledger_url, analyst="steward", role="steward") as steward:
        events = register(steward, planted())
        release = steward.release(grouped_query(events), epsilon=1)
        assert steward.release(grouped_query(events), epsilon=1).cached
        assert steward.budget("events").spent == ApproxDP(1, 0)
        assert steward.verify_log().ok
        assert release.record.parameters["policy"]["population"] == 1_000_000


@pytest.mark.parametrize(("column", "keys"), [("region", ["east", "north"]), ("age", [20, 21, 99])])
def test_a_histogram_is_released_alone_with_its_keys_as_rows(steward: dp.Session, column: str, keys: list) -> None:
    events = register(steward, planted())
    release = steward.release(events.query().agg(h=dp.histogram(column, keys=keys)), epsilon=1)
    table = release.table
    assert list(table[column]) == sorted(keys) and (table["h"] >= 0).all()
    assert table["h_error95"].notna().all()


def test_min_distance_is_refused_on_replace_datasets(steward: dp.Session) -> None:
    events = register(steward, planted(), adjacency="replace", kinds={"hours": "point"})
    with pytest.raises(dp.DPSenseError, match="add/remove"):
        steward.release(events.query().agg(g=dp.min_distance(["hours"])), epsilon=1)
    assert steward.ledger.charges("events") == []


def test_quantile_accuracy_is_stated_in_ranks(steward: dp.Session) -> None:
    events = register(steward, planted())
    release = steward.release(events.query().agg(m=dp.median("age")), epsilon=1)
    assert "ranked" in release.explain() and "Dwork-Roth Thm 3.11" in release.explain()


@pytest.mark.parametrize("mechanism", ["smooth_min_distance", "inverse_sensitivity_min_distance", "ptr_min_distance"])
def test_min_distance_on_an_empty_view_is_released_not_a_failure(steward: dp.Session, mechanism: str) -> None:
    """No point left after the filter (an (0, 2) array): an answer in [0, diameter], charged as planned."""
    events = register(
        steward,
        planted(),
        adjacency="add_remove",
        kinds={"hours": "point", "age": "point"},
        bounds={"hours": (0, 24), "age": (0, 24)},
        keys={"region": [*REGIONS, "nowhere"]},  # a declared key no row has
    )
    extra = {"proposed_bound": 0.01} if mechanism.startswith("ptr") else {}
    gap = dp.min_distance(["hours", "age"], mechanism=mechanism, **extra)
    query = events.query().filter("region", "==", "nowhere").agg(g=gap)
    release = steward.release(query, epsilon=1, delta=1e-9) if extra else steward.release(query, epsilon=1)
    value = release.table["g"].iloc[0]
    assert (pd.isna(value) and mechanism.startswith("ptr")) or 0 <= value <= 24 * 2**0.5
    assert len(steward.ledger.charges("events")) == 1
