"""The HTTP API against a real uvicorn server on 127.0.0.1 with the PostgreSQL ledger.

Authentication (401), another analyst's release (404), over budget (409), idempotent retries (the
same release, one charge), the steward's routes, padded refusals, and no planted true value in any
response (the last test scans every response the module read).
"""

from __future__ import annotations

import time
from fractions import Fraction

import pytest

from dpsense.core.privacy_loss import ApproxDP, PureDP
from dpsense.ledger import ChargeState, Ledger, Scope
from tests.system.service.support import Service, leaked, new_key, planted_frame, spec


def _spent(service: Service, scope: Scope | None = None) -> Fraction:
    with service.ledger() as ledger:
        loss = ledger.budget("events", scope).spent
    assert isinstance(loss, PureDP | ApproxDP)
    return loss.epsilon


def _charges(service: Service, analyst: str, key: str) -> list[ChargeState]:
    with service.ledger() as ledger:
        return [c.state for c in ledger.charges("events") if c.analyst == analyst and c.request_id == key]


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer", "Bearer nope", "Basic YWxpY2U6eA==", "Bearer dps_0011223344556677_" + "A" * 43],
)
def test_missing_or_wrong_token_is_401(service: Service, authorization: str | None) -> None:
    api = service.api(None)
    headers = {} if authorization is None else {"Authorization": authorization}
    for method, path, body in (("GET", "/v1/datasets", None), ("POST", "/v1/releases", spec())):
        response = api.request(method, path, headers=headers | {"Idempotency-Key": new_key()}, json=body)
        assert response.status_code == 401, response.text
        assert response.json()["error"]["code"] == "unauthorized"
        assert response.headers["www-authenticate"].startswith("Bearer")


def test_a_wrong_secret_for_a_real_token_id_or_a_revoked_token_is_401(service: Service) -> None:
    prefix, token_id, secret = service.tokens["alice"].split("_", 2)
    flipped = ("B" if secret[0] != "B" else "C") + secret[1:]
    wrong = service.api(None)
    wrong.token = f"{prefix}_{token_id}_{flipped}"
    assert wrong.get("/v1/datasets").status_code == 401
    created = service.api("steward").post("/v1/steward/tokens", {"analyst": "dave"})
    assert created.status_code == 201, created.text
    fresh = service.api(None)
    fresh.token = created.json()["token"]
    assert fresh.get("/v1/whoami").json() == {"analyst": "dave", "role": "analyst"}
    revoked = service.api("steward").request("DELETE", f"/v1/steward/tokens/{created.json()['token_id']}")
    assert revoked.status_code == 200
    assert fresh.get("/v1/whoami").status_code == 401


def test_a_token_created_with_an_expiry_is_refused_at_it(service: Service) -> None:
    steward = service.api("steward")
    before = time.time()
    created = steward.post("/v1/steward/tokens", {"analyst": "dave", "expires_in_s": 3600})
    assert created.status_code == 201, created.text
    doc = created.json()
    assert before + 3600 <= doc["expires_at"] <= time.time() + 3600
    fresh = service.api(None)
    fresh.token = doc["token"]
    assert fresh.get("/v1/whoami").json() == {"analyst": "dave", "role": "analyst"}
    with Ledger.open(service.ledger_url, clock=lambda: doc["expires_at"]) as at_expiry:  # no sleeping
        assert at_expiry.verify_token(doc["token"]) is None
    forever = steward.post("/v1/steward/tokens", {"analyst": "dave"})
    assert forever.status_code == 201 and forever.json()["expires_at"] is None
    for bad in (0, -1, 315_576_001, "60", True):
        refused = steward.post("/v1/steward/tokens", {"analyst": "dave", "expires_in_s": bad})
        assert refused.status_code == 422, (bad, refused.text)
    for raw in ('{"analyst": "dave", "expires_in_s": NaN}', '{"analyst": "dave", "expires_in_s": 1e309}'):
        refused = steward.request(
            "POST", "/v1/steward/tokens", content=raw, headers={"Content-Type": "application/json"}
        )
        assert 400 <= refused.status_code < 500, (raw, refused.text)


def test_an_analyst_cannot_use_the_steward_routes(service: Service) -> None:
    alice = service.api("alice")
    assert alice.get("/v1/steward/audit").status_code == 403
    body = {"dataset": "events", "scope": "analyst", "value": "alice", "epsilon": 100}
    assert alice.request("PUT", "/v1/steward/budgets", json=body).status_code == 403
    assert alice.post("/v1/steward/tokens", {"analyst": "alice", "role": "steward"}).status_code == 403
    assert alice.get("/dashboard").status_code == 401


def test_datasets_show_the_public_schema_and_never_the_data_location(service: Service) -> None:
    response = service.api("bob").get("/v1/datasets")
    assert response.status_code == 200
    (events,) = response.json()["datasets"]
    assert events["name"] == "events" and events["privacy_unit"] == "person_id"
    assert sorted(events["columns"]["region"]["keys"]) == ["east", "north", "south", "west"]
    assert events["columns"]["hours"]["bounds"] == ["0/1", "24/1"]
    assert str(service.data_dir) not in response.text and "events.csv" not in response.text
    assert service.api("bob").get("/v1/datasets/nope").status_code == 404


def test_a_retry_with_the_same_idempotency_key_returns_the_same_release_and_charges_once(service: Service) -> None:
    alice, key = service.api("alice"), new_key()
    before = _spent(service)
    first = alice.release(spec(0.5, filters=[{"column": "age", "op": ">=", "value": 21}]), key=key)
    assert first.status_code == 200, first.text
    doc = first.json()
    assert doc["cached"] is False and doc["charged"]["epsilon"] == "1/2"
    assert doc["columns"][0] == "region" and len(doc["rows"]) == 4
    assert _spent(service) == before + Fraction(1, 2)
    again = alice.release(spec(0.5, filters=[{"column": "age", "op": ">=", "value": 21}]), key=key)
    assert again.status_code == 200
    assert again.json()["release_id"] == doc["release_id"] and again.json()["rows"] == doc["rows"]
    assert again.json()["cached"] is True and again.json()["charged"] is None
    assert _spent(service) == before + Fraction(1, 2)
    assert _charges(service, "alice", key) == [ChargeState.COMMITTED]


def test_an_idempotency_key_reused_for_another_request_is_refused(service: Service) -> None:
    alice, key = service.api("alice"), new_key()
    assert alice.release(spec(0.25, filters=[{"column": "age", "op": ">=", "value": 30}]), key=key).status_code == 200
    before = _spent(service)
    other = alice.release(spec(0.25, filters=[{"column": "age", "op": ">=", "value": 31}]), key=key)
    assert other.status_code == 422 and other.json()["error"]["code"] == "idempotency_key_reused"
    assert _spent(service) == before
    missing = alice.post("/v1/releases", spec(0.25))
    assert missing.status_code == 422 and "Idempotency-Key" in missing.text


def test_another_analysts_release_is_not_found(service: Service) -> None:
    first = service.api("alice").release(spec(0.3, filters=[{"column": "age", "op": "<", "value": 60}]))
    release_id = first.json()["release_id"]
    assert service.api("alice").get(f"/v1/releases/{release_id}").status_code == 200
    bob = service.api("bob")
    response = bob.get(f"/v1/releases/{release_id}")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert release_id not in [r["release_id"] for r in bob.get("/v1/releases").json()["releases"]]
    assert bob.get("/v1/releases/999999").status_code == 404
    everything = service.api("steward").get("/v1/releases?dataset=events").json()["releases"]
    mine = [r for r in everything if r["release_id"] == release_id]
    assert mine and mine[0]["analyst"] == "alice"
    assert mine[0]["question"] == (
        "count(max_rows_per_unit=3), count_units(), mean(hours, max_rows_per_unit=3), "
        "sum(hours, max_rows_per_unit=3) by region where age < 60"
    )
    assert isinstance(mine[0]["created_at"], float)


def test_the_same_query_from_another_analyst_is_the_stored_release_at_no_cost(service: Service) -> None:
    question = spec(0.4, filters=[{"column": "age", "op": ">=", "value": 40}])
    first = service.api("alice").release(question)
    assert first.status_code == 200 and first.json()["cached"] is False
    before = _spent(service)
    second = service.api("bob").release(question)
    assert second.status_code == 200, second.text
    assert second.json()["cached"] is True and second.json()["charged"] is None
    assert second.json()["release_id"] == first.json()["release_id"]
    assert second.json()["rows"] == first.json()["rows"]
    assert _spent(service) == before
    assert "alice" not in second.text  # it reveals that the query was asked, never by whom


def test_over_budget_is_a_clear_409_and_charges_nothing(service: Service) -> None:
    carol = service.api("carol")
    ok = carol.release(spec(0.7, filters=[{"column": "age", "op": ">=", "value": 50}]))
    assert ok.status_code == 200, ok.text
    assert ok.json()["budget"]["analyst"]["remaining"]["epsilon"] == "3/10"
    before = _spent(service)
    refused = carol.release(spec(0.7, filters=[{"column": "age", "op": ">=", "value": 51}]))
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "budget_exhausted" and "carol" in error["scope"]
    assert "remaining" in error and error["fix"]
    assert _spent(service) == before
    budget = carol.get("/v1/datasets/events/budget").json()
    assert budget["analyst"]["remaining"]["epsilon"] == "3/10"


def test_refusals_are_not_sent_faster_than_answers(service: Service) -> None:
    carol, bob = service.api("carol"), service.api("bob")
    timings: dict[str, float] = {}
    for name, call in (
        ("answer", lambda: bob.release(spec(0.2, filters=[{"column": "age", "op": ">=", "value": 61}]))),
        ("over_budget", lambda: carol.release(spec(0.9, filters=[{"column": "age", "op": ">=", "value": 62}]))),
        ("bad_input", lambda: bob.release(spec(-1))),
        ("unknown_column", lambda: bob.release(spec(0.2, aggregates={"m": {"kind": "mean", "column": "weight"}}))),
    ):
        start = time.monotonic()
        response = call()
        timings[name] = time.monotonic() - start
        assert response.status_code in (200, 400, 409), response.text
    assert min(timings.values()) >= 0.25, timings


def test_sql_and_yaml_releases_go_through_the_same_session(service: Service) -> None:
    dave = service.api("dave")
    sql = {"sql": "SELECT region, COUNT(*) AS n FROM events WHERE age >= 70 GROUP BY region", "epsilon": 0.3}
    response = dave.post("/v1/sql", sql, key=new_key())
    assert response.status_code == 200, response.text
    assert response.json()["columns"][:2] == ["region", "n"]
    rewrite = {"sql": "select region, count(1) as k from events where 70 <= age group by region", "epsilon": 0.3}
    again = dave.post("/v1/sql", rewrite, key=new_key())
    assert again.json()["cached"] is True and again.json()["release_id"] == response.json()["release_id"]
    text = (
        "dataset: events\nepsilon: 0.3\ngroup_by: {column: region}\n"
        "filters:\n  - {column: age, op: '>=', value: 71}\n"
        "aggregates:\n  people: {kind: count_units}\n"
    )
    yaml_headers = {"Content-Type": "application/yaml"}
    response = dave.post("/v1/releases/yaml", key=new_key(), content=text, headers=yaml_headers)
    assert response.status_code == 200, response.text
    assert response.json()["columns"] == ["region", "people", "people_error95"]
    with_source = dave.post(
        "/v1/releases/yaml", key=new_key(), content=text + "source: /etc/passwd\n", headers=yaml_headers
    )
    assert with_source.status_code == 422 and "source" in with_source.json()["error"]["message"]
    alias = dave.post("/v1/releases/yaml", key=new_key(), content="a: &x 1\nb: *x\n", headers=yaml_headers)
    assert alias.status_code == 400
    broken = dave.post("/v1/releases/yaml", key=new_key(), content="a: [", headers=yaml_headers)
    assert broken.status_code == 400 and "YAML" in broken.json()["error"]["message"]


def test_variance_ptr_and_a_refusal_travel_over_http(service: Service) -> None:
    body = {
        "dataset": "events",
        "epsilon": 0.5,
        "delta": "1e-9",
        "aggregates": {
            "v": {"kind": "variance", "column": "hours", "max_rows_per_unit": 3},
            # a proposed bound no real data meets: PTR refuses, and the refusal is the (charged) answer
            "m": {"kind": "median", "column": "age", "mechanism": "ptr_order_statistic", "proposed_bound": "1e-9"},
        },
    }
    response = service.api("dave").post("/v1/releases", body, key=new_key())
    assert response.status_code == 200, response.text
    doc = response.json()
    row = dict(zip(doc["columns"], doc["rows"][0], strict=True))
    assert 0 <= row["v"] <= 144 and row["m"] is None
    assert (doc["charged"]["epsilon"], doc["charged"]["delta"]) == ("1/2", "1/1000000000")
    assert "refused" in doc["explain"]


def test_preview_charges_nothing(service: Service) -> None:
    before = _spent(service)
    response = service.api("dave").post("/v1/preview", spec(1.5))
    assert response.status_code == 200, response.text
    assert response.json()["would_charge"]["epsilon"] == "3/2" and response.json()["explain"]
    accuracy = response.json()["accuracy"]
    assert [a["name"] for a in accuracy] == list(spec(1.5)["aggregates"])
    assert all(set(a) >= {"bound", "confidence", "how"} for a in accuracy)
    assert isinstance(response.json()["warnings"], list)
    sql = {"sql": "SELECT AVG(hours) FROM events", "epsilon": 1}
    assert service.api("dave").post("/v1/preview/sql", sql).status_code == 200
    assert _spent(service) == before


@pytest.mark.parametrize(
    ("changes", "status", "code"),
    [
        ({"epsilon": 0}, 400, "invalid_request"),
        ({"epsilon": 5}, 400, "invalid_request"),  # above the per-release cap of 2
        ({"delta": 2}, 400, "invalid_request"),
        ({"dataset": "nope"}, 404, "unknown_dataset"),
        ({"aggregates": {"m": {"kind": "mean", "column": "weight"}}}, 400, "invalid_request"),
        ({"aggregates": {"m": {"kind": "mean", "column": "hours", "bounds": [5, 1]}}}, 400, "invalid_request"),
        ({"aggregates": {"m": {"kind": "count", "column": "hours"}}}, 422, "invalid_body"),
        ({"aggregates": {}}, 422, "invalid_body"),
        ({"epsilonn": 1}, 422, "invalid_body"),
        ({"filters": [{"column": "age", "op": "~", "value": 1}]}, 400, "invalid_request"),
    ],
)
def test_bad_input_is_a_4xx_naming_the_rule_and_the_ledger_is_unchanged(
    service: Service, changes: dict[str, object], status: int, code: str
) -> None:
    before = _spent(service)
    response = service.api("dave").release(spec(0.5) | changes)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    assert _spent(service) == before


def test_the_steward_sets_budgets_and_verifies_the_chain(service: Service) -> None:
    steward = service.api("steward")
    body = {"dataset": "events", "scope": "analyst", "value": "dave", "epsilon": 6}
    assert steward.request("PUT", "/v1/steward/budgets", json=body).status_code == 200
    budget = service.api("dave").get("/v1/datasets/events/budget").json()
    assert budget["analyst"]["cap"]["epsilon"] == "6/1"
    audit = steward.get("/v1/steward/audit")
    assert audit.status_code == 200 and audit.json()["ok"] is True and audit.json()["entries"] > 5
    bad = steward.post("/v1/steward/datasets", {**_register(), "source": "../../../etc/passwd"})
    assert bad.status_code == 400 and "data folder" in bad.json()["error"]["message"]
    assert steward.post("/v1/steward/analysts", {"name": "erin"}).status_code == 201


def test_the_openapi_schema_is_published(service: Service) -> None:
    response = service.api(None).get("/openapi.json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    assert {"/v1/releases", "/v1/sql", "/v1/releases/yaml", "/v1/preview", "/v1/steward/datasets"} <= set(paths)


def test_no_response_contained_a_planted_true_value(service: Service) -> None:
    assert len(service.seen) > 40
    assert leaked(service) == []


def _register() -> dict[str, object]:
    from tests.system.service.support import REGISTER

    return dict(REGISTER)


def test_a_typical_range_is_declared_over_http_and_makes_the_mean_clip_adaptively(service: Service) -> None:
    steward = service.api("steward")
    frame = planted_frame(300).assign(hours=lambda f: 1 + f["hours"] / 12)  # hours in [1, 2): typical 1..2
    frame.to_csv(service.data_dir / "typical.csv", index=False)
    body = {**_register(), "name": "typical_hours", "source": "typical.csv", "max_groups_per_unit": {}}
    bad = steward.post("/v1/steward/datasets", body | {"typical": {"hours": [1, 30]}})
    assert bad.status_code == 400 and "inside its declared bounds" in bad.json()["error"]["message"]
    added = steward.post("/v1/steward/datasets", body | {"typical": {"hours": [1, 2]}})
    assert added.status_code == 201, added.text
    assert added.json()["dataset"]["columns"]["hours"]["typical"] == ["1/1", "2/1"]
    spec = {"dataset": "typical_hours", "epsilon": 1, "aggregates": {"m": {"kind": "mean", "column": "hours"}}}
    plan = steward.post("/v1/preview", spec)
    assert plan.status_code == 200, plan.text
    explain = " ".join(plan.json()["explain"].split())
    assert "approx_bounds" in explain and "adaptive clip by default" in explain
    again = steward.post("/v1/steward/datasets", body | {"name": "other", "typical": {"hours": [1, 3]}})
    assert again.status_code == 409 and "typical of column 'hours'" in again.json()["error"]["message"]


def test_a_group_key_typo_over_http_is_a_400_with_the_closest_key(service: Service) -> None:
    before = _spent(service)
    body = spec(0.5) | {"group_by": {"column": "region", "keys": ["north", "sout"]}}
    response = service.api("dave").release(body)
    assert response.status_code == 400 and "did you mean 'south'?" in response.json()["error"]["message"] + str(
        response.json()["error"].get("fix", "")
    )
    assert _spent(service) == before


def test_a_steward_amends_declarations_over_http_as_a_new_version_on_the_same_budget(service: Service) -> None:
    steward = service.api("steward")
    planted_frame(300).to_csv(service.data_dir / "amendable.csv", index=False)
    body = {**_register(), "name": "amendable", "source": "amendable.csv", "max_groups_per_unit": {}}
    assert steward.post("/v1/steward/datasets", body).status_code == 201
    budget = steward.get("/v1/datasets/amendable/budget").json()
    amended = steward.post(
        "/v1/steward/amendments", {"dataset": "amendable", "bounds": {"hours": [0, 48]}, "typical": {"hours": None}}
    )
    assert amended.status_code == 201, amended.text
    assert amended.json()["dataset"]["snapshot"] == "v1.2"
    assert amended.json()["amended"] == ["bounds of column 'hours': registered ['0/1', '24/1'], given ['0/1', '48/1']"]
    shown = service.api("dave").get("/v1/datasets/amendable").json()
    assert shown["snapshot"] == "v1.2" and shown["columns"]["hours"]["bounds"] == ["0/1", "48/1"]
    assert steward.get("/v1/datasets/amendable/budget").json() == budget
    same = steward.post("/v1/steward/amendments", {"dataset": "amendable", "bounds": {"hours": [0, 48]}})
    assert same.status_code == 400 and "changes no declaration" in same.json()["error"]["message"]
    unknown = steward.post("/v1/steward/amendments", {"dataset": "amendable", "bounds": {"hours": [0, 48]}, "x": 1})
    assert unknown.status_code == 422
    assert service.api("dave").post("/v1/steward/amendments", {"dataset": "amendable"}).status_code == 403


def test_a_recording_step_is_declared_over_http_and_makes_the_median_a_point_of_it(service: Service) -> None:
    steward = service.api("steward")
    planted_frame(320).to_csv(service.data_dir / "stepped.csv", index=False)  # data of its own
    body = {**_register(), "name": "stepped", "source": "stepped.csv", "max_groups_per_unit": {}}
    bad = steward.post("/v1/steward/datasets", body | {"steps": {"hours": 0}})
    assert bad.status_code == 400 and "positive decimal" in bad.json()["error"]["message"]
    third = steward.post("/v1/steward/datasets", body | {"steps": {"hours": "1/3"}})
    assert third.status_code == 400 and "positive decimal" in third.json()["error"]["message"]
    added = steward.post("/v1/steward/datasets", body | {"steps": {"hours": "0.25"}})
    assert added.status_code == 201, added.text
    assert added.json()["dataset"]["columns"]["hours"]["step"] == "0.25"
    spec = {"dataset": "stepped", "epsilon": 1, "aggregates": {"m": {"kind": "median", "column": "hours"}}}
    released = service.api("dave").release(spec)
    assert released.status_code in (200, 201), released.text
    value = float(released.json()["rows"][0][0])
    assert value * 4 == round(value * 4)  # a point of the step
    assert "K = 97 points of the declared step 0.25" in " ".join(released.json()["explain"].split())
    removed = steward.post("/v1/steward/amendments", {"dataset": "stepped", "steps": {"hours": None}})
    assert removed.status_code == 201, removed.text
    assert removed.json()["amended"] == ["step of column 'hours': registered '0.25', given None"]
