"""``query._typos``: what the declarations show cannot be meant, refused when the query is built."""

from __future__ import annotations

import pytest

import dpsense as dp
from dpsense.query import Query, Schema

SCHEMA = Schema(
    {"uid": "unit", "region": "categorical", "age": "integer", "hours": "numeric", "free": "categorical"},
    bounds={"age": (0, 120), "hours": (0, 24)},
    keys={"region": ["north", "south"], "age": list(range(18, 95))},
)


def _build(query: Query) -> None:
    query.agg(n=dp.count()).build(SCHEMA)


@pytest.mark.parametrize(
    "query",
    [
        Query("d").filter("age", ">", 3),  # an ordering on a keyed integer column compares with the bounds only
        Query("d").filter("age", "<=", 120),
        Query("d").filter("hours", ">=", -1),  # true of every value: allowed
        Query("d").filter("hours", "!=", 99),  # true of every value: allowed
        Query("d").filter("free", "==", "anything"),  # no declared keys: nothing to compare with
        Query("d").filter("hours", "in", [1, 200]),  # a bounded column without keys: one literal can match
        Query("d").group_by("region", keys=["south"]),
    ],
)
def test_what_the_declarations_allow_builds(query: Query) -> None:
    _build(query)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (Query("d").filter("age", "==", 3), "not a declared key of 'age'"),  # integer keys: 3 is not one of them
        (Query("d").filter("age", "in", [130, 140]), "not a declared key"),
        (Query("d").filter("age", "in", [18, 200]), "did you mean 94"),  # every literal of a keyed column counts
        (Query("d").filter("hours", ">", 24), "empty by declaration"),
        (Query("d").filter("hours", "<", 0), "empty by declaration"),
        (Query("d").filter("hours", "==", 24.5), "empty by declaration"),
        (Query("d").group_by("age", keys=[17, 18]), "did you mean 18"),
    ],
)
def test_what_the_declarations_rule_out_is_refused(query: Query, message: str) -> None:
    with pytest.raises(dp.UsageError, match=message):
        _build(query)


def test_a_bounds_override_holding_the_declared_ones_and_more_is_refused() -> None:
    Query("d").agg(m=dp.mean("hours", bounds=(2, 20))).build(SCHEMA)  # narrower: the analyst's choice
    Query("d").agg(m=dp.mean("hours", bounds=(-1, 20))).build(SCHEMA)  # shifted
    Query("d").agg(m=dp.mean("hours", bounds=(0, 24))).build(SCHEMA)  # the declared ones, spelled out
    with pytest.raises(dp.InvalidBounds, match="reach beyond"):
        Query("d").agg(m=dp.mean("hours", bounds=(-1, 24))).build(SCHEMA)
