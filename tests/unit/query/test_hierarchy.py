"""A declared hierarchy (``query._hierarchy``) and the hierarchical count it lets a query build (``Query.build``).

Every refusal names the rule and the fix, and is decided from the declarations alone.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from dpsense.core.errors import UnsupportedRequest, UsageError
from dpsense.query import AggregateKind, Query, Schema, count, hierarchical_count, plan
from dpsense.query._hierarchy import declare_hierarchy
from dpsense.query._schema import Hierarchy
from dpsense.statistics import STATISTICS

LEAVES = [("north", "n1"), ("north", "n2"), ("south", "s1")]
BASE = Schema(
    {"pid": "unit", "region": "categorical", "district": "categorical", "age": "integer", "hours": "numeric"},
    keys={"region": ["north", "south"]},
    bounds={"hours": (0, 24), "age": (0, 120)},
)


def _schema(**hierarchies: Hierarchy) -> Schema:
    return Schema(
        {c.name: c.kind for c in BASE.columns},
        keys={"region": ["north", "south"]},
        bounds={"hours": (0, 24), "age": (0, 120)},
        hierarchies=hierarchies,
    )


GEO = declare_hierarchy("geo", {"levels": ["region", "district"], "keys": LEAVES}, BASE)
SCHEMA = _schema(geo=GEO)


def test_a_declaration_is_sorted_deduplicated_and_round_trips() -> None:
    h = declare_hierarchy("geo", {"levels": ["region", "district"], "keys": [*reversed(LEAVES), LEAVES[0]]}, BASE)
    assert h == GEO and h.levels == ("region", "district") and h.leaves == tuple(LEAVES)
    assert Hierarchy.from_json(h.to_json()) == h
    ages = declare_hierarchy("ages", {"levels": ["age"], "keys": [[30], ["40"]]}, BASE)
    assert ages.leaves == ((Fraction(30),), (Fraction(40),))
    assert Hierarchy.from_json(ages.to_json()) == ages


@pytest.mark.parametrize(
    ("declared", "rule", "fix"),
    [
        ({"levels": ["region", "town"], "keys": LEAVES}, "does not declare", "use one of"),
        ({"levels": ["region", "hours"], "keys": LEAVES}, "categorical or integer", "categorical"),
        ({"levels": ["region", "region"], "keys": LEAVES}, "distinct", "once"),
        ({"levels": ["region", "district"], "keys": [("norht", "n1")]}, "not a declared key", "did you mean 'north'"),
        ({"levels": ["region", "district"], "keys": [("north", "x"), ("south", "x")]}, "two parents", "its own value"),
        ({"levels": ["region", "district"], "keys": [("north",)]}, "one per level", "keys=["),
        ({"levels": ["region", "district"], "keys": []}, "at least one leaf", "levels"),
        ({"levels": ["region"]}, "declares its levels and its leaf keys", "levels"),
        ({"levels": "region", "keys": LEAVES}, "list of columns", "levels"),
    ],
)
def test_a_bad_declaration_is_refused_naming_the_rule_and_the_fix(declared: object, rule: str, fix: str) -> None:
    with pytest.raises(UsageError, match=rule) as info:
        declare_hierarchy("geo", declared, BASE)
    assert fix in info.value.fix


def test_a_level_named_level_is_refused() -> None:
    schema = Schema({"pid": "unit", "level": "categorical"})
    with pytest.raises(UsageError, match="may not be named 'level'"):
        declare_hierarchy("h", {"levels": ["level"], "keys": [["a"]]}, schema)


def test_the_query_groups_by_the_leaf_key_set_with_the_split_normalised() -> None:
    ir = Query("e").agg(people=hierarchical_count("geo", split=[1, 1, 2])).build(SCHEMA)
    assert ir.group_columns == ("district", "region")  # the IR's order; the key set follows it
    assert ir.key_set == (("n1", "north"), ("n2", "north"), ("s1", "south"))
    (agg,) = ir.aggregates
    assert agg.kind is AggregateKind.HIERARCHICAL_COUNT and agg.columns == ("region", "district")
    assert agg.split == (Fraction(1, 4), Fraction(1, 4), Fraction(1, 2))
    equal = Query("e").agg(n=hierarchical_count("geo")).build(SCHEMA).aggregates[0]
    assert equal.split == (Fraction(1, 3),) * 3
    same = Query("e").agg(people=hierarchical_count("geo", split=[2, 2, 4])).build(SCHEMA)
    assert same.fingerprint() == ir.fingerprint()  # the same shares: the same question


def test_a_one_level_hierarchy_groups_by_its_column() -> None:
    schema = _schema(r=declare_hierarchy("r", {"levels": ["region"], "keys": [["south"], ["north"]]}, BASE))
    ir = Query("e").agg(n=hierarchical_count("r")).build(schema)
    assert ir.group_columns == ("region",) and ir.group_keys == ("north", "south") and ir.key_set is None


@pytest.mark.parametrize(
    ("query", "error", "rule"),
    [
        (Query("e").agg(n=hierarchical_count("geography")), UsageError, "does not declare"),
        (Query("e").agg(n=hierarchical_count("geo", split=[1, 1])), UsageError, "one weight per level"),
        (Query("e").group_by("region").agg(n=hierarchical_count("geo")), UnsupportedRequest, "on its own"),
        (Query("e").agg(n=hierarchical_count("geo"), m=count()), UnsupportedRequest, "on its own"),
        (Query("e").agg(level=hierarchical_count("geo")), UsageError, "column 'level'"),
    ],
)
def test_a_hierarchical_count_is_refused_before_any_plan(query: Query, error: type[Exception], rule: str) -> None:
    with pytest.raises(error, match=rule):
        query.build(SCHEMA)


@pytest.mark.parametrize("split", [[0, 1, 1], [-1, 1, 1], [], "1,1,1"])
def test_split_weights_are_positive(split: object) -> None:
    with pytest.raises(UsageError, match="split"):
        hierarchical_count("geo", split=split)  # type: ignore[arg-type]


@pytest.mark.parametrize(("adjacency", "l1"), [("add_remove", 3), ("replace", 6)])
def test_one_step_at_the_leaf_sensitivity_with_the_split_explained(adjacency: str, l1: int) -> None:
    ir = Query("e").agg(people=hierarchical_count("geo", split=[1, 1, 2])).build(SCHEMA)
    p = plan(ir, epsilon=1, adjacency=adjacency, max_rows_per_unit=3, rules=STATISTICS)
    (step,) = p.steps
    assert step.sensitivity == l1 and step.loss.epsilon == 1
    assert "total 1/4, region 1/4, district 1/2" in p.explain()
    levels = STATISTICS[AggregateKind.HIERARCHICAL_COUNT].noise_steps(ir.aggregates[0], step)
    assert [s.loss.epsilon for s in levels] == [Fraction(1, 4), Fraction(1, 4), Fraction(1, 2)]
    assert all(s.sensitivity == l1 for s in levels)
