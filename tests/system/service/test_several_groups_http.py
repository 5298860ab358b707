"""Grouping by several columns over HTTP: a JSON key set, one column per group column, refusals in JSON words."""

from __future__ import annotations

from tests.system.service.support import Service, new_key, spec


def test_a_key_set_and_sql_over_two_columns(service: Service) -> None:
    dave = service.api("dave")
    pairs = [["north", 18], ["south", 49], ["east", 18]]
    body = spec(0.4) | {"group_by": {"columns": ["region", "age"], "keys": pairs}, "max_groups_per_unit": 1}
    response = dave.release(body)
    assert response.status_code == 200, response.text
    doc = response.json()
    assert doc["columns"][:2] == ["region", "age"]
    assert sorted([row[0], row[1]] for row in doc["rows"]) == sorted(pairs)
    sql = {"sql": "SELECT age, region, COUNT(*) AS n FROM events WHERE age <= 19 GROUP BY region, age", "epsilon": 0.3}
    refused = dave.post("/v1/sql", sql, key=new_key())  # age has no public keys: a selection needs δ
    assert refused.status_code == 400 and "delta > 0" in refused.text
    unbounded = dave.post("/v1/sql", sql | {"delta": "1e-8"}, key=new_key())  # ... and a bound on age's groups
    assert unbounded.status_code == 400 and "max_groups_per_unit" in unbounded.text


def test_a_key_of_the_wrong_shape_is_a_422_naming_the_json_field(service: Service) -> None:
    dave = service.api("dave")
    body = spec(0.4) | {"group_by": {"columns": ["region", "age"], "keys": ["north"]}}
    response = dave.release(body)
    assert response.status_code == 422, response.text
    assert "group_by" in response.text and "columns" in response.text
