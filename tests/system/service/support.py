"""A running dpsense service for the system tests: a uvicorn subprocess on 127.0.0.1 over a PostgreSQL ledger.

``start_service`` writes a planted CSV into a data folder, opens a fresh PostgreSQL schema, adds the
steward and analysts with tokens (directly in the ledger, as ``dpsense serve token create`` does),
starts ``python -m dpsense.service serve`` on a free loopback port and registers ``events`` through
the steward's HTTP route. Every response the tests read through ``Api`` is kept, so that a test can
scan them all for the planted true values.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd

from dpsense.ledger import Ledger
from tests.factories import policy_fields

REGIONS = ["north", "south", "east", "west"]
ANALYSTS = ("alice", "bob", "carol", "dave")
POLICY: dict[str, Any] = policy_fields(planned_releases=100)
REGISTER: dict[str, Any] = {
    "name": "events",
    "source": "events.csv",
    "privacy_unit": "person_id",
    "bounds": {"hours": [0, 24], "age": [0, 120]},
    "keys": {"region": REGIONS},
    "max_rows_per_unit": 5,
    "max_groups_per_unit": {"region": 1},
    "budget": {"epsilon": 40, "delta": "1e-8"},
    "policy": POLICY,
}


def planted_frame(persons: int = 2000, rows_per_person: int = 3) -> pd.DataFrame:
    """Persons in 4 regions with hours whose sums and means have many significant digits."""
    person = np.repeat(np.arange(persons), rows_per_person)
    row = np.arange(person.size)
    return pd.DataFrame(
        {
            "person_id": [f"p{p}" for p in person],
            "region": np.array(REGIONS)[person % 4],
            "hours": 0.5 + ((row * 7919) % 1000) / 83.3,
            "age": (18 + (person * 31) % 77).astype(np.int64),
        }
    )


def spellings(value: float) -> set[str]:
    """Ways a leaked true value would be written (full and 6-decimal precision).

    Shorter spellings are left out: a noisy value shown with a few digits can share them with the
    true value by chance (a noisy mean within 1e-4 of the truth is an answer, not a leak).
    """
    out = {repr(float(value)), f"{value:.6f}"}
    return {s for s in out if len(s.replace(".", "").replace("-", "").lstrip("0")) >= 7}


def true_values(frame: pd.DataFrame) -> set[str]:
    """Spellings of the planted true sums and means (overall and per region)."""
    out: set[str] = set()
    for _, group in frame.groupby("region"):
        out |= spellings(group["hours"].sum()) | spellings(group["hours"].mean())
    return out | spellings(frame["hours"].sum()) | spellings(frame["hours"].mean())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Service:
    """A running service and what the tests need to talk to it."""

    url: str
    ledger_url: str
    data_dir: Path
    tokens: dict[str, str]
    process: subprocess.Popen[bytes]
    log: Path
    secrets: set[str]
    seen: list[str] = field(default_factory=list)

    def api(self, who: str | None) -> Api:
        """A client holding ``who``'s token (``None``: no token)."""
        return Api(self, None if who is None else self.tokens[who])

    def ledger(self) -> Ledger:
        return Ledger.open(self.ledger_url)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


@dataclass
class Api:
    """An httpx client that keeps every response body it reads."""

    service: Service
    token: str | None

    def request(self, method: str, path: str, *, key: str | None = None, **kw: Any) -> httpx.Response:
        headers = dict(kw.pop("headers", {}))
        if self.token is not None:
            headers.setdefault("Authorization", f"Bearer {self.token}")
        if key is not None:
            headers["Idempotency-Key"] = key
        response = httpx.request(method, self.service.url + path, headers=headers, timeout=60, **kw)
        self.service.seen.append(response.text)
        return response

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any = None, *, key: str | None = None, **kw: Any) -> httpx.Response:
        if body is not None:
            kw["json"] = body
        return self.request("POST", path, key=key, **kw)

    def release(self, spec: dict[str, Any], key: str | None = None) -> httpx.Response:
        return self.post("/v1/releases", spec, key=key or new_key())


def new_key() -> str:
    return uuid.uuid4().hex


def spec(epsilon: float = 0.5, **changes: Any) -> dict[str, Any]:
    """A grouped release spec (people, events, mean hours per region)."""
    doc: dict[str, Any] = {
        "dataset": "events",
        "epsilon": epsilon,
        "group_by": {"column": "region"},
        "aggregates": {
            "people": {"kind": "count_units"},
            "events": {"kind": "count", "max_rows_per_unit": 3},
            "total_hours": {"kind": "sum", "column": "hours", "max_rows_per_unit": 3},
            "mean_hours": {"kind": "mean", "column": "hours", "max_rows_per_unit": 3},
        },
    }
    doc.update(changes)
    return doc


def start_service(
    ledger_url: str,
    root: Path,
    *,
    min_latency: float = 0.25,
    quantum: float = 0.25,
    workers: int = 2,
    analyst_epsilon: dict[str, float] | None = None,
    constant_work: int | None = None,
    extra_args: tuple[str, ...] = (),
) -> Service:
    """Seed the ledger, start the server, register ``events``; see the module docstring."""
    data_dir = root / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    frame = planted_frame()
    frame.to_csv(data_dir / "events.csv", index=False)
    tokens: dict[str, str] = {}
    with Ledger.open(ledger_url) as ledger:
        for name in ("steward", *ANALYSTS):
            ledger.add_analyst(name)
        tokens["steward"] = ledger.create_token("steward", role="steward")
        for name in ANALYSTS:
            tokens[name] = ledger.create_token(name)
    port = free_port()
    log = root / "server.log"
    env = {k: v for k, v in os.environ.items() if k != "DPSENSE_ALLOW_TEST_ENTROPY"}
    command = [
        sys.executable, "-m", "dpsense.service", "serve", "--ledger", ledger_url, "--data-dir", str(data_dir),
        "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers),
        "--min-latency", str(min_latency), "--latency-quantum", str(quantum),
    ]  # fmt: skip
    if constant_work is not None:
        command += ["--constant-work", str(constant_work)]
    command += extra_args
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    service = Service(f"http://127.0.0.1:{port}", ledger_url, data_dir, tokens, process, log, true_values(frame))
    try:
        _wait_ready(service)
        steward = service.api("steward")
        response = steward.post("/v1/steward/datasets", REGISTER)
        assert response.status_code == 201, response.text
        for analyst, epsilon in (analyst_epsilon or {}).items():
            body = {"dataset": "events", "scope": "analyst", "value": analyst, "epsilon": epsilon}
            response = steward.request("PUT", "/v1/steward/budgets", json=body)
            assert response.status_code == 200, response.text
    except BaseException:
        service.stop()
        raise
    return service


def _wait_ready(service: Service, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if service.process.poll() is not None:
            raise RuntimeError(f"the service exited: {service.log.read_text()[-3000:]}")
        try:
            if httpx.get(service.url + "/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    service.stop()
    raise RuntimeError(f"the service did not start: {service.log.read_text()[-3000:]}")


def leaked(service: Service) -> list[str]:
    """Planted true values found in any response body read so far, each with the text around it."""
    return found_in(service.secrets, "\n".join(service.seen))


def found_in(secrets: set[str], text: str) -> list[str]:
    """Each spelling of ``secrets`` that ``text`` holds as a whole number, with 40 characters either side.

    A whole number: no digit or decimal point just before it and no digit just after. A noisy value
    printed at full precision (``6.4963991207``) begins with the 6-decimal spelling of a true value
    (``6.496399``) whenever it lands within 10^-6 above it, which a mean released at a small noise
    scale does now and then (here the four region means lie within 0.012 of each other and of the
    overall mean); as a substring that spelling was reported as a leak. A leaked true value is
    written as a number of its own.
    """
    found = []
    for secret in sorted(secrets):
        match = re.search(rf"(?<![\d.]){re.escape(secret)}(?!\d)", text)
        if match is not None:
            found.append(f"{secret} in ...{text[max(0, match.start() - 40) : match.end() + 40]}...")
    return found


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
