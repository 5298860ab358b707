"""Single flight over HTTP on both backends (docs/design.md invariant 5, issue 14's Must show).

A real uvicorn service (``support.start_service``) over a SQLite file or a fresh PostgreSQL schema.
N ∈ {4, 12, 32} HTTP clients (threads, each with its own keep-alive ``httpx.Client`` and its own
token: the four analysts of ``support`` plus four more added through the steward's route, tokens
made with ``POST /v1/steward/tokens`` where an analyst serves more than one client) are released
at once by a ``threading.Barrier`` and send one identical ``POST /v1/releases``, each with its own
Idempotency-Key. Every round a fresh public filter literal makes a new cache key. Per round: every
response is 200 with the same release and noisy rows; exactly one says ``charged`` (the ε of the
round, ``cached: false``), all others ``cached: true, charged: null``; the ledger holds exactly one
new charge (COMMITTED, the payer's request, the release's cache key) and one stored release for the
key; and every request was sent before the payer's answer came back (they were in flight together). A
round where a client thread ran so late that it sent after the payer's answer is checked like the
others, but does not count as a concurrent round: up to ``EXTRA_ROUNDS`` more are run per N, and each N
needs its full count of concurrent rounds.
At the end the total spend is exactly one ε per round and the audit chain verifies.

The service runs ``WORKERS`` worker threads (its ledger connections), so up to that many of the N
requests are inside ``reserve`` at once; the rest queue in the service, as in production.
Rounds: 5 per N (2 for N = 32) by default (about 25 s for both backends on a 2-core machine);
``DPSENSE_FLIGHT_ROUNDS`` sets the rounds of every N (``DPSENSE_FLIGHT_ROUNDS=20`` is the full figure,
about a minute).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import httpx
import pytest

from dpsense.core.privacy_loss import ApproxDP, PureDP
from dpsense.ledger import ChargeState
from tests.system.service.support import ANALYSTS, Service, new_key, start_service
from tests.unit.ledger.support import drop_pg_schema, fresh_pg_schema

ROUNDS = os.environ.get("DPSENSE_FLIGHT_ROUNDS")
SIZES = [4, 12, 32]
WORKERS = 8
EXTRA_ANALYSTS = ("erin", "frank", "grace", "heidi")
EPSILON = Fraction(1, 10)
#: Rounds a size may add when a client thread was run so late that it sent after the payer's answer.
EXTRA_ROUNDS = 3


def rounds(n: int) -> int:
    """5 per N and 2 for N = 32 by default; ``DPSENSE_FLIGHT_ROUNDS`` for every N when set."""
    if ROUNDS:
        return int(ROUNDS)
    return 5 if n < max(SIZES) else 2


def body(literal: int) -> dict[str, Any]:
    """One count with a public filter literal (a new literal: a new plan, so a new cache key)."""
    return {
        "dataset": "events",
        "epsilon": "0.1",
        "filters": [{"column": "age", "op": ">=", "value": literal}],
        "aggregates": {"n": {"kind": "count"}},
    }


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def flight_service(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    root = tmp_path_factory.mktemp(f"flight-{request.param}")
    schema: str | None = None
    if request.param == "sqlite":
        url = f"sqlite:///{root / 'ledger.db'}"
    else:
        server = request.getfixturevalue("pg_server")
        schema, url = fresh_pg_schema(server)
    try:
        service = start_service(url, root, workers=WORKERS)
        try:
            yield service
        finally:
            service.stop()
    finally:
        if schema is not None:
            drop_pg_schema(request.getfixturevalue("pg_server"), schema)


def clients(service: Service, n: int) -> list[httpx.Client]:
    """``n`` clients, each with its own token; analysts take turns (all eight for n >= 8)."""
    steward = service.api("steward")
    for name in EXTRA_ANALYSTS:
        assert steward.post("/v1/steward/analysts", {"name": name}).status_code == 201
    names = [*ANALYSTS, *EXTRA_ANALYSTS]
    out: list[httpx.Client] = []
    for i in range(n):
        analyst = names[i % len(names)]
        if i < len(ANALYSTS):
            token = service.tokens[analyst]
        else:
            created = steward.post("/v1/steward/tokens", {"analyst": analyst})
            assert created.status_code == 201, created.text
            token = created.json()["token"]
        client = httpx.Client(
            base_url=service.url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=120,
            # drop pooled connections long before uvicorn closes idle ones (5 s): reusing a connection the
            # server is closing at that instant is reset ("Connection reset by peer", seen once under load)
            limits=httpx.Limits(keepalive_expiry=1.0),
        )
        assert client.get("/v1/whoami").json()["analyst"] == analyst  # opens the keep-alive connection
        out.append(client)
    return out


Sent = tuple[str, httpx.Response, float, float]  # Idempotency-Key, response, sent at, answered at


def send_at_once(pool: list[httpx.Client], spec: dict[str, Any]) -> list[Sent]:
    """Every client of ``pool`` posts ``spec`` (each with a new Idempotency-Key) once the barrier opens."""
    barrier = threading.Barrier(len(pool))
    results: list[Any] = [None] * len(pool)
    errors: list[BaseException] = []

    def go(i: int) -> None:
        key = new_key()
        try:
            barrier.wait(60)
            sent = time.monotonic()
            response = pool[i].post("/v1/releases", json=spec, headers={"Idempotency-Key": key})
            results[i] = (key, response, sent, time.monotonic())
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(pool))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert errors == [] and all(r is not None for r in results), errors
    return results


def check_round(service: Service, results: list[Sent], before: int) -> bool:
    """Check one round; whether every request was sent before the payer's answer came back.

    The other checks hold whatever the scheduling: a request sent after the payer's answer (a client
    thread the OS ran late) gets the stored release like the others, but that round did not put all
    of them in flight together, so the caller runs another.
    """
    for _, response, _, _ in results:
        assert response.status_code == 200, response.text
    docs = [response.json() for _, response, _, _ in results]
    assert len({d["release_id"] for d in docs}) == 1  # one stored release
    assert len({repr(d["rows"]) for d in docs}) == 1 and docs[0]["rows"]  # one noisy value
    payers = [i for i, d in enumerate(docs) if d["charged"] is not None]
    assert len(payers) == 1, [(d["cached"], d["charged"]) for d in docs]  # exactly one says it paid
    (payer,) = payers
    assert docs[payer]["cached"] is False and Fraction(docs[payer]["charged"]["epsilon"]) == EPSILON
    assert all(d["cached"] is True for i, d in enumerate(docs) if i != payer)
    together = max(sent for _, _, sent, _ in results) < results[payer][3]  # all in flight with the payer's
    with service.ledger() as ledger:
        new = [c for c in ledger.charges("events") if c.charge_id > before]
        assert [c.state for c in new] == [ChargeState.COMMITTED], new  # one charge, nothing else reserved
        (charge,) = new
        assert charge.request_id == results[payer][0]
        assert charge.cache_key is not None
        stored = [r for r in ledger.releases("events") if r.cache_key == charge.cache_key]
        assert [r.release_id for r in stored] == [docs[0]["release_id"]]
    return together


def last_charge(service: Service) -> int:
    with service.ledger() as ledger:
        return max((c.charge_id for c in ledger.charges("events")), default=0)


def test_identical_http_requests_are_charged_and_drawn_once(flight_service: Service) -> None:
    service = flight_service
    pool = clients(service, max(SIZES))
    try:
        literal, spent = 10, Fraction(0)
        for n in SIZES:
            together = tried = 0
            while together < rounds(n) and tried < rounds(n) + EXTRA_ROUNDS:
                literal += 1
                tried += 1
                before = last_charge(service)
                together += check_round(service, send_at_once(pool[:n], body(literal)), before)
                spent += EPSILON
            assert together == rounds(n), f"N = {n}: {together} of {tried} rounds had every request in flight at once"
        with service.ledger() as ledger:
            total = ledger.budget("events").spent
        assert isinstance(total, PureDP | ApproxDP) and total.epsilon == spent  # one charge per round, no other
        audit = service.api("steward").get("/v1/steward/audit")
        assert audit.status_code == 200 and audit.json()["ok"] is True, audit.text
    finally:
        for client in pool:
            client.close()
