"""Local-DP collections over HTTP (issue 19, item 1): a real service on PostgreSQL.

The steward registers a collection and a collector token; the collector submits batches of reports
made by the real device clients; analysts get estimates as ordinary releases (listed with their
releases, shown on the dashboard). Checked: roles (a collector token reaches only the ingest route,
an analyst token cannot ingest), idempotent batches, per-client budgets, concurrent identical batches
and estimates (one stored batch, one stored release), hostile bodies answered 4xx in JSON words.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from dpsense.device import CmsClient, CmsScheme
from dpsense.device.testing import deterministic_entropy
from tests.system.service.support import Api, Service

SCHEME = CmsScheme(num_hashes=4, num_buckets=64, epsilon="3")
WORDS = ["alpha", "beta", "gamma", "delta"]


def _collector(service: Service) -> Api:
    steward = service.api("steward")
    if "relay" not in service.tokens:
        assert steward.post("/v1/steward/analysts", {"name": "relay"}).status_code in (200, 201)
        made = steward.post("/v1/steward/tokens", {"analyst": "relay", "role": "collector"})
        assert made.status_code in (200, 201), made.text
        service.tokens["relay"] = made.json()["token"]
    return service.api("relay")


def _reports(n: int, *, seed: int, start: int = 0) -> list[dict[str, Any]]:
    client = CmsClient(SCHEME)
    with deterministic_entropy(seed):
        return [
            {"client_id": f"d{start + i}", "report": client.report(WORDS[i % 4] if i % 3 else "alpha")}
            for i in range(n)
        ]


def _register(service: Service, name: str, *, cap: int = 2) -> None:
    body = {"name": name, "scheme": SCHEME.to_json(), "dictionary": WORDS, "max_reports_per_client": cap}
    response = service.api("steward").post("/v1/collections", body)
    assert response.status_code == 201, response.text
    assert response.json()["guarantee"]["epsilon_per_report"] == "3"


def test_collect_and_estimate_end_to_end(service: Service) -> None:
    _register(service, "words")
    relay = _collector(service)
    reports = _reports(600, seed=11)
    for b in range(3):
        body = {"batch_id": f"b{b}", "reports": reports[b * 200 : (b + 1) * 200]}
        response = relay.post("/v1/collections/words/reports", body)
        assert response.status_code == 200, response.text
        assert response.json()["accepted"] == 200 and not response.json()["replayed"]
    retry = relay.post("/v1/collections/words/reports", {"batch_id": "b0", "reports": reports[:200]})
    assert retry.json()["replayed"] and retry.json()["accepted"] == 200
    reused = relay.post("/v1/collections/words/reports", {"batch_id": "b0", "reports": reports[:199]})
    assert reused.status_code == 422 and "batch_id" in reused.text
    alice = service.api("alice")
    status = alice.get("/v1/collections/words").json()
    assert (status["reports"], status["clients"], status["batches"]) == (600, 600, 3)
    first = alice.post("/v1/collections/words/estimates", {})
    assert first.status_code == 200, first.text
    doc = first.json()
    assert doc["columns"][:3] == ["value", "estimate", "std_error"] and doc["charged"]["epsilon"] == "0/1"
    assert [row[0] for row in doc["rows"]] == WORDS
    again = alice.post("/v1/collections/words/estimates", {})
    assert again.json()["cached"] and again.json()["release_id"] == doc["release_id"]
    listed = alice.get("/v1/releases", params={"dataset": "words"}).json()["releases"]
    assert [r["release_id"] for r in listed] == [doc["release_id"]]
    page = httpx.get(service.url + "/dashboard", cookies={"dpsense_token": service.tokens["steward"]}, timeout=30)
    assert "Local-DP collection words" in page.text and "reports accepted" in page.text


def test_roles_budgets_and_hostile_bodies(service: Service) -> None:
    _register(service, "words2", cap=1)
    relay = _collector(service)
    alice = service.api("alice")
    reports = _reports(3, seed=5)
    assert alice.post("/v1/collections/words2/reports", {"batch_id": "x", "reports": reports}).status_code == 403
    for path in ("/v1/datasets", "/v1/releases", "/v1/collections/words2"):
        assert relay.get(path).status_code == 403, path
    assert relay.post("/v1/collections/words2/estimates", {}).status_code == 403
    assert relay.post("/v1/collections", {"name": "n"}).status_code in (403, 422)
    twice = [reports[0], {"client_id": reports[0]["client_id"], "report": reports[1]["report"]}, reports[2]]
    out = relay.post("/v1/collections/words2/reports", {"batch_id": "c1", "reports": twice}).json()
    assert out["accepted"] == 1 and [r["index"] for r in out["refused"]] == [0, 1]
    hostile: list[Any] = [
        {"batch_id": "h", "reports": []},
        {"batch_id": "h", "reports": [{"client_id": "u", "report": {"hash": 99, "bits": "00"}}]},
        {"batch_id": "h", "reports": [{"client_id": "u", "report": {"hash": 0, "bits": "zz"}}]},
        {"batch_id": "h", "reports": [{"client_id": 5, "report": {}}]},
        {"batch_id": "", "reports": reports},
        {"reports": reports},
        {"batch_id": "h", "reports": reports, "more": 1},
        [1, 2, 3],
    ]
    for body in hostile:
        response = relay.post("/v1/collections/words2/reports", body)
        assert 400 <= response.status_code < 500, (body, response.text)
        assert "error" in response.json()
    unknown = relay.post("/v1/collections/nope/reports", {"batch_id": "h", "reports": reports})
    assert unknown.status_code == 404
    bad_scheme = {"name": "z", "scheme": {**SCHEME.to_json(), "num_hashes": 10**9}, "max_reports_per_client": 1}
    refused = service.api("steward").post("/v1/collections", bad_scheme)
    assert refused.status_code == 400 and "num_hashes" in refused.text
    assert alice.post("/v1/collections", bad_scheme).status_code == 403
    assert relay.get("/v1/collections/words2").status_code == 403


def test_concurrent_identical_batches_and_estimates_store_one(service: Service) -> None:
    _register(service, "words3", cap=5)
    relay = _collector(service)
    body = {"batch_id": "same", "reports": _reports(50, seed=9)}
    with ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(lambda _: relay.post("/v1/collections/words3/reports", body).json(), range(8)))
    assert sum(not o["replayed"] for o in outs) == 1 and {o["batch"] for o in outs} == {outs[0]["batch"]}
    alice = service.api("alice")
    with ThreadPoolExecutor(6) as pool:
        docs = list(pool.map(lambda _: alice.post("/v1/collections/words3/estimates", {}).json(), range(6)))
    assert len({d["release_id"] for d in docs}) == 1
    assert sum(not d["cached"] for d in docs) == 1
    assert service.api("steward").get("/v1/collections/words3").json()["reports"] == 50
