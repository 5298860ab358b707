"""Degenerate views through the HTTP service: no 5xx, no charged failure (docs/design.md invariant 6).

The same views as ``tests/system/release/test_degenerate_views.py`` (empty, one record, one unit, all
ties, a NULL-only column, values at the bounds), registered through the steward's route from Parquet
files, under both adjacencies; every statistic the release spec can state, ungrouped and grouped
(public keys and selected keys), through ``POST /v1/releases`` and ``POST /v1/sql``. A response is a
200 release of the expected shape, or a 4xx refusal judged before the ledger (nothing charged).
The service runs without its latency floor so the module stays well under two minutes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from dpsense.ledger import ChargeState
from tests.system.release.test_degenerate_views import VIEWS
from tests.system.service.support import POLICY, REGIONS, Service, new_key

ADJACENCIES = ("add_remove", "replace")

#: name -> (aggregate spec, ungrouped only)
AGGREGATES: dict[str, tuple[dict[str, Any], bool]] = {
    "count": ({"kind": "count"}, False),
    "count_units": ({"kind": "count_units"}, False),
    "sum": ({"kind": "sum", "column": "hours"}, False),
    "mean": ({"kind": "mean", "column": "hours"}, False),
    "variance": ({"kind": "variance", "column": "hours"}, False),
    "median": ({"kind": "median", "column": "age"}, False),
    "quantile": ({"kind": "quantile", "column": "age", "q": 0.9}, False),
    "median_ptr": ({"kind": "median", "column": "age", "mechanism": "ptr_order_statistic", "proposed_bound": 5}, False),
    "trimmed_mean": ({"kind": "trimmed_mean", "column": "hours", "trim_fraction": 0.1}, False),
    "min_distance": ({"kind": "min_distance", "columns": ["x"]}, True),
    "approx_bounds": ({"kind": "approx_bounds", "column": "hours"}, True),
    "histogram": ({"kind": "histogram", "column": "region", "keys": REGIONS}, True),
}
GROUPINGS = ("none", "public_keys", "selected_keys")
SQL = {
    "count": "COUNT(*)",
    "count_units": "COUNT(DISTINCT person_id)",
    "mean": "AVG(hours)",
    "median": "MEDIAN(age)",
}


@pytest.fixture(scope="module")
def degenerate(make_service: Callable[..., Service]) -> Service:
    """A service without a latency floor, with every degenerate view registered under both adjacencies."""
    service = make_service(min_latency=0.0, quantum=0.001)
    steward = service.api("steward")
    for view, (frame, _) in VIEWS.items():
        for adjacency in ADJACENCIES:
            name = f"{view}_{adjacency}"
            frame.assign(copy=adjacency).to_parquet(service.data_dir / f"{name}.parquet", index=False)
            body = {
                "name": name,
                "source": f"{name}.parquet",
                "privacy_unit": "person_id",
                "adjacency": adjacency,
                "bounds": {"hours": [0, 24], "age": [0, 120], "x": [0, 24]},
                "keys": {"region": REGIONS},
                "kinds": {"x": "point"},
                "policies": {"hours": "clamp", "x": "clamp"},
                "max_rows_per_unit": 3,
                "max_groups_per_unit": {"region": 1, "team": 1},
                "budget": {"epsilon": 100_000, "delta": "1e-7"},
                "policy": POLICY | {"population": 1000, "delta_rationale": "δ = 1e-7 < 1/10^4"},
            }
            response = steward.post("/v1/steward/datasets", body)
            assert response.status_code == 201, response.text
    return service


def _answered(service: Service, response: httpx.Response, name: str, *, refusal: bool) -> dict[str, Any] | None:
    """The release document, or None for an expected 4xx refusal (which charged nothing)."""
    assert response.status_code < 500, response.text
    if response.status_code == 200:
        return dict(response.json())
    assert refusal, response.text
    assert response.status_code in (400, 422), response.text
    return None


def _charged_failures(service: Service, name: str) -> int:
    """Charges that failed after data access (a refused request records no charge at all)."""
    with service.ledger() as ledger:
        return sum(1 for c in ledger.charges(name) if c.state is not ChargeState.COMMITTED)


@pytest.mark.parametrize("adjacency", ADJACENCIES)
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_every_statistic_on_a_degenerate_view_over_http(degenerate: Service, view: str, adjacency: str) -> None:
    name = f"{view}_{adjacency}"
    bob = degenerate.api("bob")
    filters = [{"column": "age", "op": ">", "value": 119}] if VIEWS[view][1] else []  # no row: ages 20..59
    for stat, (aggregate, whole) in AGGREGATES.items():
        for grouping in GROUPINGS if not whole else ("none",):
            spec: dict[str, Any] = {"dataset": name, "epsilon": 0.5, "filters": filters, "aggregates": {"v": aggregate}}
            if grouping == "public_keys":
                spec["group_by"] = {"column": "region", "keys": REGIONS}
            elif grouping == "selected_keys":
                spec["group_by"] = {"column": "team"}
            if grouping == "selected_keys" or "mechanism" in aggregate:
                spec["delta"] = 1e-9
            refusal = stat == "min_distance" and adjacency == "replace"  # refused by rule before any charge
            doc = _answered(degenerate, bob.release(spec), name, refusal=refusal)
            if doc is not None and (grouping == "public_keys" or stat == "histogram"):
                assert len(doc["rows"]) == len(REGIONS), (stat, grouping)
            elif doc is not None and grouping == "none":
                assert len(doc["rows"]) == 1, (stat, grouping)
    for stat, function in SQL.items():
        where = " WHERE age > 119" if VIEWS[view][1] else ""
        for grouped in (False, True):
            select = f"region, {function} AS v" if grouped else f"{function} AS v"
            text = f"SELECT {select} FROM {name}{where}" + (" GROUP BY region" if grouped else "")
            doc = _answered(
                degenerate, bob.post("/v1/sql", {"sql": text, "epsilon": 0.5}, key=new_key()), name, refusal=False
            )
            assert doc is not None and len(doc["rows"]) == (len(REGIONS) if grouped else 1), stat
    assert _charged_failures(degenerate, name) == 0
