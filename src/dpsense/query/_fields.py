"""The query a declarative request describes (a YAML spec, an HTTP JSON body).

Each statistic's own fields are its module's (``dpsense.statistics``: ``fields`` and ``from_fields``);
this module builds the query around them: dataset, filters, grouping and the named aggregates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

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
    def column(self) -> str: ...
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
    def group_by(self) -> _GroupBy | None: ...
    @property
    def max_groups_per_unit(self) -> int | None: ...
    @property
    def aggregates(self) -> Mapping[str, _Statistic]: ...


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
    if request.group_by is not None:
        with field("group_by"):
            query = query.group_by(request.group_by.column, keys=request.group_by.keys)
    if request.max_groups_per_unit is not None:
        with field("max_groups_per_unit"):
            query = query.max_groups_per_unit(request.max_groups_per_unit)
    for name, spec in request.aggregates.items():
        with field(f"aggregates.{name}"):
            query = query.agg(**{name: spec.aggregate()})
    return query
