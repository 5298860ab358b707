"""Snapshots over HTTP (issue 14, Build 5): the current one only, no silent link, stale reservations resolved.

Against a real uvicorn service on PostgreSQL (``support.start_service``), 2 workers: an analyst who
names an older snapshot is refused with 409 ``snapshot_not_current`` and nothing is charged; after a
new snapshot is registered, through the service or by another process, every request on every
worker is served from it; identical data registered with other declarations is refused with 409
``registration_conflict`` and nothing is written; the service's schedule marks a crash-left
reservation ABANDONED without changing any budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from dpsense.core.errors import UsageError
from dpsense.core.privacy_loss import ApproxDP, PureDP
from dpsense.ledger import ChargeState
from dpsense.release import Budget, PrivacyPolicy, Session
from dpsense.service import cli
from dpsense.service._workers import ServiceConfig
from tests.system.service.support import POLICY, REGISTER, Service, leaked, new_key, planted_frame, spec

#: Concurrent requests per round: enough that both workers serve some.
CONCURRENT = 8


def small_spec(**changes: Any) -> dict[str, Any]:
    return spec(epsilon=0.05, **changes)


def concurrent_releases(service: Service, who: str, body: dict[str, Any]) -> list[httpx.Response]:
    with ThreadPoolExecutor(CONCURRENT) as pool:
        return list(pool.map(lambda _: service.api(who).release(body, key=new_key()), range(CONCURRENT)))


def write_snapshot(service: Service, name: str, persons: int) -> str:
    """Other data for a new snapshot of ``events`` (another number of persons), as a CSV in the data folder."""
    planted_frame(persons=persons).to_csv(service.data_dir / name, index=False)
    return name


def charge_count(service: Service) -> int:
    with service.ledger() as ledger:
        return len(ledger.charges("events"))


@pytest.fixture(scope="module")
def fresh(make_service: Callable[..., Service]) -> Callable[..., Service]:
    return make_service


def test_an_old_snapshot_is_refused_and_every_worker_serves_the_current_one(fresh: Callable[..., Service]) -> None:
    service = fresh()
    pinned = concurrent_releases(service, "alice", small_spec(snapshot="v1"))  # v1 is current: allowed
    assert {r.status_code for r in pinned} == {200} and {r.json()["snapshot"] for r in pinned} == {"v1"}

    steward = service.api("steward")
    v2 = steward.post(
        "/v1/steward/datasets", REGISTER | {"source": write_snapshot(service, "v2.csv", 2100), "snapshot": "v2"}
    )
    assert v2.status_code == 201, v2.text
    assert v2.json()["dataset"]["snapshot"] == "v2" and not v2.json()["linked"]

    charges = charge_count(service)
    for path, body in (
        ("/v1/releases", small_spec(snapshot="v1")),
        ("/v1/preview", small_spec(snapshot="v1")),
        ("/v1/releases/yaml", None),
    ):
        if body is None:
            text = "dataset: events\nsnapshot: v1\nepsilon: 0.05\naggregates:\n  n: {kind: count}\n"
            headers = {"Content-Type": "application/yaml", "Idempotency-Key": new_key()}
            refused = service.api("bob").request("POST", path, content=text.encode(), headers=headers)
        else:
            refused = service.api("bob").post(path, body, key=new_key())
        assert refused.status_code == 409, (path, refused.text)
        error = refused.json()["error"]
        assert error["code"] == "snapshot_not_current"
        assert (error["dataset"], error["snapshot"], error["current_snapshot"]) == ("events", "v1", "v2")
        assert "no policy" in error["rule"] and "'v2'" in error["fix"]
    assert charge_count(service) == charges  # refused before the ledger

    served = concurrent_releases(service, "alice", small_spec())
    assert {r.status_code for r in served} == {200}
    assert {r.json()["snapshot"] for r in served} == {"v2"}  # no worker stays on the v1 it served before
    sql = service.api("alice").post("/v1/sql", {"sql": "SELECT COUNT(*) FROM events", "epsilon": 0.05}, key=new_key())
    assert sql.status_code == 200 and sql.json()["snapshot"] == "v2", sql.text
    named = service.api("alice").release(small_spec(snapshot="v2"))
    assert named.status_code == 200 and named.json()["snapshot"] == "v2"
    assert not leaked(service)


def test_a_snapshot_registered_by_another_process_is_served_from_the_next_request(
    fresh: Callable[..., Service],
) -> None:
    service = fresh()
    warm = concurrent_releases(service, "carol", small_spec())
    assert {r.json()["snapshot"] for r in warm} == {"v1"}
    source = service.data_dir / write_snapshot(service, "v3.csv", 2200)
    with Session.open(service.ledger_url, analyst="steward", role="steward") as steward:  # not through the service
        steward.register_dataset(
            "events",
            source=str(source),
            privacy_unit=REGISTER["privacy_unit"],
            bounds={k: (v[0], v[1]) for k, v in REGISTER["bounds"].items()},
            keys=REGISTER["keys"],
            max_rows_per_unit=REGISTER["max_rows_per_unit"],
            max_groups_per_unit=REGISTER["max_groups_per_unit"],
            budget=Budget(40, 1e-8),
            policy=PrivacyPolicy(**POLICY),
            snapshot="v3",
        )
    served = concurrent_releases(service, "carol", small_spec())
    assert {r.status_code for r in served} == {200}
    assert {r.json()["snapshot"] for r in served} == {"v3"}
    refused = service.api("carol").release(small_spec(snapshot="v1"))
    assert refused.status_code == 409 and refused.json()["error"]["current_snapshot"] == "v3"


def test_the_same_data_with_other_declarations_is_refused_over_http(fresh: Callable[..., Service]) -> None:
    service = fresh()
    steward = service.api("steward")
    with service.ledger() as ledger:
        head = ledger.verify().head_hash
    for changes, named in (
        ({"adjacency": "replace"}, "adjacency: registered 'add_remove', given 'replace'"),
        ({"bounds": {"hours": [0, 12], "age": [0, 120]}}, "bounds of column 'hours'"),
        ({"max_rows_per_unit": 2}, "max_rows_per_unit: registered 5, given 2"),
    ):
        refused = steward.post("/v1/steward/datasets", REGISTER | {"name": "events_copy"} | changes)
        assert refused.status_code == 409, refused.text
        error = refused.json()["error"]
        assert error["code"] == "registration_conflict"
        assert (error["dataset"], error["snapshot"]) == ("events", "v1")
        assert [d for d in error["differences"] if named in d] and len(error["differences"]) == 1, error
        assert "register with the same declarations to link" in error["fix"]
    with service.ledger() as ledger:
        assert ledger.verify().head_hash == head and ledger.dataset_names() == ["events"]  # nothing written
    linked = steward.post("/v1/steward/datasets", REGISTER | {"name": "events_copy"})
    assert linked.status_code == 201, linked.text
    assert linked.json()["linked"] and linked.json()["dataset"]["name"] == "events"


def test_the_service_resolves_a_crash_left_reservation_on_its_schedule(fresh: Callable[..., Service]) -> None:
    service = fresh(extra_args=("--resolve-stale-after", "2", "--resolve-stale-every", "0.5"))
    with service.ledger() as ledger:
        # A process that reserved and died before commit: the reservation is never touched again.
        reservation = ledger.reserve(
            dataset="events", analyst="alice", request_id="crashed-job", loss=PureDP(1), cache_key=None
        )
        assert reservation.charge_id is not None
        spent = ledger.budget("events").spent
        deadline = time.monotonic() + 30
        state = None
        while time.monotonic() < deadline:
            state = next(c.state for c in ledger.charges("events") if c.request_id == "crashed-job")
            if state is ChargeState.ABANDONED:
                break
            time.sleep(0.25)
        assert state is ChargeState.ABANDONED, state
        assert ledger.budget("events").spent == spent  # it stays charged: nobody can prove no data was read
        assert spent == ApproxDP(1, 0)
    log = service.log.read_text()
    assert "ABANDONED" in log and "Traceback" not in log


def test_the_schedule_is_configured_by_flags_and_refuses_a_bad_age(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import uvicorn

    apps: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: apps.append(app))
    base = ["serve", "--ledger", f"sqlite:///{tmp_path / 'ledger.db'}", "--data-dir", str(tmp_path)]
    assert cli.main(base) == 0
    assert cli.main([*base, "--resolve-stale-after", "120", "--resolve-stale-every", "5"]) == 0
    assert cli.main([*base, "--resolve-stale-every", "0"]) == 0
    services = [app.app.state.service for app in apps]
    assert [(s.config.resolve_stale_after_s, s.config.resolve_stale_every_s) for s in services] == [
        (3600, 60),
        (120, 5),
        (3600, 0),
    ]
    assert [s.workers.resolves_stale for s in services] == [True, True, False]  # 0 turns it off
    for service in services:
        service.workers.close()
    for bad in ("-1", "nan", "inf"):
        assert cli.main([*base, "--resolve-stale-after", bad]) == 2
        assert "resolve_stale_after_s" in capsys.readouterr().err
    with pytest.raises(UsageError, match="resolve_stale_every_s"):
        ServiceConfig(ledger_url="sqlite://", data_dir=tmp_path, resolve_stale_every_s=True)
