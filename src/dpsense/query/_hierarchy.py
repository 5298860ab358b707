"""A steward's hierarchy of group columns, checked at registration (before any data is read).

``register_dataset(..., hierarchies={"geo": {"levels": ["region", "district"], "keys": [("north",
"n1"), ("north", "n2"), ("south", "s1")]}})`` declares the public tree of a census table: the levels
from the top down and the leaf key set, one tuple per leaf. The tree follows from the leaves (the
regions are the first values, a region's districts the leaves that name it); the national total sits
above the first level. Each refusal names the rule and the fix:

* the levels are distinct categorical or integer columns of the source (not the privacy unit), and
  none is named ``level`` (the census table's own column);
* every leaf is a tuple of one value per level, each value of its column's kind and, where the column
  declares keys, one of them ("did you mean");
* a value has one parent: a district listed under two regions is refused (name it per region);
* at most ``MAX_LEAVES`` leaves.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from dpsense.core.errors import UsageError
from dpsense.query._schema import MAX_LEAVES, ColumnKind, Hierarchy, Schema
from dpsense.query._typos import check_keys
from dpsense.query._values import Value, normalise, sort_key, tagged

#: The census table's column naming each row's level (a hierarchy level may not take the name).
LEVEL_COLUMN = "level"
_EXAMPLE = '{"levels": ["region", "district"], "keys": [["north", "n1"], ["north", "n2"], ["south", "s1"]]}'


def declare_hierarchy(name: object, declared: object, schema: Schema) -> Hierarchy:
    """The checked hierarchy ``name`` of ``schema`` from its declaration ``{"levels": [...], "keys": [...]}``."""
    if not isinstance(name, str) or not name:
        raise UsageError("a hierarchy's name is a non-empty string", name, "name it, e.g. hierarchies={'geo': ...}")
    if isinstance(declared, Hierarchy):
        declared = {"levels": list(declared.levels), "keys": [list(leaf) for leaf in declared.leaves]}
    if not isinstance(declared, Mapping) or set(declared) != {"levels", "keys"}:
        raise UsageError(f"hierarchy {name!r} declares its levels and its leaf keys", declared, f"pass {_EXAMPLE}")
    levels = _levels(name, declared["levels"], schema)
    return Hierarchy(levels, _leaves(name, declared["keys"], levels, schema))


def _levels(name: str, raw: object, schema: Schema) -> tuple[str, ...]:
    if isinstance(raw, str | bytes) or not isinstance(raw, Iterable):
        raise UsageError(f"the levels of hierarchy {name!r} are a list of columns", raw, f"pass {_EXAMPLE}")
    levels = tuple(raw)
    if not levels or len(set(levels)) != len(levels):
        raise UsageError(f"hierarchy {name!r} lists one or more distinct columns", levels, "list each level once")
    for level in levels:
        if level == LEVEL_COLUMN:
            raise UsageError(
                f"a hierarchy level may not be named {LEVEL_COLUMN!r} (the census table's column of levels)",
                level,
                "register the column under another name",
            )
        column = schema.column(level)
        if column.kind not in (ColumnKind.CATEGORICAL, ColumnKind.INTEGER):
            raise UsageError(
                f"the levels of hierarchy {name!r} are categorical or integer columns, and {level!r} is "
                f"{column.kind.value}",
                level,
                "group by a categorical column",
            )
    return levels


def _leaves(name: str, raw: object, levels: tuple[str, ...], schema: Schema) -> tuple[tuple[Value, ...], ...]:
    if isinstance(raw, str | bytes) or not isinstance(raw, Iterable):
        raise UsageError(f"the keys of hierarchy {name!r} are a list of leaves", raw, f"pass {_EXAMPLE}")
    columns = [schema.column(level) for level in levels]
    leaves: dict[str, tuple[Value, ...]] = {}
    parents: list[dict[str, Value]] = [{} for _ in levels]
    for leaf in raw:
        if isinstance(leaf, str | bytes) or not isinstance(leaf, Iterable) or len(values := tuple(leaf)) != len(levels):
            raise UsageError(
                f"a leaf of hierarchy {name!r} is a tuple of {len(levels)} value(s), one per level {list(levels)}",
                leaf,
                f"pass keys=[{tuple('...' for _ in levels)}, ...]",
            )
        path = tuple(
            normalise(v, numeric=c.kind.is_numeric, what=f"key of {c.name!r}")
            for v, c in zip(values, columns, strict=True)
        )
        for column, value in zip(columns, path, strict=True):
            check_keys(column, (value,), what=f"the key of hierarchy {name!r}")
        for depth in range(1, len(levels)):
            _one_parent(name, levels, depth, path, parents[depth])
        leaves[json.dumps([tagged(v) for v in path])] = path
        if len(leaves) > MAX_LEAVES:
            raise UsageError(
                f"hierarchy {name!r} has more than {MAX_LEAVES:,} leaves", len(leaves), "declare a coarser hierarchy"
            )
    if not leaves:
        raise UsageError(f"hierarchy {name!r} needs at least one leaf", [], f"pass {_EXAMPLE}")
    return tuple(sorted(leaves.values(), key=lambda leaf: [sort_key(v) for v in leaf]))


def _one_parent(
    name: str, levels: tuple[str, ...], depth: int, path: tuple[Value, ...], seen: dict[str, Value]
) -> None:
    """Refuse a value of level ``depth`` listed under two parents (the level above names its parent)."""
    key = json.dumps(tagged(path[depth]))
    parent = seen.setdefault(key, path[depth - 1])
    if tagged(parent) != tagged(path[depth - 1]):
        raise UsageError(
            f"in hierarchy {name!r}, {levels[depth]} {_shown(path[depth])!r} sits under two parents: "
            f"{levels[depth - 1]} {_shown(parent)!r} and {_shown(path[depth - 1])!r} (a child has one parent)",
            [_shown(parent), _shown(path[depth - 1])],
            f"give the {levels[depth]} of each {levels[depth - 1]} its own value (e.g. "
            f"'{_shown(path[depth - 1])}/{_shown(path[depth])}'), or drop the wrong leaf",
        )


def _shown(value: Value) -> object:
    return value if isinstance(value, str | bool) else str(value)
