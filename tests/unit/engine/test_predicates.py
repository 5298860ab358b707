from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from dpsense.core.errors import UsageError
from dpsense.engine import Predicate, predicate


def test_predicate_helper_builds_frozen_value_tuples() -> None:
    assert predicate("age", ">=", 18) == Predicate("age", ">=", (18,))
    assert predicate("region", "in", ["north", "south"]) == Predicate("region", "in", ("north", "south"))
    assert predicate("region", "in", (x for x in "ab")).values == ("a", "b")
    assert predicate("day", "==", dt.date(2024, 1, 2)).values == (dt.date(2024, 1, 2),)
    assert Predicate("x", "<", [Decimal("1.5")]).values == (Decimal("1.5"),)  # type: ignore[arg-type]
    p = predicate("flag", "!=", True)
    with pytest.raises(AttributeError):
        p.op = "=="  # type: ignore[misc]
    assert hash(p) == hash(predicate("flag", "!=", True))


@pytest.mark.parametrize(
    ("column", "op", "values", "rule"),
    [
        ("", "==", (1,), "non-empty string"),
        ("x", "=", (1,), "operator is one of"),
        ("x", "like", ("a%",), "operator is one of"),
        ("x", "in", (), "at least one value"),
        ("x", "==", (1, 2), "exactly one value"),
        ("x", "<", (), "exactly one value"),
        ("x", "==", (None,), "may not be None"),
        ("x", "in", (1, None), "may not be None"),
        ("x", "==", (float("nan"),), "NaN"),
        ("x", "==", (Decimal("NaN"),), "NaN"),
        ("x", "==", (2**127,), "128 bits"),
        ("x", "==", ([1],), "plain constant"),
        ("x", "==", (b"raw",), "plain constant"),
        ("x", "<", ("b",), "compares numbers"),
        ("x", ">=", (True,), "compares numbers"),
        ("x", "<=", (dt.date(2024, 1, 1),), "compares numbers"),
        ("x", "==", "abc", "tuple of constants"),
    ],
)
def test_bad_predicates_are_refused_with_a_fix(column: str, op: str, values: object, rule: str) -> None:
    with pytest.raises(UsageError, match=rule) as err:
        Predicate(column, op, values)  # type: ignore[arg-type]
    assert "Fix:" in str(err.value)


def test_in_needs_an_iterable_of_values() -> None:
    with pytest.raises(UsageError, match="list of values"):
        predicate("region", "in", "north")
    with pytest.raises(UsageError, match="list of values"):
        predicate("n", "in", 3)


def test_errors_name_the_column_and_the_value_type_not_the_value() -> None:
    with pytest.raises(UsageError) as err:
        predicate("name", "<", "Alice Example")
    assert "name < <str>" in str(err.value) and "Alice Example" not in str(err.value)
