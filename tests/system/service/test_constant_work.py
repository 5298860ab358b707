"""Every Session the service builds carries its ``constant_work`` (a timing side channel, docs/service.md).

``constant_work=K`` makes every smooth-sensitivity step evaluate exactly K terms of its family
instead of stopping early on the data. The service has no way to turn it off: ``ServiceConfig``
refuses anything but a positive integer, ``dpsense serve --constant-work`` sets it, and a release of
a minimum distance (the smooth mechanism) goes through with it, in-process and over HTTP.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import dpsense as dp
from dpsense import mechanisms
from dpsense.core.errors import UsageError
from dpsense.engine import DuckDBEngine
from dpsense.ledger import TokenIdentity
from dpsense.service import cli
from dpsense.service._workers import DEFAULT_CONSTANT_WORK, ServiceConfig, Worker, service_session
from tests.system.release.support import planted, register
from tests.system.service.support import REGISTER, Service, new_key, planted_frame

GAP = {"gap": {"kind": "min_distance", "columns": ["hours"]}}


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The ``constant_work`` of every smooth minimum-distance release (the real mechanism runs)."""
    seen: list[Any] = []
    real = mechanisms.smooth_min_distance

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("constant_work"))
        return real(*args, **kwargs)

    monkeypatch.setattr(mechanisms, "smooth_min_distance", recording)
    return seen


def test_the_default_is_on_and_anything_but_a_positive_integer_is_refused(tmp_path: Path) -> None:
    assert ServiceConfig(ledger_url="sqlite://", data_dir=tmp_path).constant_work == DEFAULT_CONSTANT_WORK == 256
    for bad in (0, -1, True, 2.5, "64", None, (1 << 16) + 1):
        with pytest.raises(UsageError, match="constant_work") as raised:
            ServiceConfig(ledger_url="sqlite://", data_dir=tmp_path, constant_work=bad)  # type: ignore[arg-type]
        assert "--constant-work" in raised.value.fix


def test_the_workers_sessions_and_the_stewards_carry_constant_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _recording(monkeypatch)
    config = ServiceConfig(ledger_url=f"sqlite:///{tmp_path / 'ledger.db'}", data_dir=tmp_path, constant_work=96)
    worker = Worker(config)
    try:
        engine = DuckDBEngine()
        with service_session(config, worker.ledger, analyst="steward", role="steward", engine=engine) as steward:
            source = tmp_path / "events.csv"
            planted().to_csv(source, index=False)
            register(steward, planted(), source=str(source), kinds={"hours": "point"})
            gap = steward.release(steward.dataset("events").query().agg(g=dp.min_distance(["hours"])), epsilon=1)
            assert 0 <= gap.table["g"].iloc[0] <= 24
            steward.add_analyst("alice")
        engine.close()
        session = worker.session(TokenIdentity("t1", "alice", "analyst"), worker.generation)
        events = session.dataset("events")
        release = session.release(events.query().agg(g=dp.min_distance(["hours"])), epsilon=0.5, request_id="a1")
        assert 0 <= release.table["g"].iloc[0] <= 24
    finally:
        worker.close()
    assert seen == [96, 96]


def test_dpsense_serve_passes_constant_work_to_the_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    apps: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: apps.append(app))
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    base = ["serve", "--ledger", url, "--data-dir", str(tmp_path)]
    assert cli.main([*base, "--constant-work", "512"]) == 0
    assert cli.main(base) == 0
    assert [app.app.state.service.config.constant_work for app in apps] == [512, DEFAULT_CONSTANT_WORK]


def test_dpsense_serve_refuses_a_bad_constant_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert cli.main(["serve", "--ledger", url, "--data-dir", str(tmp_path), "--constant-work", "0"]) == 2
    error = capsys.readouterr().err
    assert "constant_work" in error and "--constant-work 256" in error
    with pytest.raises(SystemExit):
        cli.main(["serve", "--ledger", url, "--data-dir", str(tmp_path), "--constant-work", "lots"])


def test_a_minimum_distance_is_released_over_http_with_constant_work(make_service: Callable[..., Service]) -> None:
    service = make_service(constant_work=64)
    steward = service.api("steward")
    planted_frame(persons=500).to_csv(service.data_dir / "points.csv", index=False)  # not the events' data
    points = REGISTER | {"name": "points", "source": "points.csv", "kinds": {"hours": "point"}}
    assert steward.post("/v1/steward/datasets", points).status_code == 201
    body = {"dataset": "points", "epsilon": 1, "aggregates": GAP}
    response = service.api("alice").post("/v1/releases", body, key=new_key())
    assert response.status_code == 200, response.text
    doc = response.json()
    assert "smooth_min_distance" in doc["explain"]
    assert doc["charged"] is not None and len(doc["rows"]) == 1
    assert "unexpected" not in service.log.read_text()
