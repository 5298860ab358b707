"""Correcting declarations (``Session.amend_dataset``): a new version of the snapshot on the same budget.

What a steward who got a declaration wrong tries, and what must hold: the amended version answers new
releases, the budget stays the dataset's, earlier releases keep their declarations, the same question
under new declarations is a new question, re-registering the data links to the version whose
declarations it repeats (and otherwise says what differs and how to amend), and an amendment that
changes nothing, changes the data or breaks a rule writes nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import dpsense as dp
from dpsense.core.errors import RegistrationConflict, UsageError
from tests.system.release.support import REGIONS, planted, policy, register


@pytest.fixture
def ledger(tmp_path: Path) -> str:
    source = tmp_path / "events.parquet"
    planted().to_parquet(source)
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with dp.Session.open(url, analyst="steward", role="steward") as steward:
        register(steward, planted(), source=source)
    return url


def test_an_amendment_is_a_new_version_that_new_releases_use_on_the_same_budget(ledger: str) -> None:
    with dp.Session.open(ledger, analyst="steward", role="steward") as steward:
        before = steward.release(steward.dataset("events").query().agg(m=dp.mean("hours")), epsilon=1)
        amended = steward.amend_dataset("events", bounds={"hours": (0, 48)}, max_groups_per_unit={"region": 1})
        assert amended.snapshot == "v1.2" and steward.dataset("events").snapshot == "v1.2"
        assert amended.amended == (
            "max_groups_per_unit: registered {}, given {'region': 1}",
            "bounds of column 'hours': registered ['0/1', '24/1'], given ['0/1', '48/1']",
        )
        spent = steward.budget("events").spent
        after = steward.release(amended.query().agg(m=dp.mean("hours")), epsilon=1)
        assert steward.budget("events").spent.epsilon == spent.epsilon + 1  # the same budget
    assert before.record.parameters["profile"]["columns"]["hours"]["bounds"] == ["0/1", "24/1"]
    assert after.record.parameters["profile"]["columns"]["hours"]["bounds"] == ["0/1", "48/1"]
    assert after.record.parameters["snapshot"] == "v1.2"
    with dp.Session.open(ledger, analyst="steward") as later:  # a later process: the newest version
        assert later.dataset("events").profile.max_groups_per_unit == {"region": 1}
    with dp.Session.open(ledger, analyst="steward") as older:  # the registered version stays answerable
        assert older.dataset("events", snapshot="v1").profile.columns["hours"].bounds == (0, 24)


def test_the_same_question_under_amended_declarations_is_a_new_question(ledger: str) -> None:
    with dp.Session.open(ledger, analyst="steward", role="steward") as steward:
        query = steward.dataset("events").query().agg(n=dp.count())
        first = steward.release(query, epsilon=1, request_id="a")
        assert steward.release(query, epsilon=1, request_id="b").cached
        steward.amend_dataset("events", max_groups_per_unit={"region": 1})  # the plan of n is unchanged
        again = steward.release(steward.dataset("events").query().agg(n=dp.count()), epsilon=1, request_id="c")
        assert not again.cached and again.record.release_id != first.record.release_id


def test_re_registering_links_to_the_version_it_repeats_and_otherwise_says_how_to_amend(
    ledger: str, tmp_path: Path
) -> None:
    source = tmp_path / "events.parquet"
    with dp.Session.open(ledger, analyst="steward", role="steward") as steward:
        steward.amend_dataset("events", bounds={"age": (0, 110)})
        original = register(steward, planted(), "copy1", source=source)
        assert original.linked and (original.name, original.snapshot) == ("events", "v1")
    with dp.Session.open(ledger, analyst="steward", role="steward") as steward:
        repeated = register(steward, planted(), "copy2", source=source, bounds={"hours": (0, 24), "age": (0, 110)})
        assert repeated.linked and (repeated.name, repeated.snapshot) == ("events", "v1.2")
    with (
        dp.Session.open(ledger, analyst="steward", role="steward") as steward,
        pytest.raises(RegistrationConflict, match="already registered") as caught,
    ):
        register(steward, planted(), "copy3", source=source, bounds={"hours": (0, 30), "age": (0, 110)})
    assert caught.value.snapshot == "v1.2"
    assert caught.value.differences == ["bounds of column 'hours': registered ['0/1', '24/1'], given ['0/1', '30/1']"]
    assert "amend_dataset" in caught.value.fix and "dpsense dataset amend" in caught.value.fix


def test_amendments_that_change_nothing_change_the_data_or_break_a_rule_write_nothing(
    ledger: str, tmp_path: Path
) -> None:
    with dp.Session.open(ledger, analyst="steward", role="steward") as steward:
        with pytest.raises(UsageError, match="changes no declaration"):
            steward.amend_dataset("events", bounds={"hours": (0, 24)})
        changed = tmp_path / "changed.parquet"
        planted(persons=601).to_parquet(changed)
        with pytest.raises(UsageError, match="keyed fingerprint differs"):
            steward.amend_dataset("events", bounds={"hours": (0, 48)}, source=changed)
        with pytest.raises(UsageError, match="not numeric in the source"):
            steward.amend_dataset("events", kinds={"region": "numeric"})
        with pytest.raises(UsageError, match="already has a snapshot of that name"):
            steward.amend_dataset("events", bounds={"hours": (0, 48)}, snapshot="v1")
        with pytest.raises(UsageError, match="max_rows_per_unit must be an integer"):
            steward.amend_dataset("events", max_rows_per_unit=0)
        with pytest.raises(dp.InvalidPrivacyParameter):
            steward.amend_dataset("events", policy=policy(per_release_epsilon=100))  # above the budget
        assert steward.ledger.snapshots("events") == ["v1"]
    with (
        dp.Session.open(ledger, analyst="alice") as analyst,
        pytest.raises(UsageError, match="steward"),
    ):
        analyst.amend_dataset("events", bounds={"hours": (0, 48)})


def test_removing_a_declaration_and_amending_a_frame_registration(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    frame = planted()
    with dp.Session.open(url, analyst="steward", role="steward", store=False) as steward:
        register(steward, frame, typical={"hours": (1, 3)})
        with pytest.raises(UsageError, match="registered from memory"):
            steward.amend_dataset("events", typical={"hours": None})
        amended = steward.amend_dataset(
            "events", typical={"hours": None}, keys={"region": [*REGIONS, "other"]}, source=frame
        )
        assert amended.profile.columns["hours"].typical is None
        assert set(amended.profile.columns["region"].keys or ()) == {*REGIONS, "other"}
