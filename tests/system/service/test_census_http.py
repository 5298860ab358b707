"""Census tables over HTTP (issue 19, item 2): a hierarchy declared through the steward's route, the table
released through ``POST /v1/releases`` (one charge, exact consistency), refusals in JSON words.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tests.system.service.support import POLICY, Service, new_key

DISTRICTS = {"north": ["n1", "n2"], "south": ["s1", "s2", "s3"], "east": ["e1"]}
LEAVES = [[region, district] for region, names in DISTRICTS.items() for district in names]


def _register(service: Service, name: str, hierarchies: dict[str, Any]) -> Any:
    person = np.arange(600)
    leaf = np.array(LEAVES)[person % len(LEAVES)]
    frame = pd.DataFrame({"person_id": [f"p{p}" for p in person], "region": leaf[:, 0], "district": leaf[:, 1]})
    frame.to_csv(service.data_dir / f"{name}.csv", index=False)
    body = {
        "name": name,
        "source": f"{name}.csv",
        "privacy_unit": "person_id",
        "keys": {"region": list(DISTRICTS), "district": [d for names in DISTRICTS.values() for d in names]},
        "max_rows_per_unit": 1,
        "budget": {"epsilon": 10},
        "policy": POLICY,
        "hierarchies": hierarchies,
    }
    return service.api("steward").post("/v1/steward/datasets", body)


def test_a_census_table_declared_and_released_over_http(service: Service) -> None:
    made = _register(service, "census", {"geo": {"levels": ["region", "district"], "keys": LEAVES}})
    assert made.status_code == 201, made.text
    spec = {
        "dataset": "census",
        "epsilon": 1,
        "aggregates": {"people": {"kind": "hierarchical_count", "hierarchy": "geo", "split": [1, 1, 2]}},
    }
    response = service.api("alice").post("/v1/releases", spec, key=new_key())
    assert response.status_code == 200, response.text
    doc = response.json()
    assert doc["columns"][:3] == ["level", "region", "district"]
    rows = [dict(zip(doc["columns"], row, strict=True)) for row in doc["rows"]]
    total = next(r["people"] for r in rows if r["level"] == "total")
    regions = {r["region"]: r["people"] for r in rows if r["level"] == "region"}
    assert sum(regions.values()) == total and all(isinstance(v, int) and v >= 0 for v in regions.values())
    for region, value in regions.items():
        assert sum(r["people"] for r in rows if r["level"] == "district" and r["region"] == region) == value
    assert doc["charged"]["epsilon"] == "1/1" and "split" in doc["explain"]


def test_a_bad_hierarchy_is_refused_in_json_words_and_registers_nothing(service: Service) -> None:
    two_parents = {"geo": {"levels": ["region", "district"], "keys": [*LEAVES, ["east", "n1"]]}}
    refused = _register(service, "bad1", two_parents)
    assert refused.status_code == 400 and "two parents" in refused.text
    malformed = _register(service, "bad2", {"geo": {"levels": [], "keys": LEAVES}})
    assert malformed.status_code == 422 and "hierarchies" in malformed.text
    unknown = _register(service, "bad3", {"geo": {"levels": ["region", "town"], "keys": LEAVES}})
    assert unknown.status_code == 400 and "town" in unknown.text
    listed = service.api("alice").get("/v1/datasets").json()["datasets"]
    assert not {"bad1", "bad2", "bad3"} & {d["name"] for d in listed}
