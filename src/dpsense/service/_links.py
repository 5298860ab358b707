"""OpenAPI links in the published schema: how a value in one response feeds the next request.

A release answers its ``release_id``, which ``GET /v1/releases/{release_id}`` reads back; a listing
names datasets and releases to open; a new token's ``token_id`` is what ``DELETE
/v1/steward/tokens/{token_id}`` revokes; a newly allowed analyst is who ``POST /v1/steward/tokens``
issues a token for. Clients and tools that follow links (schemathesis' stateful runs among them,
``tests/system/service/test_schemathesis.py``) chain the routes by them.

The links name their target by ``operationId``, looked up in the schema itself (FastAPI derives the
ids from the route functions), so renaming a route function cannot leave a dangling link; a link
whose source or target route is missing is left out rather than published broken.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

Route = tuple[str, str]

_RELEASE = ("GET", "/v1/releases/{release_id}")
_DATASET = ("GET", "/v1/datasets/{dataset}")
_BUDGET = ("GET", "/v1/datasets/{dataset}/budget")


def _release_links(release_id: str) -> dict[str, tuple[Route, dict[str, Any]]]:
    return {"GetRelease": (_RELEASE, {"parameters": {"release_id": release_id}})}


def _dataset_links(name: str) -> dict[str, tuple[Route, dict[str, Any]]]:
    return {
        "GetDataset": (_DATASET, {"parameters": {"dataset": name}}),
        "GetBudget": (_BUDGET, {"parameters": {"dataset": name}}),
    }


#: (method, path, status) of a response -> link name -> (target route, the link's parameters / requestBody).
LINKS: dict[tuple[str, str, str], dict[str, tuple[Route, dict[str, Any]]]] = {
    ("POST", "/v1/releases", "200"): _release_links("$response.body#/release_id")
    | _dataset_links("$response.body#/dataset"),
    ("POST", "/v1/releases/yaml", "200"): _release_links("$response.body#/release_id")
    | _dataset_links("$response.body#/dataset"),
    ("POST", "/v1/sql", "200"): _release_links("$response.body#/release_id")
    | _dataset_links("$response.body#/dataset"),
    ("GET", "/v1/releases", "200"): _release_links("$response.body#/releases/0/release_id"),
    ("GET", "/v1/datasets", "200"): _dataset_links("$response.body#/datasets/0/name"),
    ("POST", "/v1/steward/datasets", "201"): _dataset_links("$response.body#/dataset/name"),
    ("POST", "/v1/steward/analysts", "201"): {
        "CreateToken": (("POST", "/v1/steward/tokens"), {"requestBody": {"analyst": "$request.body#/name"}})
    },
    ("POST", "/v1/steward/tokens", "201"): {
        "RevokeToken": (
            ("DELETE", "/v1/steward/tokens/{token_id}"),
            {"parameters": {"token_id": "$response.body#/token_id"}},
        )
    },
}


def add_links(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (an OpenAPI document) with ``LINKS`` added to its responses, in place; returns it."""
    paths: dict[str, Any] = schema.get("paths", {})

    def operation(route: Route) -> dict[str, Any] | None:
        found = paths.get(route[1], {}).get(route[0].lower())
        return found if isinstance(found, dict) else None

    for (method, path, status), links in LINKS.items():
        source = operation((method, path))
        response = (source or {}).get("responses", {}).get(status)
        if response is None:
            continue
        for name, (route, fields) in links.items():
            target = operation(route)
            if target is None or "operationId" not in target:
                continue
            response.setdefault("links", {})[name] = {"operationId": target["operationId"], **fields}
    return schema


def install_links(app: FastAPI) -> None:
    """Publish ``LINKS`` in ``app``'s ``/openapi.json``."""
    build: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        return add_links(build())  # FastAPI builds the schema once and caches it; adding again is a no-op

    app.openapi = openapi  # type: ignore[method-assign]
