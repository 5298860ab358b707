"""Dataset profiles: public facts per snapshot version, stored once, linked by keyed fingerprint."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dpsense.core import PureDP
from dpsense.core.errors import InvalidData, UnknownDataset, UsageError
from dpsense.ledger import Ledger, keyed_fingerprint
from tests.unit.ledger.support import rows

PROFILE = {"unit": "person_id", "adjacency": "add_remove", "columns": {"hours": {"kind": "numeric"}}}


@pytest.fixture
def ledger(ledger_url: str) -> Iterator[Ledger]:
    led = Ledger.open(ledger_url)
    led.register_dataset("events", budget=PureDP(4), fingerprint="fp-1")
    yield led
    led.close()


def test_a_saved_profile_reads_back_and_the_latest_is_the_default(ledger: Ledger) -> None:
    ledger.save_profile("events", snapshot="v1", fingerprint="fp-1", profile=PROFILE)
    second = PROFILE | {"adjacency": "replace"}
    ledger.save_profile("events", snapshot="v2", fingerprint="fp-2", profile=second)
    assert ledger.profile("events", "v1").profile == PROFILE
    latest = ledger.profile("events")
    assert (latest.snapshot, latest.fingerprint, latest.profile) == ("v2", "fp-2", second)
    assert ledger.snapshots("events") == ["v1", "v2"]
    assert ledger.dataset_names() == ["events"]


def test_saving_the_same_profile_twice_is_idempotent(ledger: Ledger, ledger_url: str) -> None:
    ledger.save_profile("events", snapshot="v1", fingerprint="fp-1", profile=PROFILE)
    ledger.save_profile("events", snapshot="v1", fingerprint="fp-1", profile=PROFILE)
    assert rows(ledger_url, "SELECT count(*) FROM dataset_profiles") == [(1,)]


def test_a_taken_snapshot_name_with_other_data_is_refused(ledger: Ledger) -> None:
    ledger.save_profile("events", snapshot="v1", fingerprint="fp-1", profile=PROFILE)
    with pytest.raises(UsageError, match="already registered") as info:
        ledger.save_profile("events", snapshot="v1", fingerprint="fp-other", profile=PROFILE)
    assert "name the new snapshot" in str(info.value)


def test_fingerprints_find_the_dataset_through_any_snapshot(ledger: Ledger) -> None:
    ledger.save_profile("events", snapshot="v2", fingerprint="fp-2", profile=PROFILE)
    assert ledger.dataset_for_fingerprint("fp-2") == ("events", "v2")
    assert ledger.dataset_for_fingerprint("fp-1") == ("events", None)
    assert ledger.dataset_for_fingerprint("fp-unknown") is None


def test_unknown_dataset_or_snapshot_and_non_json_profiles_are_refused(ledger: Ledger) -> None:
    with pytest.raises(UnknownDataset):
        ledger.save_profile("nope", snapshot="v1", fingerprint="x", profile=PROFILE)
    with pytest.raises(UsageError, match="no profile"):
        ledger.profile("events")
    with pytest.raises(InvalidData):
        ledger.save_profile("events", snapshot="v1", fingerprint="x", profile={"bad": float("nan")})


def test_the_audit_chain_records_the_profile_without_the_fingerprint(ledger: Ledger, ledger_url: str) -> None:
    secret_fp = keyed_fingerprint(ledger.fingerprint_key(), b"rows")
    ledger.save_profile("events", snapshot="v9", fingerprint=secret_fp, profile=PROFILE)
    payloads = [str(r[0]) for r in rows(ledger_url, "SELECT payload FROM audit_log")]
    assert any('"snapshot":"v9"' in p for p in payloads)
    assert not any(secret_fp in p for p in payloads)
    assert ledger.verify().ok
