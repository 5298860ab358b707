"""The OpenAPI links the service publishes (``dpsense.service._links``): targets by operationId, none dangling."""

from __future__ import annotations

import copy
from typing import Any

from dpsense.service._links import LINKS, add_links


def _operation(op_id: str, *statuses: str) -> dict[str, Any]:
    return {"operationId": op_id, "responses": {s: {"description": s} for s in statuses}}


def _schema(*, without: tuple[str, str] | None = None) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for method, path, status in LINKS:
        paths.setdefault(path, {})[method.lower()] = _operation(f"{method}:{path}", status, "422")
    for links in LINKS.values():
        for (method, path), _ in links.values():
            paths.setdefault(path, {}).setdefault(method.lower(), _operation(f"{method}:{path}", "200"))
    if without is not None:
        del paths[without[1]][without[0].lower()]
    return {"openapi": "3.1.0", "paths": paths}


def test_every_link_names_its_target_by_operation_id() -> None:
    schema = add_links(_schema())
    release = schema["paths"]["/v1/releases"]["post"]["responses"]
    assert release["200"]["links"]["GetRelease"] == {
        "operationId": "GET:/v1/releases/{release_id}",
        "parameters": {"release_id": "$response.body#/release_id"},
    }
    assert "links" not in release["422"]  # an error answers no id
    token = schema["paths"]["/v1/steward/tokens"]["post"]["responses"]["201"]["links"]["RevokeToken"]
    assert token["operationId"] == "DELETE:/v1/steward/tokens/{token_id}"
    published = sum(
        len(r.get("links", {})) for p in schema["paths"].values() for o in p.values() for r in o["responses"].values()
    )
    assert published == sum(len(links) for links in LINKS.values())


def test_adding_twice_changes_nothing_and_a_missing_route_is_left_out() -> None:
    once = add_links(_schema())
    assert add_links(copy.deepcopy(once)) == once
    schema = add_links(_schema(without=("GET", "/v1/releases/{release_id}")))
    links = schema["paths"]["/v1/releases"]["post"]["responses"]["200"]["links"]
    assert "GetRelease" not in links and "GetDataset" in links
    assert add_links({"openapi": "3.1.0"}) == {"openapi": "3.1.0"}
