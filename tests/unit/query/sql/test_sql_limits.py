"""SQL over the size limits is refused before parsing, with the rule; no input reaches a RecursionError.

Also the number size rule of ``dpsense.query._values`` that SQL literals (and every other front end)
obey: finite, at most 100 significant digits, a size within 1e-300..1e300.
"""

from __future__ import annotations

import sys

import pytest

from dpsense.core.errors import DPSenseError, UsageError
from dpsense.query._values import exact, number_problem
from dpsense.query.sql import parse_sql
from dpsense.query.sql._parse import MAX_SQL_CHARS, MAX_SQL_NESTING, MAX_SQL_OPERATORS, MAX_SQL_TOKENS
from tests.unit.query.sql.corpus import SCHEMA
from tests.unit.query.sql.test_sql_corpus import schema_for

WHERE = "SELECT COUNT(*) FROM events WHERE "


def _refused(text: str, *words: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_sql(text, schema_for=schema_for)
    message = str(caught.value)
    for word in words:
        assert word in message, message
    assert "recursion" not in message.lower()


OVER_LIMITS: list[tuple[str, str, list[str]]] = [
    ("1000-term AND", WHERE + " AND ".join(["age > 1"] * 1000), ["operators", "IN (...)"]),
    ("1000-term OR", WHERE + " OR ".join([f"region = 'r{i}'" for i in range(1000)]), ["operators"]),
    ("1000-term +", "SELECT " + " + ".join(["COUNT(*)"] * 1000) + " FROM events", ["at most"]),
    ("300-term +", "SELECT " + " + ".join(["COUNT(*)"] * 300) + " FROM events", ["operators"]),
    ("1000 NOTs", WHERE + "NOT " * 1000 + "age > 1", ["operators"]),
    ("1000 minus signs", "SELECT COUNT(*) * " + "- " * 1000 + "1 FROM events", ["operators"]),
    ("3000 parentheses", WHERE + "(" * 3000 + "age > 1" + ")" * 3000, ["at most"]),
    ("40 parentheses", WHERE + "(" * 40 + "age > 1" + ")" * 40, [f"at most {MAX_SQL_NESTING} levels"]),
    ("nested calls", "SELECT " + "ABS(" * 40 + "COUNT(*)" + ")" * 40 + " FROM events", ["nests"]),
    ("a cast chain", "SELECT COUNT(*) FROM events WHERE age" + "::INT" * 400 + " > 1", ["operators"]),
    ("over the length", WHERE + "age > 1 " + " " * MAX_SQL_CHARS, [f"at most {MAX_SQL_CHARS} characters"]),
    ("many tokens", "SELECT COUNT(*) FROM events WHERE age IN (" + ",".join(["1"] * 3000) + ")", ["tokens"]),
    ("0.1e99999", WHERE + "age > 0.1e99999", ["significant digits", "1e300"]),
    ("a 5000-digit literal", WHERE + "age > " + "9" * 5000, ["characters"]),
    ("1e400", "SELECT COUNT(*) * 1e400 FROM events", ["1e300"]),
    ("an unterminated string", WHERE + "region = 'north", ["could not be parsed"]),
]


@pytest.mark.parametrize(("text", "words"), [(t, w) for _, t, w in OVER_LIMITS], ids=[n for n, _, _ in OVER_LIMITS])
def test_sql_over_a_limit_is_a_usage_error_naming_the_rule(text: str, words: list[str]) -> None:
    _refused(text, *words)


def test_the_limits_leave_room_for_real_questions() -> None:
    """128 conditions, 100 summed aggregates, 30 parentheses and a 2000-value IN list all parse."""
    where = WHERE + " AND ".join(["age > 1"] * 128)
    wide = "SELECT " + " + ".join(["COUNT(*)"] * 100) + " FROM events"
    deep = WHERE + "(" * 30 + "age > 1" + ")" * 30
    listed = WHERE + "visits IN (" + ",".join(str(i) for i in range(2000)) + ")"  # no declared keys
    for text in (where, wide, deep, listed):
        parse_sql(text, schema_for=schema_for).query.build(SCHEMA)
    assert MAX_SQL_OPERATORS >= 128 and MAX_SQL_TOKENS >= 4000


def test_no_limit_depends_on_the_recursion_limit() -> None:
    """At a low recursion limit the refusals still come from the size rules, not from a RecursionError."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(400, old // 2))
    try:
        _refused(WHERE + " AND ".join(["age > 1"] * 1000), "operators")
        _refused(WHERE + "(" * 3000 + "age > 1" + ")" * 3000, "at most")
    finally:
        sys.setrecursionlimit(old)


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        (0.5, True),
        (0, True),
        ("1e-8", True),
        ("1e299", True),
        (10**299, True),
        ("0." + "1" * 100, True),
        (float("nan"), False),
        (float("inf"), False),
        (1e300, False),
        ("1e400", False),
        ("0.1e99999", False),
        ("1" * 5000, False),
        (10**5000, False),
        ("1e-400", False),
        ("-Infinity", False),
        ("1." + "1" * 101, False),
    ],
    ids=lambda v: f"int of {v.bit_length()} bits" if isinstance(v, int) and v.bit_length() > 1000 else repr(v)[:24],
)
def test_the_number_size_rule(value: object, kept: bool) -> None:
    assert (number_problem(value) is None) is kept
    if not kept:
        with pytest.raises(DPSenseError, match="significant digits"):
            exact(value, what="a bound")
