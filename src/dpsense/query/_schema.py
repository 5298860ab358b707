"""The public description of a dataset that queries are checked against.

A dataset registration provides it: each column's kind, the declared public bounds of numeric columns
and the declared public keys of categorical ones. Nothing here is read from the data; bounds and keys
are facts the data steward states (choosing them from the data would itself be a release).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from fractions import Fraction

from dpsense.core.errors import InvalidBounds, UsageError
from dpsense.core.steps import STEP_RULE, DecimalStep, check_step
from dpsense.query._values import PublicValue, Value, exact, normalise_set, tagged

Bounds = tuple[Fraction, Fraction]


class ColumnKind(str, Enum):
    """What a column holds, which decides the statistics it supports."""

    NUMERIC = "numeric"
    INTEGER = "integer"
    CATEGORICAL = "categorical"
    UNIT = "unit"
    POINT = "point"
    EDGE = "edge"

    @classmethod
    def parse(cls, value: ColumnKind | str, *, column: str) -> ColumnKind:
        """Accept a kind or its name, refusing anything else with the list of choices."""
        if isinstance(value, ColumnKind):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            choices = ", ".join(k.value for k in cls)
            raise UsageError(f"column {column!r} has an unknown kind", value, f"use one of: {choices}") from None

    @property
    def is_numeric(self) -> bool:
        """True for kinds that sums, means and quantiles accept."""
        return self in (ColumnKind.NUMERIC, ColumnKind.INTEGER)


#: Kinds whose declared bounds make sense (coordinates of points are bounded too).
BOUNDED_KINDS = frozenset({ColumnKind.NUMERIC, ColumnKind.INTEGER, ColumnKind.POINT})


def check_bounds(bounds: object, *, what: str) -> Bounds:
    """A ``(L, U)`` pair as exact fractions with ``L <= U``, or ``InvalidBounds``."""
    if isinstance(bounds, (str, bytes)) or not isinstance(bounds, Iterable):
        raise InvalidBounds(f"{what} must be a pair (L, U)", bounds, "pass bounds=(lower, upper)")
    pair = tuple(bounds)
    if len(pair) != 2:
        raise InvalidBounds(f"{what} must be a pair (L, U)", pair, "pass bounds=(lower, upper)")
    lower = exact(pair[0], what=f"lower {what}", error=InvalidBounds)
    upper = exact(pair[1], what=f"upper {what}", error=InvalidBounds)
    if lower > upper:
        raise InvalidBounds(f"{what} are reversed: L must be <= U", pair, f"swap them: ({pair[1]!r}, {pair[0]!r})")
    return (lower, upper)


TYPICAL_KINDS = "a typical range belongs to a numeric or integer column"
STEP_KINDS = "a recording step belongs to a numeric or integer column"


def declared_step(column: str, kind: ColumnKind, declared: object) -> DecimalStep:
    """A column's declared recording step (``core.steps``): numeric and integer columns; whole for integers."""
    if not kind.is_numeric:
        raise UsageError(STEP_KINDS, column, "drop the step, or declare the column's kind numeric")
    if isinstance(declared, DecimalStep):
        return declared
    if not isinstance(declared, int | float | str | Fraction | Decimal) or isinstance(declared, bool):
        raise UsageError(f"step of {column!r}: {STEP_RULE}", declared, "declare e.g. 0.01")
    return check_step(declared, what=f"step of {column!r}", integer=kind is ColumnKind.INTEGER)


def check_typical(column: str, declared: object, bounds: Bounds | None) -> Bounds:
    """A declared typical range ``(a, b)``: a < b, inside the column's declared bounds."""
    what = f"typical range of {column!r}"
    low, high = check_bounds(declared, what=what)
    if bounds is None:
        raise InvalidBounds(
            f"a {what} needs the column's declared bounds", column, f"declare bounds for {column!r} as well"
        )
    if not low < high:
        raise InvalidBounds(f"a {what} must be an interval a < b", declared, "widen it, e.g. (a, 2 * a)")
    if low < bounds[0] or high > bounds[1]:
        raise InvalidBounds(
            f"the {what} must lie inside its declared bounds [{bounds[0]}, {bounds[1]}]",
            declared,
            "narrow it to the bounds: it says where most values are, the bounds where all are",
        )
    return (low, high)


#: The most leaves a declared hierarchy holds (each is a noisy count of a census table).
MAX_LEAVES = 1_000_000


@dataclass(frozen=True)
class Hierarchy:
    """A public hierarchy of group columns, declared by the steward (``query._hierarchy.declare_hierarchy``).

    ``levels`` are the group columns from the top down (``("region", "district")``; the national total
    sits above them); ``leaves`` the declared leaf key set: one tuple of values per leaf, in the order
    of ``levels``, sorted and distinct, each child under one parent. The tree of every level follows
    from the leaves (a region's districts are the leaves that name it).
    """

    levels: tuple[str, ...]
    leaves: tuple[tuple[Value, ...], ...]

    def to_json(self) -> dict[str, object]:
        """Plain JSON: the levels and the leaves, numbers as exact ``"n/d"`` strings (``tagged``)."""
        return {"levels": list(self.levels), "keys": [[tagged(v) for v in leaf] for leaf in self.leaves]}

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> Hierarchy:
        """The inverse of ``to_json`` (a stored, already validated declaration)."""
        levels = doc["levels"]
        keys = doc["keys"]
        if not isinstance(levels, list) or not isinstance(keys, list):
            raise UsageError("a stored hierarchy has levels and keys", doc, "register the dataset again")
        return cls(tuple(str(c) for c in levels), tuple(tuple(_untagged(v) for v in leaf) for leaf in keys))


def _untagged(item: object) -> Value:
    """The value of its ``tagged`` JSON form (``["s", "north"]``, ``["n", "1/10"]``, ``["b", true]``)."""
    if not isinstance(item, list | tuple) or len(item) != 2:
        raise UsageError("a stored hierarchy key is a tagged value", item, "register the dataset again")
    tag, text = item
    if tag == "b":
        return bool(text)
    if tag == "n":
        return Fraction(str(text))
    return str(text)


@dataclass(frozen=True)
class Column:
    """One column: its name, kind, declared public bounds (numeric) or public keys (categorical).

    ``typical`` is the steward's declared typical range of a bounded numeric column: a public hint
    where most values lie, inside the bounds, not a bound (no value is refused or clipped by it). The
    planner reads it to choose the adaptive clip for a mean or sum over a domain much wider than it
    (``dpsense.statistics._adaptive``). ``step`` is the declared recording step of a numeric or integer
    column (``dpsense.core.steps``): its quantiles choose among the multiples of it.
    """

    name: str
    kind: ColumnKind
    bounds: Bounds | None = None
    keys: tuple[Value, ...] | None = None
    typical: Bounds | None = None
    step: DecimalStep | None = None


class Schema:
    """Column name -> kind, with declared public bounds and keys; immutable and hashable.

    Example::

        Schema({"person_id": "unit", "hours": "numeric", "region": "categorical"},
               bounds={"hours": (0, 24)}, keys={"region": ["north", "south"]})

    ``typical`` declares a column's typical range (within its bounds; see ``Column``), ``steps`` its
    recording step (a decimal such as ``"0.01"``, numeric and integer columns); ``hierarchies``
    the public hierarchies of group columns by name (validated by ``query._hierarchy.declare_hierarchy``
    at registration; here their levels must be group columns of the schema).
    """

    __slots__ = ("_columns", "_hierarchies", "_unit")

    def __init__(
        self,
        columns: Mapping[str, ColumnKind | str],
        *,
        bounds: Mapping[str, tuple[PublicValue, PublicValue]] | None = None,
        keys: Mapping[str, Iterable[PublicValue]] | None = None,
        typical: Mapping[str, tuple[PublicValue, PublicValue]] | None = None,
        hierarchies: Mapping[str, Hierarchy] | None = None,
        steps: Mapping[str, PublicValue | DecimalStep] | None = None,
    ) -> None:
        kinds = {self._name(n): ColumnKind.parse(k, column=n) for n, k in columns.items()}
        if not kinds:
            raise UsageError("a schema needs at least one column", {}, "declare the dataset's columns and kinds")
        declared_bounds = {n: check_bounds(b, what=f"bounds of {n!r}") for n, b in (bounds or {}).items()}
        declared_keys = {}
        for name, values in (keys or {}).items():
            kind = self._known(kinds, name, "keys")
            if kind not in (ColumnKind.CATEGORICAL, ColumnKind.INTEGER, ColumnKind.EDGE):
                raise UsageError(
                    "public keys belong to categorical, integer or edge columns (an edge column's keys are the "
                    "public vertex set)",
                    name,
                    "drop these keys",
                )
            numeric = kind.is_numeric or (kind is ColumnKind.EDGE and _all_numbers(values))
            declared_keys[name] = normalise_set(values, numeric=numeric, what=f"keys of {name!r}")
        for name in declared_bounds:
            if self._known(kinds, name, "bounds") not in BOUNDED_KINDS:
                raise UsageError("bounds belong to numeric, integer or point columns", name, "drop these bounds")
        for name in typical or {}:
            if not self._known(kinds, name, "typical ranges").is_numeric:
                raise UsageError(TYPICAL_KINDS, name, "drop it, or declare the column's kind numeric")
        declared_typical = {n: check_typical(n, r, declared_bounds.get(n)) for n, r in (typical or {}).items()}
        declared_steps = {
            n: declared_step(n, self._known(kinds, n, "steps"), value) for n, value in (steps or {}).items()
        }
        units = sorted(n for n, k in kinds.items() if k is ColumnKind.UNIT)
        if len(units) > 1:
            raise UsageError("a schema has at most one privacy-unit column", units, "keep one column of kind 'unit'")
        self._unit = units[0] if units else None
        self._columns = {
            n: Column(
                n, k, declared_bounds.get(n), declared_keys.get(n), declared_typical.get(n), declared_steps.get(n)
            )
            for n, k in sorted(kinds.items())
        }
        for name, hierarchy in (hierarchies or {}).items():
            for level in hierarchy.levels:
                if self._known(kinds, level, f"hierarchy {name!r}") not in (ColumnKind.CATEGORICAL, ColumnKind.INTEGER):
                    raise UsageError(
                        f"the levels of hierarchy {name!r} are categorical or integer columns", level, "drop it"
                    )
        self._hierarchies = dict(sorted((hierarchies or {}).items()))

    @staticmethod
    def _name(name: object) -> str:
        if not isinstance(name, str) or not name:
            raise UsageError("column names must be non-empty strings", name, "name every column")
        return name

    @staticmethod
    def _known(kinds: Mapping[str, ColumnKind], name: str, what: str) -> ColumnKind:
        if name not in kinds:
            raise UsageError(f"{what} name a column the schema does not declare", name, "declare the column first")
        return kinds[name]

    @property
    def columns(self) -> tuple[Column, ...]:
        """Every column, sorted by name."""
        return tuple(self._columns.values())

    @property
    def unit_column(self) -> str | None:
        """The privacy-unit column, or ``None`` when each row is its own unit."""
        return self._unit

    def column(self, name: str) -> Column:
        """The named column, or a UsageError listing the known ones."""
        try:
            return self._columns[name]
        except (KeyError, TypeError):
            known = ", ".join(self._columns)
            raise UsageError(
                "the query names a column the schema does not declare", name, f"use one of: {known}"
            ) from None

    @property
    def hierarchies(self) -> dict[str, Hierarchy]:
        """The declared hierarchies by name (a copy)."""
        return dict(self._hierarchies)

    def hierarchy(self, name: str) -> Hierarchy:
        """The named hierarchy, or a UsageError listing the declared ones."""
        found = self._hierarchies.get(name) if isinstance(name, str) else None
        if found is None:
            known = ", ".join(self._hierarchies) or "none is declared"
            raise UsageError(
                "the query names a hierarchy the dataset does not declare",
                name,
                f"use one of: {known} (the steward declares hierarchies at registration: hierarchies={{...}})",
            )
        return found

    def __contains__(self, name: object) -> bool:
        return name in self._columns

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and self.columns == other.columns and self._hierarchies == other._hierarchies

    def __hash__(self) -> int:
        return hash((self.columns, tuple(self._hierarchies.items())))

    def __repr__(self) -> str:
        return f"Schema({', '.join(f'{c.name}:{c.kind.value}' for c in self.columns)})"


def _all_numbers(values: object) -> bool:
    """True when ``values`` is a list of numbers (vertex ids of an edge column may be numbers or strings)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        return False
    items = list(values)
    return bool(items) and all(isinstance(v, int | float | Fraction) and not isinstance(v, bool) for v in items)
