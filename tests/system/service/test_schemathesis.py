"""Schemathesis against the published OpenAPI schema of a running server: no 5xx, no true value in any body.

Two runs over one service:

* **Per operation** (``test_no_server_error_and_no_true_value``): every operation gets ``EXAMPLES``
  generated requests in each generation mode (valid and invalid ones), sent with a valid token (the
  steward's for ``/v1/steward/`` routes, an analyst's elsewhere).
* **Stateful** (``test_stateful_links_reach_releases``): schemathesis' state machine follows the
  OpenAPI links the service publishes (``dpsense.service._links``: a release's ``release_id`` to
  ``GET /v1/releases/{release_id}``, a new token's id to its revocation, a new analyst to a token for
  them, ...) plus a few the test adds (``SAMPLE_LINKS``: a dataset named by ``GET /v1/datasets`` to a
  small count release as JSON, SQL and YAML and a preview; a new analyst to a token, a dataset
  registered under their name and a budget; a new token to a release and ``whoami`` made *with that
  token*; a newly registered dataset to a release on it). So the scenarios reach successful
  releases and read them back by the returned id, instead of stopping at 4xx answers to random
  bodies. ``STATEFUL_SCENARIOS`` scenarios of at most ``STATEFUL_STEPS`` steps (again, with longer
  scenarios, up to ``STATEFUL_ROUNDS`` times, until every deep state the test asserts was reached),
  generated as valid requests (schemathesis' positive mode); it prints the requests by route and
  status and how often each link was followed.

Every response must not be a server error; an error must be a JSON document that a strict parser
reads (no NaN or Infinity); no body may contain a spelling of the planted dataset's true sums and
means, nor the server's data folder. The run prints how many requests it sent, by route and status.

``DPSENSE_SCHEMATHESIS_EXAMPLES`` scales both runs: ``EXAMPLES`` per operation and mode (default 25,
about a minute and a half for the file on a quiet machine) and twice as many stateful scenarios.
``DPSENSE_SCHEMATHESIS_EXAMPLES=100`` is the full run (about 5 minutes).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

from tests.system.service.support import REGISTER, Service, found_in

EXAMPLES = int(os.environ.get("DPSENSE_SCHEMATHESIS_EXAMPLES", "25"))
STATEFUL_SCENARIOS = 2 * EXAMPLES
STATEFUL_STEPS = 8
#: Runs of the state machine (each with longer scenarios) until every deep state is reached.
STATEFUL_ROUNDS = 4
#: Small releases (ε 0.01: hundreds fit the planted budget of ε 40 under the per-release cap 2); the links
#: ask different questions, so the run makes several charged releases, and repeats return the stored one.
COUNT = {"epsilon": 0.01, "aggregates": {"n": {"kind": "count"}}}
UNITS = {"epsilon": 0.01, "aggregates": {"people": {"kind": "count_units"}}}
_REPLACE = {"x-schemathesis": {"merge_body": False}}
_FIRST_DATASET = "$response.body#/datasets/0/name"

#: Links the test adds to the published ones: (method, path, status) -> name -> (target, link fields).
SAMPLE_LINKS: dict[tuple[str, str, str], dict[str, tuple[tuple[str, str], dict[str, Any]]]] = {
    ("GET", "/v1/datasets", "200"): {
        "CountRelease": (("POST", "/v1/releases"), {"requestBody": {"dataset": _FIRST_DATASET, **COUNT}, **_REPLACE}),
        "SqlRelease": (
            ("POST", "/v1/sql"),
            {"requestBody": {"sql": f"SELECT COUNT(*) FROM {{{_FIRST_DATASET}}}", "epsilon": 0.02}, **_REPLACE},
        ),
        "YamlRelease": (
            ("POST", "/v1/releases/yaml"),
            {"requestBody": {"dataset": _FIRST_DATASET, **UNITS}, **_REPLACE},
        ),
        "Preview": (("POST", "/v1/preview"), {"requestBody": {"dataset": _FIRST_DATASET, **COUNT}, **_REPLACE}),
    },
    ("POST", "/v1/steward/analysts", "201"): {
        "TokenFor": (("POST", "/v1/steward/tokens"), {"requestBody": {"analyst": "$request.body#/name"}, **_REPLACE}),
        "RegisterDataset": (
            ("POST", "/v1/steward/datasets"),
            {"requestBody": {**REGISTER, "name": "$request.body#/name"}, **_REPLACE},
        ),
        "AnalystBudget": (
            ("PUT", "/v1/steward/budgets"),
            {
                "requestBody": {"dataset": "events", "scope": "analyst", "value": "$request.body#/name", "epsilon": 1},
                **_REPLACE,
            },
        ),
    },
    ("POST", "/v1/steward/tokens", "201"): {
        "ReleaseWithToken": (
            ("POST", "/v1/releases"),
            {
                "parameters": {"header.Authorization": "Bearer {$response.body#/token}"},
                "requestBody": {"dataset": "events", **COUNT},
                **_REPLACE,
            },
        ),
        "WhoAmIWithToken": (
            ("GET", "/v1/whoami"),
            {"parameters": {"header.Authorization": "Bearer {$response.body#/token}"}},
        ),
    },
    ("POST", "/v1/steward/datasets", "201"): {
        "ReleaseOnNew": (
            ("POST", "/v1/releases"),
            {"requestBody": {"dataset": "$response.body#/dataset/name", **COUNT}, **_REPLACE},
        ),
    },
}


@pytest.fixture(scope="module")
def fuzzed(make_service: Callable[..., Service]) -> Service:
    """A service of its own (fuzzing may create analysts and spend budget), with short padding."""
    return make_service(min_latency=0.02, quantum=0.02)


def _strict(text: str) -> Any:
    """``text`` as JSON, refusing NaN and Infinity (what a strict client accepts)."""

    def refuse(name: str) -> None:
        raise ValueError(f"non-finite {name} in a response")

    return json.loads(text, parse_constant=refuse)


def _judge(method: str, path: str, status: int, body: str, content_type: str, service: Service) -> None:
    """The checks every response passes: no 5xx, a renderable JSON error, no true value, no server path."""
    service.seen.append(body)
    assert status < 500, f"{method} {path}: {status} {body[:500]}"
    if status >= 400:
        assert content_type.startswith("application/json"), (method, path, status, content_type)
        error = _strict(body)["error"]
        assert error["code"] and error["message"], (method, path, body[:500])
    found = found_in(service.secrets, body)
    assert found == [], f"true values in {method} {path}: {found}"
    assert str(service.data_dir) not in body


def _check(case: schemathesis.Case, service: Service) -> None:
    who = "steward" if case.path.startswith("/v1/steward/") else "alice"
    response = case.call(headers={"Authorization": f"Bearer {service.tokens[who]}"}, timeout=60)
    content_type = response.headers.get("content-type", [""])[0]
    _judge(case.method, case.formatted_path, response.status_code, response.text, content_type, service)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_server_error_and_no_true_value(fuzzed: Service, mode: GenerationMode) -> None:
    # The Python API rather than schemathesis' pytest plugin: that plugin does not run under pytest 9.
    schema = schemathesis.openapi.from_url(fuzzed.url + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    for operation in operations:

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(case: schemathesis.Case) -> None:
            _check(case, fuzzed)

        run()


def with_sample_links(raw: dict[str, Any]) -> dict[str, Any]:
    """The published schema ``raw`` with ``SAMPLE_LINKS`` added (targets by their operationId)."""
    paths = raw["paths"]
    # The YAML route publishes its body as text; schemathesis YAML-dumps a body of that schema as one
    # string scalar, so it is told the text is a release spec (an object it then writes as YAML).
    yaml_body = paths["/v1/releases/yaml"]["post"]["requestBody"]["content"]["application/yaml"]
    yaml_body["schema"] = {"$ref": "#/components/schemas/ReleaseBody"}
    for (method, path, status), links in SAMPLE_LINKS.items():
        response = paths[path][method.lower()]["responses"][status]
        for name, ((target_method, target_path), fields) in links.items():
            target = paths[target_path][target_method.lower()]["operationId"]
            response.setdefault("links", {})[name] = {"operationId": target, **fields}
    return raw


def test_stateful_links_reach_releases(make_service: Callable[..., Service]) -> None:
    # A fresh service of its own: the derandomized run follows the responses, so a ledger that the
    # stateless runs had spent on (when they ran first in the same worker) took it down other paths
    # (one xdist split never followed GetRelease); on a fresh one the run is the same wherever it runs.
    fuzzed = make_service(min_latency=0.02, quantum=0.02)
    raw = httpx.get(fuzzed.url + "/openapi.json", timeout=30).json()
    published = {
        (method.upper(), path, status): sorted(response["links"])
        for path, operations in raw["paths"].items()
        for method, operation in operations.items()
        for status, response in operation["responses"].items()
        if "links" in response
    }
    assert published[("POST", "/v1/releases", "200")] == ["GetBudget", "GetDataset", "GetRelease"]
    assert published[("POST", "/v1/steward/tokens", "201")] == ["RevokeToken"]
    # The local-DP collection routes are a subsystem of their own (no link leads into or out of them; the
    # run above fuzzes them): leaving them out keeps this run's steps on the release and token states.
    schema = schemathesis.openapi.from_dict(with_sample_links(raw)).exclude(path_regex="^/v1/collections")
    schema.config.update(base_url=fuzzed.url)
    # The token is the test's to give (a link may hand on a new one). Valid requests only: the run is
    # there to reach deep states (releases, new analysts' tokens); the invalid ones are the other run's.
    schema.config.generation.update(with_security_parameters=False, modes=[GenerationMode.POSITIVE])
    seen: Counter[tuple[str, str, int]] = Counter()
    issued: set[str] = set()
    released: list[int] = []
    read_back: list[int] = []
    scenarios = [0]
    followed: Counter[tuple[str, int]] = Counter()  # (link, status of the request it made)

    class Workflow(schema.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            scenarios[0] += 1

        def step(self, input: Any) -> Any:
            output = super().step(input)
            if input.transition is not None and input.applied_parameters:  # the link's values were used
                link = input.transition.id.split("] ")[-1].split(" -> ")[0]
                followed[(link, output.response.status_code)] += 1
            return output

        def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
            given_token = {k.lower(): v for k, v in (case.headers or {}).items()}.get("authorization", "")
            if given_token.removeprefix("Bearer ") in issued:  # a link handed on a token the steward made
                return {"timeout": 60}
            who = "steward" if case.path.startswith("/v1/steward/") else "alice"
            return {"headers": {"Authorization": f"Bearer {fuzzed.tokens[who]}"}, "timeout": 60}

        def validate_response(self, response: Any, case: schemathesis.Case, *args: Any, **kwargs: Any) -> None:
            status = response.status_code
            seen[(case.method, case.path, status)] += 1
            content_type = response.headers.get("content-type", [""])[0]
            _judge(case.method, case.formatted_path, status, response.text, content_type, fuzzed)
            if status == 201 and case.path == "/v1/steward/tokens":
                issued.add(response.json()["token"])
            if (
                status == 200
                and case.method == "POST"
                and case.path in ("/v1/releases", "/v1/sql", "/v1/releases/yaml")
            ):
                released.append(response.json()["release_id"])
            if status == 200 and case.path == "/v1/releases/{release_id}":
                assert response.json()["release_id"] == case.path_parameters["release_id"]
                read_back.append(case.path_parameters["release_id"])

    def covered() -> bool:
        return bool(
            released
            and read_back
            and followed[("GetRelease", 200)]
            and followed[("CountRelease", 200)]
            and seen[("POST", "/v1/steward/tokens", 201)]
        )

    # The path follows the responses, and some are random (tokens, release ids, noisy values), so one
    # derandomized run can miss a state (CI on 3ae83ad: no token issued in 57 scenarios; 2 of about 20 runs).
    # Rounds with longer scenarios (another path) accumulate until every state below is reached, at most
    # STATEFUL_ROUNDS of them; the assertions after the loop are unchanged.
    start = time.monotonic()
    rounds = 0
    while rounds < STATEFUL_ROUNDS and not covered():
        Workflow.run(
            settings=settings(
                max_examples=STATEFUL_SCENARIOS,
                stateful_step_count=STATEFUL_STEPS + 2 * rounds,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
        )
        rounds += 1
    elapsed = time.monotonic() - start
    steps = sum(seen.values())
    statuses = Counter(status for _, _, status in seen.elements())
    print(
        f"\nstateful schemathesis: {scenarios[0]} scenarios in {rounds} round(s), {steps} requests in {elapsed:.1f} s; "
        f"statuses {dict(sorted(statuses.items()))}; {len(released)} successful releases "
        f"({len(set(released))} distinct), "
        f"{len(read_back)} read back by id, {len(issued)} tokens issued"
    )
    for (method, path, status), count in sorted(seen.items()):
        print(f"  {method:6} {path:40} {status}  {count}")
    print(
        "  links followed (link, status: times): "
        + ", ".join(f"{k} {s}: {n}" for (k, s), n in sorted(followed.items()))
    )
    assert max(statuses) < 500
    assert released and read_back
    assert followed[("GetRelease", 200)] > 0 and followed[("CountRelease", 200)] > 0
    assert seen[("POST", "/v1/steward/tokens", 201)] > 0
