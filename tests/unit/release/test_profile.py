"""Profiles: declared public facts become a query schema; bad declarations are refused without data."""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import pytest

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import InvalidBounds, InvalidData, UsageError
from dpsense.engine import ColumnInfo, TableInfo
from dpsense.query import ColumnKind
from dpsense.release._profile import Profile, build_profile, check_quality

INFO = TableInfo(
    "t",
    (
        ColumnInfo("pid", "VARCHAR", "string"),
        ColumnInfo("region", "VARCHAR", "string"),
        ColumnInfo("hours", "DOUBLE", "float"),
        ColumnInfo("age", "BIGINT", "integer"),
        ColumnInfo("at", "TIMESTAMP", "temporal"),
    ),
)


def build(**kw: object) -> Profile:
    args: dict[str, object] = {
        "unit": "pid",
        "adjacency": Adjacency.ADD_REMOVE,
        "bounds": {"hours": (0, 24)},
        "keys": {"region": ["a", "b"]},
        "kinds": {},
        "policies": {},
        "max_rows_per_unit": 3,
    }
    args.update(kw)
    return build_profile(INFO, **args)  # type: ignore[arg-type]


def test_kinds_come_from_types_and_temporal_columns_stay_out() -> None:
    schema = build().schema()
    assert schema.unit_column == "pid"
    assert schema.column("hours").kind is ColumnKind.NUMERIC
    assert schema.column("age").kind is ColumnKind.INTEGER
    assert schema.column("region").keys == ("a", "b")
    assert "at" not in schema


def test_the_profile_round_trips_through_json() -> None:
    profile = build(policies={"hours": "clamp", "pid": "drop"})
    back = Profile.from_json(profile.to_json())
    assert back == profile
    assert back.columns["hours"].bounds == (Fraction(0), Fraction(24))


@pytest.mark.parametrize(
    ("changes", "error", "text"),
    [
        ({"unit": "person"}, UsageError, "privacy_unit="),
        ({"bounds": {"hours": (5, 1)}}, InvalidBounds, "swap"),
        ({"keys": {"nope": [1]}}, UsageError, "use one of"),
        ({"policies": {"pid": "clamp"}}, UsageError, "refused or dropped"),
        ({"policies": {"age": "clamp"}}, UsageError, "declare bounds"),
        ({"kinds": {"region": "numeric"}}, UsageError, "not numeric"),
        ({"kinds": {"hours": "unit"}}, UsageError, "privacy_unit="),
    ],
)
def test_bad_declarations_are_refused(changes: dict[str, object], error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=text):
        build(**changes)


def test_quality_refusals_name_the_column_and_respect_policies() -> None:
    clean = SimpleNamespace(missing=0, nan=0, infinite=0)
    bad = SimpleNamespace(missing=0, nan=2, infinite=0)
    check_quality(build(), {"pid": clean, "hours": clean, "age": clean})
    with pytest.raises(InvalidData) as info:
        check_quality(build(), {"pid": clean, "hours": bad})
    assert info.value.value == "hours"
    check_quality(build(policies={"hours": "drop"}), {"pid": clean, "hours": bad})
    with pytest.raises(InvalidData, match="without a privacy unit"):
        check_quality(build(), {"pid": SimpleNamespace(missing=1, nan=0, infinite=0)})
