from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest

import dpsense.query as q
from dpsense.core.errors import InvalidBounds, UnsupportedRequest, UsageError
from dpsense.query import AggregateKind, FilterOp, Query, Schema


def test_builder_calls_never_mutate(schema: Schema) -> None:
    base = Query("events")
    filtered = base.filter("age", ">=", 18)
    grouped = filtered.group_by("region", keys=["north"])
    bounded = grouped.max_groups_per_unit(2)
    aggregated = bounded.agg(n=q.count())
    more = aggregated.agg(m=q.mean("hours"))
    chain = [base, filtered, grouped, bounded, aggregated, more]
    assert len({id(x) for x in chain}) == len(chain)
    assert base == Query("events")
    assert grouped != filtered and bounded != grouped and base._filters == ()
    # a shared prefix extended two ways stays independent
    left = filtered.agg(a=q.count()).build(schema)
    right = filtered.agg(b=q.count_units()).build(schema)
    assert [a.name for a in left.aggregates] == ["a"]
    assert [a.name for a in right.aggregates] == ["b"]
    assert [a.name for a in more.build(schema).aggregates] == ["m", "n"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.dataset = "other"  # type: ignore[misc]


def test_build_resolves_public_facts(schema: Schema) -> None:
    ir = (
        Query("events")
        .filter("region", "in", ["north", "south"])
        .group_by("region")
        .group_by("device")
        .agg(
            n=q.count(max_rows_per_unit=30, mechanism="laplace"),
            people=q.count_units(),
            h=q.mean("hours", bounds=(0, 12)),
            a=q.quantile("age", 0.9),
            hist=q.histogram("device"),
            d=q.min_distance(["x", "y"]),
            t=q.triangle_count(("src", "dst")),
            tm=q.trimmed_mean("hours", "0.1"),
        )
        .build(schema)
    )
    by_name = {a.name: a for a in ir.aggregates}
    assert by_name["h"].bounds == ((0, 12),)
    assert by_name["a"].bounds == ((0, 120),) and by_name["a"].q == Fraction(9, 10)
    assert by_name["d"].bounds == ((-1, 1), (-1, 1))
    assert by_name["n"].max_rows_per_unit == 30 and by_name["n"].mechanism == "laplace"
    assert by_name["tm"].trim_fraction == Fraction(1, 10)
    assert by_name["t"].kind is AggregateKind.TRIANGLE_COUNT and by_name["t"].bounds == ()
    assert by_name["hist"].needs_partition_selection
    groups = {g.column: g for g in ir.group_by}
    assert groups["region"].keys == ("east", "north", "south", "west")  # declared public keys
    assert groups["device"].needs_partition_selection  # recorded: private partition selection
    assert ir.needs_partition_selection
    assert ir.filters[0].op is FilterOp.IN


def test_single_value_in_is_equality(schema: Schema) -> None:
    ir = Query("e").filter("region", "in", ["north", "north"]).agg(n=q.count()).build(schema)
    assert ir.filters[0].op is FilterOp.EQ and ir.filters[0].value == "north"


def E(*aggs: q.Aggregate) -> Query:
    return Query("events").agg(**{f"s{i}": a for i, a in enumerate(aggs)})


REFUSALS = [
    (lambda: E(q.mean("nope")), UsageError, "does not declare", "nope"),
    (lambda: E(q.sum("region")), UsageError, "needs a numeric or integer column", "region"),
    (lambda: E(q.mean("person_id")), UsageError, "needs a numeric or integer column", "person_id"),
    (lambda: E(q.median("income")), InvalidBounds, "needs public bounds", "income"),
    (lambda: E(q.mean("hours", bounds=(24, 0))), InvalidBounds, "reversed", "24"),
    (lambda: E(q.mean("hours", bounds=(0, float("nan")))), InvalidBounds, "finite", "nan"),
    (lambda: E(q.quantile("age", 1.5)), UsageError, r"q must lie in \[0, 1\]", "1.5"),
    (lambda: E(q.quantile("age", -0.1)), UsageError, r"q must lie in \[0, 1\]", "-0.1"),
    (lambda: E(q.trimmed_mean("hours", 0.5)), UsageError, "trim_fraction", "0.5"),
    (lambda: E(q.count(max_rows_per_unit=0)), UsageError, "max_rows_per_unit must be an integer >= 1", "0"),
    (lambda: E(q.sum("hours", max_rows_per_unit=True)), UsageError, "max_rows_per_unit", "True"),  # type: ignore[arg-type]
    (lambda: E(q.count(mechanism="")), UsageError, "mechanism", "''"),
    (lambda: E(q.histogram("hours")), UsageError, "categorical or integer column", "hours"),
    (lambda: E(q.min_distance(["x", "hours"])), UsageError, "needs point column", "hours"),
    (lambda: E(q.min_distance([])), UsageError, "at least 1 distinct", "()"),
    (lambda: E(q.triangle_count(["src"])), UsageError, "at least 2", "src"),
    (lambda: E(q.triangle_count(["src", "x"])), UsageError, "needs edge column", "x"),
    (lambda: Query("events").agg(a=q.count()).agg(a=q.count_units()), UsageError, "unique", "'a'"),
    (lambda: Query("events").group_by("region").agg(region=q.count()), UsageError, "unique", "region"),
    (lambda: Query("events"), UsageError, "at least one aggregate", "no agg"),
    (lambda: Query("events").filter("age", "~", 1).agg(n=q.count()), UsageError, "public comparison", "~"),
    (lambda: Query("events").filter("ghost", "==", 1).agg(n=q.count()), UsageError, "does not declare", "ghost"),
    (lambda: Query("events").filter("region", "<", "n").agg(n=q.count()), UsageError, "numbers only", "region"),
    (lambda: Query("events").filter("age", "==", "old").agg(n=q.count()), UsageError, "decimal", "old"),
    (lambda: Query("events").filter("age", "==", [1, 2]).agg(n=q.count()), UsageError, "op='in'", "[1, 2]"),
    (lambda: Query("events").filter("age", "in", 3).agg(n=q.count()), UsageError, "list of values", "3"),
    (lambda: Query("events").filter("age", "in", []).agg(n=q.count()), UsageError, "not be empty", "[]"),
    (lambda: Query("events").filter("x", "==", 1).agg(n=q.count()), UnsupportedRequest, "filters apply", "x"),
    (lambda: Query("events").group_by("hours").agg(n=q.count()), UnsupportedRequest, "group_by needs", "hours"),
    (lambda: Query("events").group_by("region").group_by("region").agg(n=q.count()), UsageError, "once", "region"),
    (lambda: Query("events").group_by("region", keys=[]).agg(n=q.count()), UsageError, "not be empty", "[]"),
    (lambda: Query("events").max_groups_per_unit(0), UsageError, "max_groups_per_unit must be", "0"),
    (lambda: Query("events").max_groups_per_unit(2).agg(n=q.count()), UsageError, "needs a group_by", "2"),
    (lambda: Query("events").agg(n="count"), UsageError, "agg\\(\\) takes aggregates", "n"),  # type: ignore[arg-type]
    (lambda: Query(""), UsageError, "dataset's name", "''"),
]


@pytest.mark.parametrize(("make", "error", "rule", "value"), REFUSALS)
def test_every_refusal_names_rule_value_and_fix(
    schema: Schema, make: object, error: type[UsageError], rule: str, value: str
) -> None:
    with pytest.raises(error, match=rule) as info:
        make().build(schema)  # type: ignore[operator]
    message = str(info.value)
    assert f"(got {info.value.value!r})" in message and value in repr(info.value.value)
    assert "Fix: " in message and info.value.fix


def test_count_units_needs_a_unit_column() -> None:
    row_level = Schema({"hours": "numeric"}, bounds={"hours": (0, 1)})
    with pytest.raises(UnsupportedRequest, match="privacy-unit column"):
        Query("e").agg(n=q.count_units()).build(row_level)
    assert Query("e").agg(n=q.count()).build(row_level).aggregates[0].kind is AggregateKind.COUNT


def test_build_needs_a_schema() -> None:
    with pytest.raises(UsageError, match="Schema"):
        Query("e").agg(n=q.count()).build({"hours": "numeric"})  # type: ignore[arg-type]


def test_public_surface() -> None:
    constructors = {k.value for k in AggregateKind}
    assert constructors <= set(q.__all__)
    assert {"Query", "QueryIR", "Schema", "ColumnKind"} <= set(q.__all__)
    assert all(hasattr(q, name) for name in q.__all__)


@pytest.mark.parametrize(
    ("column", "bounds", "expected"),
    [
        ("age", None, True),  # an integer column on [0, 120]
        ("age", ("0.2", "0.8"), False),  # no integer within the bounds: cells
        ("huge", None, False),  # beyond ±2^53 integers are not all doubles: cells, decided before any charge
        ("hours", None, False),  # a numeric column: cells (and decimal points, chosen at run time)
    ],
)
def test_integer_candidates_are_decided_from_the_declared_kind_and_bounds(
    schema: Schema, column: str, bounds: tuple[object, object] | None, expected: bool
) -> None:
    if column == "huge":  # an integer column declared on [0, 2^60]
        schema = Schema({"person_id": "unit", "huge": "integer"}, bounds={"huge": (0, 2**60)})
    ir = Query("e").agg(m=q.median(column, bounds=bounds)).build(schema)
    assert ir.aggregates[0].integer_candidates is expected
