"""The release spec both front ends read: ``dpsense release SPEC.yaml`` and ``POST /v1/releases``.

One model, one rule set: the CLI's ``ReleaseSpec`` (``dpsense.cli._spec``) adds the fields of a file
on the analyst's own machine (``source``, ``request_id``, ``engine``, ``spark_*``) and the service's
``ReleaseBody`` (``dpsense.service._spec``) adds ``family`` and refuses the CLI's own fields with
their fix. A release spec::

    {"dataset": "health_events", "snapshot": "v1", "epsilon": 0.5, "delta": 0,
     "filters": [{"column": "age", "op": ">=", "value": 18}],
     "group_by": {"column": "region", "keys": ["north", "south"]}, "max_groups_per_unit": 1,
     # or {"columns": ["region", "diagnosis"], "keys": [["north", "flu"], ["south", "cold"]]}
     "aggregates": {"people": {"kind": "count_units"},
                    "mean_hours": {"kind": "mean", "column": "hours", "bounds": [0, 24]}}}

A census table is an aggregate of its own: ``{"kind": "hierarchical_count", "hierarchy": "geo",
"split": [1, 1, 2]}`` (a hierarchy the steward declared; one weight per level, the total first).

Fields are judged here before anything is opened or charged: an unknown field (answered with the
closest valid name), a field the aggregate kind does not use or one it needs, text no ledger can store
(NUL, unpaired surrogates), a name longer than ``MAX_NAME``, a list or mapping over its limit, a number
outside the size rule of ``dpsense.query._values``. Every refusal raised here is a pydantic error whose
``ctx`` carries the ``fix`` (in field names, which are the same words as YAML keys and JSON fields);
each front end words the rest for its interface. Values the query layer judges (bounds, ``q``, an
unknown filter operator) are a ``UsageError`` prefixed with the field (``query``); what needs the
dataset's schema or the privacy rules is judged by the Session before it charges.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from dpsense.core.errors import UsageError
from dpsense.query import Aggregate, AggregateKind, Query
from dpsense.query._aggregates import MAX_QUANTILES
from dpsense.query._fields import build_query
from dpsense.query._values import NUMBER_RULE, number_problem
from dpsense.statistics import AGGREGATE_FIELDS, aggregate_from_fields

#: The longest name (dataset, snapshot, column, mechanism, aggregate, family).
MAX_NAME = 200
#: The most filters and the most aggregates of one release.
MAX_STEPS = 64
#: The most public keys one group-by or histogram lists.
MAX_KEYS = 10_000
#: The most columns one aggregate names.
MAX_COLUMNS = 8
#: Per kind: (fields it accepts, fields it requires).
FIELDS = AGGREGATE_FIELDS
T = TypeVar("T")
_NUMBER_FIX = "write a number such as 0.5, 30 or '1e-8'"


def closest(value: str, choices: Iterable[str]) -> str:
    """``"did you mean 'x'?"`` for the closest choice (difflib), else the list of choices."""
    options = sorted(choices)
    match = difflib.get_close_matches(value, options, n=1, cutoff=0.6)
    listed = ", ".join(options)
    if match:
        return f"did you mean {match[0]!r}? (valid: {listed})"
    return f"use one of: {listed}"


def _shown(value: object) -> object:
    """A caller's value as an error may repeat it: text that is not UTF-8 (a lone surrogate) escaped."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(value, str) else value


def unknown_choice(what: str, value: object, choices: Sequence[str]) -> PydanticCustomError:
    """The error for a value outside ``choices`` (an aggregate kind, an engine, a policy)."""
    return PydanticCustomError(
        "unknown_choice",
        "unknown {what}",
        {"what": what, "value": _shown(str(value)), "fix": closest(str(value), choices), "input": _shown(value)},
    )


class StrictModel(BaseModel):
    """A frozen model that refuses unknown fields, naming the closest valid one.

    ``REFUSED`` names fields a subclass refuses on purpose (another front end's), each with its fix.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    REFUSED: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            known = set(cls.model_fields)
            for key in data:
                if key in cls.REFUSED:
                    raise PydanticCustomError(
                        "field_not_taken", "'{field}' is not taken here", {"field": key, "fix": cls.REFUSED[key]}
                    )
                if key not in known:
                    raise PydanticCustomError(
                        "unknown_field",
                        "unknown field",
                        {"field": _shown(str(key)), "fix": closest(str(key), known), "input": _shown(key)},
                    )
        return data


def _storable(value: str) -> str:
    """Refuse text no ledger can store: NUL characters and unpaired surrogates (not UTF-8)."""
    if "\x00" in value:
        raise PydanticCustomError(
            "not_storable", "text may not contain NUL characters", {"fix": "remove the NUL characters"}
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise PydanticCustomError(
            "not_storable",
            "text must be valid Unicode (no unpaired surrogates)",
            {"fix": "write the text as valid UTF-8"},
        ) from None
    return value


def bounded(value: T) -> T:
    """Refuse a number outside the size rule (``dpsense.query._values.NUMBER_RULE``): NaN, 1e400, 5000 digits."""
    problem = number_problem(value)
    if problem is not None:
        raise PydanticCustomError(
            "number_too_large", "{rule}", {"rule": NUMBER_RULE, "fix": _NUMBER_FIX, "input": problem}
        )
    return value


def _number(value: object) -> int | float | str:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise PydanticCustomError("not_a_number", "must be a number", {"fix": _NUMBER_FIX, "input": value})
    if isinstance(value, str):
        _storable(value)
    return bounded(value)


def _scalar(value: object) -> bool | int | float | str:
    if not isinstance(value, bool | int | float | str):
        raise PydanticCustomError(
            "not_a_literal", "must be a plain value", {"fix": "write a string, number or true/false", "input": value}
        )
    if isinstance(value, str):
        return _storable(value)
    return value if isinstance(value, bool) else bounded(value)


#: Text a request may carry into the ledger (checked by ``_storable``).
Text = Annotated[StrictStr, AfterValidator(_storable)]
#: A name (dataset, snapshot, column, mechanism, aggregate, family).
Name = Annotated[Text, Field(min_length=1, max_length=MAX_NAME)]
#: A number as written: an integer, a decimal, or a decimal string such as "1e-8" (YAML reads ``1e-8``
#: as a string), within the size rule; dpsense reads it exactly through its decimal spelling.
Number = Annotated[int | float | str, PlainValidator(_number, json_schema_input_type=int | float | str)]
#: A public literal (a filter value, a key); a number keeps the size rule, text must be storable.
Scalar = Annotated[bool | int | float | str, PlainValidator(_scalar, json_schema_input_type=bool | int | float | str)]


class AggregateSpec(StrictModel):
    """One named statistic: ``kind`` and the fields that kind uses (a field it does not use is refused)."""

    kind: AggregateKind
    column: Name | None = None
    columns: list[Name] | None = Field(default=None, max_length=MAX_COLUMNS)
    q: Number | None = None
    qs: list[Number] | None = Field(default=None, max_length=MAX_QUANTILES)
    trim_fraction: Number | None = None
    bounds: tuple[Number, Number] | None = None
    max_rows_per_unit: StrictInt | None = None
    mechanism: Name | None = None
    keys: list[Scalar] | None = Field(default=None, max_length=MAX_KEYS)
    proposed_bound: Number | None = None
    hierarchy: Name | None = None
    split: list[Number] | None = Field(default=None, max_length=MAX_COLUMNS + 1)

    @field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, value: Any) -> Any:
        names = [k.value for k in AggregateKind]
        if not isinstance(value, str) or value not in names:
            raise unknown_choice("aggregate kind", value, names)
        return value

    @model_validator(mode="after")
    def _fields_fit_the_kind(self) -> AggregateSpec:
        allowed, required = FIELDS[self.kind]
        kind = self.kind.value
        given = {name for name in type(self).model_fields if getattr(self, name) is not None}
        for name in sorted(given - allowed):
            fix = f"remove '{name}' ({kind} takes {', '.join(sorted(allowed))})"
            raise PydanticCustomError(
                "field_not_used",
                "{kind} does not use '{field}'",
                {"kind": kind, "field": name, "fix": fix, "input": getattr(self, name)},
            )
        for name in sorted(required - given):
            raise PydanticCustomError(
                "field_needed",
                "{kind} needs '{field}'",
                {"kind": kind, "field": name, "fix": f"add '{name}' to this aggregate", "input": sorted(given)},
            )
        return self

    def aggregate(self) -> Aggregate:
        """The query-layer aggregate (its constructor checks values such as bounds and q)."""
        return aggregate_from_fields(self.kind, {name: getattr(self, name) for name in type(self).model_fields})


class FilterSpec(StrictModel):
    """Keep rows where ``column op value`` holds (``op``: ==, !=, <, <=, >, >=, in)."""

    column: Name
    op: Annotated[Text, Field(min_length=1, max_length=8)]
    value: Scalar | list[Scalar]


class GroupBySpec(StrictModel):
    """Group by one column (``column``) or several (``columns``); ``keys`` default to the declared ones.

    One column: ``keys`` lists its values. Several: the groups are their value combinations; ``keys``,
    if given, lists the combinations that exist, each a list of values in the order of ``columns``
    (a key set); without it the keys are the cross product of each column's declared keys. A list of
    ``{column, keys}`` objects groups by each with its own keys (their cross product).
    """

    column: Name | None = None
    columns: list[Name] | None = Field(default=None, min_length=2, max_length=MAX_COLUMNS)
    keys: list[Scalar | Annotated[list[Scalar], Field(max_length=MAX_COLUMNS)]] | None = Field(
        default=None, max_length=MAX_KEYS
    )

    @model_validator(mode="after")
    def _one_grouping(self) -> GroupBySpec:
        if (self.column is None) == (self.columns is None):
            raise PydanticCustomError(
                "one_grouping",
                "a group_by names 'column' (one) or 'columns' (several), not both or neither",
                {"fix": "write column: region, or columns: [region, diagnosis]", "input": self.columns or self.column},
            )
        several = self.columns is not None
        for key in self.keys or ():
            if isinstance(key, list) != several:
                fix = (
                    "list each key as a list of values in the order of 'columns', e.g. [[north, flu]]"
                    if several
                    else "list the column's values, e.g. [north, south]"
                )
                raise PydanticCustomError(
                    "key_shape",
                    "a key of 'columns' is a list of values, a key of 'column' one value",
                    {"fix": fix, "input": key},
                )
        return self


class ReleaseSpec(StrictModel):
    """A release: the dataset, the privacy loss to spend, and what to compute (the module docstring)."""

    #: How a refusal of the query layer names the document (``"release request"`` in the service).
    WHAT: ClassVar[str] = "release spec"

    dataset: Name
    snapshot: Name | None = None
    epsilon: Number
    delta: Number = 0
    public_n: StrictInt | None = None
    filters: tuple[FilterSpec, ...] = Field(default=(), max_length=MAX_STEPS)
    group_by: GroupBySpec | list[GroupBySpec] | None = Field(default=None, union_mode="left_to_right")
    max_groups_per_unit: StrictInt | None = None
    aggregates: dict[Name, AggregateSpec] = Field(max_length=MAX_STEPS, json_schema_extra={"minProperties": 1})

    @field_validator("aggregates")
    @classmethod
    def _some_aggregates(cls, value: dict[str, AggregateSpec]) -> dict[str, AggregateSpec]:
        if not value:
            raise PydanticCustomError(
                "no_aggregates",
                "a release needs one aggregate or more",
                {"fix": 'add one, such as "n": {"kind": "count"}', "input": value},
            )
        return value

    def query(self) -> Query:
        """The query this spec asks for; a value the query layer refuses names its field."""
        return build_query(self, self._field)

    @contextmanager
    def _field(self, name: str) -> Iterator[None]:
        """Prefix a query-layer refusal with the field it came from."""
        try:
            yield
        except UsageError as exc:
            raise UsageError(f"{self.WHAT} {name}: {exc.rule}", exc.value, exc.fix) from None
