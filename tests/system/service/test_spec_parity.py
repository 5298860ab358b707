"""The service's release request and the CLI's release spec read the same documents the same way.

The two front ends may not import each other (the import contract), so this test keeps them in
step: every accepted document gives an equal ``Query``, every refused one is refused by both, and the
per-kind field table is the same. The service leaves out ``source`` and ``request_id`` on purpose.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from dpsense.cli._spec import _FIELDS, RELEASE_HELP, ReleaseSpec
from dpsense.cli._yaml import validate
from dpsense.core.errors import UsageError
from dpsense.service._spec import FIELDS, ReleaseBody

BASE: dict[str, Any] = {"dataset": "events", "epsilon": 1}
ACCEPTED: list[dict[str, Any]] = [
    {"aggregates": {"n": {"kind": "count"}}},
    {
        "delta": "1e-8",
        "group_by": {"column": "region", "keys": ["north", "south"]},
        "max_groups_per_unit": 1,
        "filters": [{"column": "age", "op": ">=", "value": 18}, {"column": "region", "op": "in", "value": ["a"]}],
        "aggregates": {
            "people": {"kind": "count_units"},
            "events": {"kind": "count", "max_rows_per_unit": 30},
            "mean_hours": {"kind": "mean", "column": "hours", "bounds": [0, 24]},
            "p90": {"kind": "quantile", "column": "age", "q": 0.9},
            "trim": {"kind": "trimmed_mean", "column": "hours", "trim_fraction": "0.1"},
            "hist": {"kind": "histogram", "column": "region", "keys": ["north", "south"]},
            "gap": {"kind": "min_distance", "columns": ["x", "y"], "bounds": [0, 10]},
            "tri": {"kind": "triangle_count", "columns": ["a", "b"], "mechanism": "smooth_cauchy"},
            "var": {"kind": "variance", "column": "hours", "mechanism": "laplace"},
        },
    },
    {"public_n": 100, "snapshot": "v1", "aggregates": {"s": {"kind": "sum", "column": "hours"}}},
]
REFUSED: list[dict[str, Any]] = [
    {"aggregates": {}},
    {"aggregates": {"n": {"kind": "count", "column": "hours"}}},
    {"aggregates": {"q": {"kind": "quantile", "column": "age"}}},
    {"aggregates": {"n": {"kind": "countt"}}},
    {"aggregates": {"m": {"kind": "mean", "column": "hours", "bounds": [5, 1]}}},
    {"aggregates": {"q": {"kind": "quantile", "column": "age", "q": 2}}},
    {"aggregates": {"n": {"kind": "count"}}, "epsilonn": 1},
    {"aggregates": {"n": {"kind": "count"}}, "filters": [{"column": "age", "op": "~", "value": 1}]},
    {"aggregates": {"n": {"kind": "count", "max_rows_per_unit": True}}},
]


def _cli(doc: dict[str, Any]) -> Any:
    return validate(doc, ReleaseSpec, what="release spec", help_hint=RELEASE_HELP).query()


def _service(doc: dict[str, Any]) -> Any:
    return ReleaseBody.model_validate(doc).query()


@pytest.mark.parametrize("doc", ACCEPTED)
def test_accepted_documents_ask_the_same_query(doc: dict[str, Any]) -> None:
    assert _service(BASE | doc) == _cli(BASE | doc)


@pytest.mark.parametrize("doc", REFUSED)
def test_refused_documents_are_refused_by_both(doc: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        _cli(BASE | doc)
    with pytest.raises((ValidationError, UsageError)):
        _service(BASE | doc)


@pytest.mark.parametrize("field", ["source", "request_id"])
def test_the_service_refuses_the_cli_only_fields(field: str) -> None:
    doc = BASE | {"aggregates": {"n": {"kind": "count"}}, field: "x"}
    _cli(doc)
    with pytest.raises(ValidationError, match=field):
        _service(doc)


def test_the_field_tables_agree() -> None:
    assert FIELDS == _FIELDS
