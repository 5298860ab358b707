"""The steward's ledger verification over HTTP: the tables, an expected head, a checkpoint (issue 14, Build 1)."""

from __future__ import annotations

import pytest

from tests.system.ledger.test_tamper import tamper
from tests.system.service.support import Service


@pytest.fixture(scope="module")
def audited(make_service: object) -> Service:
    return make_service()  # type: ignore[operator, no-any-return]


def test_a_checkpoint_from_the_api_verifies_and_catches_a_tampered_table(audited: Service) -> None:
    steward = audited.api("steward")
    checkpoint = steward.get("/v1/steward/audit/checkpoint")
    assert checkpoint.status_code == 200, checkpoint.text
    doc = checkpoint.json()
    assert doc["format"] == "dpsense-audit-checkpoint/1" and doc["seq"] > 0
    anchored = steward.get("/v1/steward/audit", params={"expected_head": f"{doc['seq']}:{doc['head']}"})
    assert anchored.status_code == 200 and anchored.json()["ok"] is True and anchored.json()["tables_checked"]
    wrong = steward.get("/v1/steward/audit", params={"expected_head": f"{doc['seq'] + 10_000}:{doc['head']}"})
    assert wrong.status_code == 200 and wrong.json()["ok"] is False and "cut" in wrong.json()["reason"]
    tamper(audited.ledger_url, "UPDATE api_tokens SET role = 'steward'")
    report = steward.get("/v1/steward/audit").json()
    assert report["ok"] is False and any("role" in p for p in report["problems"])
    refused = steward.get("/v1/steward/audit/checkpoint")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "ledger_tampered"


@pytest.mark.parametrize("head", ["nothex", "1:" + "a" * 63, "x" * 5000, "-1:" + "a" * 64])
def test_a_malformed_expected_head_is_a_422_naming_the_field(audited: Service, head: str) -> None:
    response = audited.api("steward").get("/v1/steward/audit", params={"expected_head": head})
    assert response.status_code == 422, response.text
    assert "expected_head" in response.text
