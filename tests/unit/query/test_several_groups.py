"""Grouping by several columns in the query layer: one IR whatever the spelling, keys from public facts only."""

from __future__ import annotations

from itertools import product

import pytest

import dpsense.query as q
from dpsense.core.errors import UsageError
from dpsense.query import Query, Schema
from dpsense.query._builder import MAX_GROUPS

REGIONS = ["east", "north", "south", "west"]


def test_spellings_of_one_grouping_build_one_ir(schema: Schema) -> None:
    one = Query("t").group_by("region", "device", keys=[("north", "a"), ("south", "b")]).agg(n=q.count())
    swapped = Query("t").group_by("device", "region", keys=[("b", "south"), ("a", "north"), ("a", "north")])
    assert one.build(schema) == swapped.agg(n=q.count()).build(schema)
    chained = Query("t").group_by("device").group_by("region").agg(n=q.count()).build(schema)
    assert chained == Query("t").group_by("region", "device").agg(n=q.count()).build(schema)


def test_the_keys_are_a_cross_product_or_the_declared_set_in_the_ir_column_order(schema: Schema) -> None:
    crossed = Query("t").group_by("region").group_by("age", keys=[30, 20]).agg(n=q.count()).build(schema)
    assert crossed.group_columns == ("age", "region")
    assert crossed.group_keys == tuple(product((20, 30), REGIONS))
    assert crossed.public_groups == 8 and crossed.key_set is None
    declared = Query("t").group_by("region", "age", keys=[("west", 20), ("east", 30)]).agg(n=q.count()).build(schema)
    assert declared.group_keys == ((20, "west"), (30, "east"))
    assert declared.public_groups == 2
    # each column's keys are the projection of the set: a filter or a forecast reads them as usual
    assert [g.keys for g in declared.group_by] == [(20, 30), ("east", "west")]
    selected = Query("t").group_by("region", "device").agg(n=q.count()).build(schema)  # device: no keys
    assert selected.group_keys is None and selected.public_groups is None and selected.needs_partition_selection


def test_the_canonical_form_of_a_query_without_a_key_set_is_unchanged(schema: Schema) -> None:
    ir = Query("t").group_by("region").agg(n=q.count()).build(schema)
    assert "key_set" not in ir.canonical()
    declared = Query("t").group_by("region", "age", keys=[("west", 20)]).agg(n=q.count()).build(schema)
    assert '"key_set":[[["n","20/1"],["s","west"]]]' in declared.canonical()


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Query("t").group_by(), "needs a column"),
        (lambda: Query("t").group_by("region", "age", keys=["north"]), "tuple of 2 values"),
        (lambda: Query("t").group_by("region", "age", keys=[("north", 1, 2)]), "tuple of 2 values"),
        (
            lambda: Query("t").group_by("region", "age", keys=[("north", 1)]).group_by("device", "x", keys=[]),
            "one key set",
        ),
    ],
)
def test_malformed_groupings_are_refused_when_written(build: object, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        build()  # type: ignore[operator]


def test_refusals_that_need_the_schema(schema: Schema) -> None:
    with pytest.raises(UsageError, match="did you mean 'north'"):
        Query("t").group_by("region", "age", keys=[("norht", 20)]).agg(n=q.count()).build(schema)
    with pytest.raises(UsageError, match="every group column once"):
        Query("t").group_by("region", "age", keys=[("north", 20)]).group_by("device").agg(n=q.count()).build(schema)
    with pytest.raises(UsageError, match="grouped by once"):
        Query("t").group_by("region").group_by("region").agg(n=q.count()).build(schema)
    wide = Query("t").group_by("age", keys=range(1001)).group_by("region", keys=REGIONS)
    wider = wide.group_by("device", keys=[f"d{i}" for i in range(MAX_GROUPS // 4000 + 1)])
    with pytest.raises(UsageError, match="cross product"):
        wider.agg(n=q.count()).build(schema)
    assert wide.agg(n=q.count()).build(schema).public_groups == 4004
