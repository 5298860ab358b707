"""The CLI and the service read one release spec (``dpsense.interface.spec``): parity by construction.

Both front ends' models are subclasses of the shared ``ReleaseSpec``; what is left to test is what
each adds or refuses, and that the same documents reach both entry points alike: every accepted
document gives an equal ``Query``, every refused one is refused by both, with a fix in the words of
the interface (YAML keys for the CLI, JSON fields for the service's 422).
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from dpsense.cli._spec import RELEASE_HELP, ReleaseSpec
from dpsense.cli._yaml import validate
from dpsense.core.errors import UsageError
from dpsense.interface import spec
from dpsense.service._errors import SCHEMA_FIX, validation_document
from dpsense.service._spec import CLI_ONLY, ReleaseBody

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
    {"group_by": {"columns": ["region", "diagnosis"]}, "aggregates": {"n": {"kind": "count"}}},
    {
        "group_by": {"columns": ["region", "diagnosis"], "keys": [["north", "flu"], ["south", "cold"]]},
        "aggregates": {"n": {"kind": "count"}},
    },
    {
        "group_by": [{"column": "region", "keys": ["north"]}, {"column": "diagnosis"}],
        "aggregates": {"n": {"kind": "count"}},
    },
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
    {"aggregates": {"n": {"kind": "count"}}, "dataset": "x" * (spec.MAX_NAME + 1)},
    {"aggregates": {"n": {"kind": "count"}}, "dataset": "ev\x00ents"},
    {"aggregates": {"n": {"kind": "count"}}, "epsilon": "1e99999"},
    {"aggregates": {"n": {"kind": "count"}}, "epsilon": True},
    {"aggregates": {"n": {"kind": "histogram", "column": "c", "keys": list(range(spec.MAX_KEYS + 1))}}},
    {"aggregates": {f"a{i}": {"kind": "count"} for i in range(spec.MAX_STEPS + 1)}},
    {"aggregates": {"n": {"kind": "count"}}, "group_by": {"column": "region", "columns": ["a", "b"]}},
    {"aggregates": {"n": {"kind": "count"}}, "group_by": {}},
    {"aggregates": {"n": {"kind": "count"}}, "group_by": {"columns": ["region"]}},
    {"aggregates": {"n": {"kind": "count"}}, "group_by": {"columns": ["a", "b"], "keys": ["north"]}},
    {"aggregates": {"n": {"kind": "count"}}, "group_by": {"column": "a", "keys": [["north"]]}},
    {"aggregates": {"n": {"kind": "count"}}, "group_by": {"columns": ["a", "b"], "keys": [["north"]]}},
]


def _cli(doc: dict[str, Any]) -> Any:
    return validate(doc, ReleaseSpec, what="release spec", help_hint=RELEASE_HELP).query()


def _service(doc: dict[str, Any]) -> Any:
    return ReleaseBody.model_validate(doc).query()


def test_both_front_ends_read_the_shared_model() -> None:
    assert issubclass(ReleaseSpec, spec.ReleaseSpec) and issubclass(ReleaseBody, spec.ReleaseSpec)
    shared = set(spec.ReleaseSpec.model_fields)
    assert set(ReleaseSpec.model_fields) - shared == {
        "source",
        "request_id",
        "engine",
        "spark_master",
        "spark_collect_limit",
    }
    assert set(ReleaseBody.model_fields) - shared == {"family"}
    for model in (ReleaseSpec, ReleaseBody):
        assert model.model_fields["aggregates"].annotation == spec.ReleaseSpec.model_fields["aggregates"].annotation


@pytest.mark.parametrize("doc", ACCEPTED)
def test_accepted_documents_ask_the_same_query(doc: dict[str, Any]) -> None:
    assert _service(BASE | doc) == _cli(BASE | doc)


@pytest.mark.parametrize("doc", REFUSED)
def test_refused_documents_are_refused_by_both(doc: dict[str, Any]) -> None:
    with pytest.raises(UsageError) as cli:
        _cli(BASE | doc)
    assert cli.value.fix
    with pytest.raises((ValidationError, UsageError)) as service:
        _service(BASE | doc)
    if isinstance(service.value, ValidationError):
        assert validation_document(service.value.errors(include_url=False))["error"]["fix"]
    else:
        assert service.value.fix


@pytest.mark.parametrize("field", sorted(CLI_ONLY))
def test_the_service_refuses_the_cli_only_fields_with_their_fix(field: str) -> None:
    value: Any = {"engine": "duckdb", "spark_collect_limit": 10}.get(field, "x")
    doc = BASE | {"aggregates": {"n": {"kind": "count"}}, field: value}
    if not field.startswith("spark_"):  # a spark_ field needs engine: spark in the CLI
        _cli(doc)
    with pytest.raises(ValidationError) as refused:
        _service(doc)
    error = validation_document(refused.value.errors(include_url=False))["error"]
    assert field in error["message"] and error["fix"] == CLI_ONLY[field]


def test_the_cli_refuses_the_service_only_field() -> None:
    with pytest.raises(UsageError, match="family") as refused:
        _cli(BASE | {"aggregates": {"n": {"kind": "count"}}, "family": "weekly"})
    assert refused.value.fix.startswith("use one of: aggregates, dataset")  # no family sub-budgets in the CLI


def test_a_422_carries_the_first_problems_fix_else_the_schema() -> None:
    with pytest.raises(ValidationError) as typo:
        ReleaseBody.model_validate(BASE | {"aggregates": {"n": {"kind": "count"}}, "epsilonn": 1})
    assert validation_document(typo.value.errors())["error"]["fix"].startswith("did you mean 'epsilon'?")
    with pytest.raises(ValidationError) as unused:
        ReleaseBody.model_validate(BASE | {"aggregates": {"n": {"kind": "count", "column": "hours"}}})
    assert validation_document(unused.value.errors())["error"]["fix"].startswith("remove 'column'")
    with pytest.raises(ValidationError) as missing:
        ReleaseBody.model_validate({"epsilon": 1, "aggregates": {"n": {"kind": "count"}}})
    assert validation_document(missing.value.errors())["error"]["fix"] == SCHEMA_FIX


def test_query_layer_refusals_name_the_field_in_each_front_ends_words() -> None:
    doc = BASE | {"aggregates": {"m": {"kind": "mean", "column": "hours", "bounds": [5, 1]}}}
    with pytest.raises(UsageError, match=r"^release spec aggregates\.m: "):
        _cli(doc)
    with pytest.raises(UsageError, match=r"^release request aggregates\.m: "):
        _service(doc)
