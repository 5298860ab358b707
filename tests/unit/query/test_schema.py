from __future__ import annotations

from fractions import Fraction

import pytest

from dpsense.core.errors import InvalidBounds, UsageError
from dpsense.query import ColumnKind, Schema


def test_schema_normalises_bounds_and_keys(schema: Schema) -> None:
    assert schema.column("hours").bounds == (Fraction(0), Fraction(24))
    assert schema.column("y").bounds == (Fraction(-1), Fraction(1))
    assert schema.column("region").keys == ("east", "north", "south", "west")
    assert schema.column("device").keys is None
    assert schema.column("age").kind is ColumnKind.INTEGER
    assert schema.unit_column == "person_id"
    assert "hours" in schema and "nope" not in schema


def test_schema_is_hashable_and_compares_by_content() -> None:
    a = Schema({"h": "numeric", "r": "categorical"}, bounds={"h": (0, 24.0)}, keys={"r": ["b", "a", "a"]})
    b = Schema({"r": ColumnKind.CATEGORICAL, "h": "NUMERIC"}, bounds={"h": ("0", 24)}, keys={"r": ("a", "b")})
    assert a == b and hash(a) == hash(b)
    assert a != Schema({"h": "numeric", "r": "categorical"}, bounds={"h": (0, 25)}, keys={"r": ["a", "b"]})


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"columns": {"h": "float"}}, UsageError, "unknown kind"),
        ({"columns": {}}, UsageError, "at least one column"),
        ({"columns": {"": "numeric"}}, UsageError, "non-empty strings"),
        ({"columns": {"h": "numeric"}, "bounds": {"h": (24, 0)}}, InvalidBounds, "reversed"),
        ({"columns": {"h": "numeric"}, "bounds": {"h": (0, float("inf"))}}, InvalidBounds, "finite"),
        ({"columns": {"h": "numeric"}, "bounds": {"h": (0,)}}, InvalidBounds, "pair"),
        ({"columns": {"h": "numeric"}, "bounds": {"z": (0, 1)}}, UsageError, "does not declare"),
        ({"columns": {"r": "categorical"}, "bounds": {"r": (0, 1)}}, UsageError, "bounds belong"),
        ({"columns": {"h": "numeric"}, "keys": {"h": [1]}}, UsageError, "keys belong"),
        ({"columns": {"r": "categorical"}, "keys": {"r": []}}, UsageError, "must not be empty"),
        ({"columns": {"a": "unit", "b": "unit"}}, UsageError, "at most one privacy-unit"),
    ],
)
def test_schema_refusals(kwargs: dict[str, object], error: type[UsageError], fragment: str) -> None:
    columns = kwargs.pop("columns")
    with pytest.raises(error, match=fragment) as info:
        Schema(columns, **kwargs)  # type: ignore[arg-type]
    assert "Fix:" in str(info.value)
