"""Schemathesis against the published OpenAPI schema of a running server: no 5xx, no true value in any body.

Every operation gets a bounded number of generated requests (valid and invalid ones), sent with a
valid token (the steward's for ``/v1/steward/`` routes, an analyst's elsewhere). A response must not
be a server error, and no body may contain a spelling of the planted dataset's true sums and means.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

from tests.system.service.support import Service

EXAMPLES = 25


@pytest.fixture(scope="module")
def fuzzed(make_service: Callable[..., Service]) -> Service:
    """A service of its own (fuzzing may create analysts and spend budget), with short padding."""
    return make_service(min_latency=0.02, quantum=0.02)


def _check(case: schemathesis.Case, service: Service) -> None:
    who = "steward" if case.path.startswith("/v1/steward/") else "alice"
    response = case.call(headers={"Authorization": f"Bearer {service.tokens[who]}"}, timeout=60)
    body = response.text
    service.seen.append(body)
    assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.status_code} {body[:500]}"
    found = sorted(s for s in service.secrets if s in body)
    assert found == [], f"true values in {case.method} {case.formatted_path}: {found}"
    assert str(service.data_dir) not in body


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
