"""The query a declarative request describes (a YAML spec, an HTTP JSON body).

Each statistic's own fields are its module's (``dpsense.statistics``: ``fields`` and ``from_fields``);
this module builds the query around them: dataset, filters, grouping and the named aggregates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from dpsense.core.errors import UsageError
from dpsense.query._aggregates import Aggregate
from dpsense.query._builder import Query

__all__ = ["DeclarativeRequest", "build_query"]


class _Filter(Protocol):
    @property
    def column(self) -> str: ...
    @property
    def op(self) -> str: ...
    @property
    def value(self) -> Any: ...


class _GroupBy(Protocol):
    @property
    def column(self) -> str | None: ...
    @property
    def columns(self) -> Sequence[str] | None: ...
    @property
    def keys(self) -> Sequence[Any] | None: ...


class _Statistic(Protocol):
    def aggregate(self) -> Aggregate: ...


class DeclarativeRequest(Protocol):
    """What a YAML spec and an HTTP release body both state (their models have these fields)."""

    @property
    def dataset(self) -> str: ...
    @property
    def filters(self) -> Sequence[_Filter]: ...
    @property
    def group_by(self) -> _GroupBy | Sequence[_GroupBy] | None: ...
    @property
    def max_groups_per_unit(self) -> int | None: ...
    @property
    def aggregates(self) -> Mapping[str, _Statistic]: ...


def _grouped(query: Query, grouping: _GroupBy) -> Query:
    """``query`` grouped as one ``group_by`` field says: one column, or several with an optional key set."""
    if grouping.columns is not None:
        keys = None if grouping.keys is None else [tuple(k) for k in grouping.keys]
        return query.group_by(*grouping.columns, keys=keys)
    if grouping.column is None:
        raise UsageError("a group_by names a column", None, "write column: region, or columns: [region, diagnosis]")
    return query.group_by(grouping.column, keys=grouping.keys)


def build_query(request: DeclarativeRequest, field: Callable[[str], AbstractContextManager[None]]) -> Query:
    """The query a declarative request describes, each step inside ``field(name)``.

    ``field`` turns a refusal of the query layer into the front end's error naming the request field
    (``filters[0]``, ``group_by``, ``aggregates.mean_hours``, ...).
    """
    with field("dataset"):
        query = Query(request.dataset)
    for i, f in enumerate(request.filters):
        with field(f"filters[{i}]"):
            query = query.filter(f.column, f.op, f.value)
    given = request.group_by
    groupings: list[tuple[str, _GroupBy]] = []
    if isinstance(given, Sequence):
        groupings = [(f"group_by[{i}]", g) for i, g in enumerate(given)]
    elif given is not None:
        groupings = [("group_by", given)]
    for name, grouping in groupings:
        with field(name):
            query = _grouped(query, grouping)
    if request.max_groups_per_unit is not None:
        with field("max_groups_per_unit"):
            query = query.max_groups_per_unit(request.max_groups_per_unit)
    for name, spec in request.aggregates.items():
        with field(f"aggregates.{name}"):
            query = query.agg(**{name: spec.aggregate()})
    return query
