"""``serve --processes N``: several service processes on one port share only the ledger, and that suffices.

Each process has its own worker threads, ledger connections, snapshot copy and noise pools; the
charge, single flight and the stored releases are the ledger's, so identical requests spread over
the processes are still charged and drawn once. A release's response carries the budgets as its own
reserve transaction left them (``Reservation.budgets``), which a read right after agrees with.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from dpsense.service._workers import ServiceConfig
from dpsense.service.cli import main
from tests.system.service.support import Service, new_key, spec

CLIENTS = 12


@pytest.fixture(scope="module")
def two_processes(make_service: Callable[..., Service]) -> Service:
    return make_service(extra_args=("--processes", "2"))


def test_a_release_answers_with_the_budgets_its_charge_left(two_processes: Service) -> None:
    alice = two_processes.api("alice")
    answer = alice.release(spec(0.25, filters=[{"column": "age", "op": ">=", "value": 33}]))
    assert answer.status_code == 200, answer.text
    read = alice.get("/v1/datasets/events/budget").json()
    assert answer.json()["budget"] == read  # nobody else spent in between
    assert answer.json()["budget"]["total"]["spent"]["epsilon"] != "0"


def test_identical_requests_over_two_processes_are_charged_once(two_processes: Service) -> None:
    question = spec(0.1, filters=[{"column": "age", "op": ">=", "value": 44}])
    barrier = threading.Barrier(CLIENTS)
    answers: list[dict[str, Any]] = []
    lock = threading.Lock()

    def ask(who: str) -> None:
        headers = {"Authorization": f"Bearer {two_processes.tokens[who]}", "Idempotency-Key": new_key()}
        with httpx.Client(base_url=two_processes.url, timeout=60) as client:  # its own connection
            barrier.wait()
            response = client.post("/v1/releases", json=question, headers=headers)
        assert response.status_code == 200, response.text
        with lock:
            answers.append(response.json())

    threads = [threading.Thread(target=ask, args=(("alice", "bob")[i % 2],)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(answers) == CLIENTS
    assert len({a["release_id"] for a in answers}) == 1
    assert sum(a["charged"] is not None for a in answers) == 1
    assert len({str(a["rows"]) for a in answers}) == 1
    with two_processes.ledger() as ledger:
        assert ledger.verify().ok


def test_the_configuration_reaches_every_process_unchanged(tmp_path: Path) -> None:
    config = ServiceConfig(ledger_url="sqlite:///x.db", data_dir=tmp_path, workers=3, min_latency_s=0.5)
    assert ServiceConfig.from_env(config.to_env()) == config


def test_a_bad_number_of_processes_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert main(["serve", "--ledger", url, "--data-dir", str(tmp_path), "--processes", "0"]) == 2
    assert "--processes" in capsys.readouterr().err
