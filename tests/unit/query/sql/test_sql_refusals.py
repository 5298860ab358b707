"""Unsupported SQL is refused with an error naming the construct and the alternative (no data read)."""

from __future__ import annotations

import contextlib
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsense.core.errors import DPSenseError, UnsupportedRequest, UsageError
from dpsense.query.sql import evaluate, parse_sql
from tests.unit.query.sql.corpus import EQUIVALENT, NEAR_MISSES, SCHEMA
from tests.unit.query.sql.test_sql_corpus import schema_for

REFUSED: list[tuple[str, type[Exception], str, str]] = [
    ("SELECT COUNT(*) FROM events JOIN events2 ON events.age = events2.age", UnsupportedRequest, "JOIN", "one dataset"),
    ("SELECT COUNT(*) FROM (SELECT * FROM events) s", UnsupportedRequest, "FROM something", "registered dataset"),
    ("SELECT COUNT(*) FROM events WHERE age IN (SELECT age FROM events2)", UnsupportedRequest, "subquery", "directly"),
    ("SELECT SUM(hours) OVER () FROM events", UnsupportedRequest, "window", "GROUP BY"),
    ("SELECT my_udf(hours) FROM events", UnsupportedRequest, "MY_UDF", "COUNT(*)"),
    ("SELECT COUNT(*) FROM events LIMIT 10", UnsupportedRequest, "LIMIT", "returned table"),
    ("SELECT region, COUNT(*) FROM events GROUP BY region HAVING COUNT(*) > 5", UnsupportedRequest, "HAVING", "filter"),
    ("SELECT region, COUNT(*) FROM events GROUP BY region ORDER BY 2", UnsupportedRequest, "ORDER BY", "sort"),
    ("SELECT * FROM events", UnsupportedRequest, "SELECT *", "name the aggregates"),
    ("SELECT hours FROM events", UsageError, "GROUP BY", "aggregate it"),
    ("SELECT COUNT(hours) FROM events", UnsupportedRequest, "COUNT(<column>)", "COUNT(*)"),
    ("SELECT COUNT(DISTINCT region) FROM events", UnsupportedRequest, "COUNT(DISTINCT", "GROUP BY"),
    ("SELECT SUM(hours * 2) FROM events", UnsupportedRequest, "expression inside an aggregate", "AVG(hours) * 60"),
    ("SELECT COUNT(*) FROM events WHERE age > 3 OR hours < 2", UnsupportedRequest, "OR of conditions", "IN"),
    ("SELECT COUNT(*) FROM events WHERE hours IS NULL", UnsupportedRequest, "IS NULL", "data policy"),
    ("SELECT COUNT(*) FROM events WHERE region NOT IN ('n')", UnsupportedRequest, "NOT IN", "kept values"),
    ("SELECT COUNT(*) FROM events WHERE age > visits", UnsupportedRequest, "two columns", "literal"),
    ("SELECT COUNT(*) FROM events; DROP TABLE events", UnsupportedRequest, "several statements", "one SELECT"),
    ("DELETE FROM events", UnsupportedRequest, "DELETE", "SELECT"),
    ("WITH x AS (SELECT 1) SELECT COUNT(*) FROM events", UnsupportedRequest, "WITH", "directly"),
    ("SELECT DISTINCT region FROM events", UnsupportedRequest, "DISTINCT", "GROUP BY"),
    ("SELECT COUNT(*) FROM events UNION SELECT COUNT(*) FROM events2", UnsupportedRequest, "UNION", "SELECT"),
    ("SELECT COUNT(*) FROM public.events", UnsupportedRequest, "qualified", "without schema"),
    ("SELECT AVG(weight) FROM events", UsageError, "does not have", "use one of"),
    ("SELECT COUNT(*) FROM nowhere", UsageError, "registered", "register"),
    ("SELECT COUNT(*) FROM events WHERE x.age > 3", UsageError, "qualified by a table", "FROM name"),
    ("SELECT COUNT(*) FORM events", UsageError, "parse", "syntax"),
    ("SELECT QUANTILE_CONT(age, 1.5) FROM events", UsageError, "[0, 1]", "0.9"),
    ("SELECT 1 FROM events", UsageError, "at least one aggregate", "COUNT(*)"),
    (
        "SELECT region, COUNT(*) FROM events GROUP BY region || 'x'",
        UnsupportedRequest,
        "GROUP BY an expression",
        "column",
    ),
    ("SELECT COUNT(*) FROM events WHERE hours = NULL", UnsupportedRequest, "NULL", "data policy"),
    ("SELECT COUNT(*) FROM events TABLESAMPLE (10 PERCENT)", UnsupportedRequest, "SAMPLE", "AS alias"),
    ("SELECT COUNT(*) INTO copy FROM events", UnsupportedRequest, "INTO", "remove it"),
]


@pytest.mark.parametrize(("sql", "error", "construct", "fix"), REFUSED)
def test_refusals_name_the_construct_and_the_fix(sql: str, error: type[Exception], construct: str, fix: str) -> None:
    with pytest.raises(error) as info:
        parse_sql(sql, schema_for=schema_for).query.build(SCHEMA)
    text = str(info.value)
    assert construct.lower() in text.lower() and fix.lower() in text.lower()


def test_outputs_keep_aliases_and_post_processing() -> None:
    parsed = parse_sql(
        "SELECT region AS r, AVG(hours) * 60 AS minutes, COUNT(*) n FROM events GROUP BY r", schema_for=schema_for
    )
    assert [o.alias for o in parsed.outputs] == ["r", "minutes", "n"]
    assert parsed.outputs[1].expr == ("mul", ("agg", "mean(hours)"), ("num", Fraction(60)))
    values = {"mean(hours)": 2.0, "count": 7.0}
    assert evaluate(parsed.outputs[1].expr, lambda leaf: values[leaf[1]]) == 120.0


def test_the_query_is_released_under_meaning_derived_names() -> None:
    ir = parse_sql("SELECT AVG(hours) AS a, MEDIAN(age) m FROM events", schema_for=schema_for).query.build(SCHEMA)
    assert [a.name for a in ir.aggregates] == ["mean(hours)", "median(age)"]


SEEDS = [q for pair in EQUIVALENT + NEAR_MISSES for q in pair] + [r[0] for r in REFUSED]


def _mutate(text: str, edits: list[tuple[int, int, str]]) -> str:
    for position, kind, char in edits:
        if not text:
            return char
        i = position % len(text)
        if kind == 0:
            text = text[:i] + text[i + 1 :]
        elif kind == 1:
            text = text[:i] + char + text[i:]
        else:
            text = text[:i] + char + text[i + 1 :]
    return text


_CHARS = st.sampled_from([*list(" ()*,;.'\"-+/<>=!0123456789abcdeghinorstuwxyz_\n"), "SELECT", "FROM", "WHERE", "AND"])


@settings(max_examples=400, deadline=None)
@given(
    seed=st.sampled_from(SEEDS),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 2), _CHARS), max_size=6),
)
def test_mutated_sql_only_raises_documented_errors(seed: str, edits: list[tuple[int, int, str]]) -> None:
    text = _mutate(seed, edits)
    with contextlib.suppress(DPSenseError):
        parse_sql(text, schema_for=schema_for).query.build(SCHEMA)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=200))
def test_random_text_only_raises_documented_errors(text: str) -> None:
    with contextlib.suppress(DPSenseError):
        parse_sql(text, schema_for=schema_for).query.build(SCHEMA)
