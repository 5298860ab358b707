"""The release request the service reads (JSON body or YAML document) and the ``Query`` it asks for.

It is the CLI's release spec (``dpsense release SPEC.yaml``, see ``dpsense.cli._spec``) with two
fields left out on purpose:

* ``source``: an analyst never names data. The service reads the snapshot the steward registered.
* ``request_id``: the idempotency key travels in the ``Idempotency-Key`` header of every release.

A CLI spec that carries either is refused with the fix. ``family`` is added (the query family of
the steward's family sub-budgets). The CLI and the service are independent front ends (the import
contract forbids one importing the other), so the two models are kept in step by a test
(``tests/system/service/test_spec_parity.py``) that runs the same documents through both.

Fields are checked here before anything is opened: an unknown field, a field the aggregate kind
does not use, or a missing one is a 422 naming the field. Values the query layer judges (bounds,
``q``, an unknown filter operator) are a 400 naming the rule and the fix; what needs the schema or
the privacy rules is judged by the Session before it charges.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    model_validator,
)

from dpsense.core.errors import UsageError
from dpsense.query import (
    Aggregate,
    AggregateKind,
    Query,
)
from dpsense.query._fields import AGGREGATE_FIELDS, aggregate_from_fields, build_query
from dpsense.query._values import NUMBER_RULE, number_problem


def _storable(value: str) -> str:
    """Refuse text no ledger can store: NUL characters and unpaired surrogates (not UTF-8)."""
    if "\x00" in value:
        raise ValueError("text may not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text must be valid Unicode (no unpaired surrogates)") from None
    return value


def _bounded(value: Any) -> Any:
    """Refuse a number outside the size rule (``dpsense.query._values.NUMBER_RULE``): NaN, 1e400, 5000 digits."""
    problem = number_problem(value)
    if problem is not None:
        raise ValueError(f"{NUMBER_RULE} ({problem})")
    return value


#: Text a request may carry into the ledger (checked by ``_storable``).
Text = Annotated[StrictStr, AfterValidator(_storable)]
#: A number as written: an integer, a decimal, or a decimal string such as "1e-8" (read exactly), within
#: the size rule.
Number = Annotated[StrictInt | StrictFloat | Text, AfterValidator(_bounded)]
#: A public literal (a filter value, a key); a number keeps the size rule (text is judged where it is used).
Scalar = StrictBool | Annotated[StrictInt | StrictFloat, AfterValidator(_bounded)] | Text
#: A name (dataset, column, analyst, snapshot, family).
Name = Annotated[Text, Field(min_length=1, max_length=200)]

#: Per kind: (fields it accepts, fields it requires), shared with the CLI's spec.
FIELDS = AGGREGATE_FIELDS
#: Fields of a CLI spec the service refuses, with the fix.
CLI_ONLY = {
    "source": "remove source: the service reads the snapshot the steward registered",
    "request_id": "remove request_id and send it as the Idempotency-Key header",
}


class Body(BaseModel):
    """A frozen request model that refuses unknown fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class AggregateBody(Body):
    """One named statistic: ``kind`` and the fields that kind uses."""

    kind: AggregateKind
    column: Name | None = None
    columns: list[Name] | None = Field(default=None, max_length=8)
    q: Number | None = None
    trim_fraction: Number | None = None
    bounds: tuple[Number, Number] | None = None
    max_rows_per_unit: StrictInt | None = None
    mechanism: Name | None = None
    keys: list[Scalar] | None = Field(default=None, max_length=10_000)
    proposed_bound: Number | None = None

    @model_validator(mode="after")
    def _fields_fit_the_kind(self) -> AggregateBody:
        allowed, required = FIELDS[self.kind]
        given = {name for name in type(self).model_fields if getattr(self, name) is not None}
        for name in sorted(given - allowed):
            raise ValueError(f"{self.kind.value} does not use '{name}' (it takes {', '.join(sorted(allowed))})")
        for name in sorted(required - given):
            raise ValueError(f"{self.kind.value} needs '{name}'")
        return self

    def aggregate(self) -> Aggregate:
        """The query-layer aggregate (its constructor checks values such as bounds and q)."""
        return aggregate_from_fields(self.kind, {name: getattr(self, name) for name in type(self).model_fields})


class FilterBody(Body):
    """Keep rows where ``column op value`` holds (``op``: ==, !=, <, <=, >, >=, in)."""

    column: Name
    op: Annotated[Text, Field(min_length=1, max_length=8)]
    value: Scalar | list[Scalar]


class GroupByBody(Body):
    """Group by one column; ``keys`` default to the keys declared at registration."""

    column: Name
    keys: list[Scalar] | None = Field(default=None, max_length=10_000)


class ReleaseBody(Body):
    """A release request: the dataset, the privacy loss to spend, and what to compute."""

    dataset: Name
    snapshot: Name | None = None
    epsilon: Number
    delta: Number = 0
    public_n: StrictInt | None = None
    family: Name | None = None
    filters: list[FilterBody] = Field(default_factory=list, max_length=64)
    group_by: GroupByBody | None = None
    max_groups_per_unit: StrictInt | None = None
    aggregates: dict[Name, AggregateBody] = Field(min_length=1, max_length=64)

    @model_validator(mode="before")
    @classmethod
    def _no_cli_only_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, fix in CLI_ONLY.items():
                if name in data:
                    raise ValueError(f"the service does not take '{name}': {fix}")
        return data

    def query(self) -> Query:
        """The query this request asks for; a value the query layer refuses names its field."""
        return build_query(self, _field)


class SqlBody(Body):
    """A SQL question (the DP subset of ``dpsense.query.sql``) and the privacy loss to spend."""

    sql: Annotated[Text, Field(min_length=1, max_length=20_000)]
    epsilon: Number
    delta: Number = 0
    family: Name | None = None


@contextmanager
def _field(name: str) -> Iterator[None]:
    """Prefix a query-layer refusal with the request field it came from."""
    try:
        yield
    except UsageError as exc:
        raise UsageError(f"release request {name}: {exc.rule}", exc.value, exc.fix) from None
