"""A dataset's public profile: what the steward declares at registration, as JSON and as a query Schema.

Column kinds come from the engine's public schema (types only) unless the steward overrides them;
bounds, keys and per-column data policies are declared, never read from the data. The profile is
stored in the ledger per snapshot version and carried by every release record.

Per-column data policies (applied once, at registration, by the steward):

* ``refuse``: registration fails when the column has a missing (NULL), NaN or infinite value;
  the error names the column and the fix.
* ``drop``: rows where the column is missing, NaN or infinite are removed.
* ``clamp`` (bounded numeric columns only): infinite and out-of-range values are clamped into the
  declared bounds; missing and NaN values stay missing (sums and quantiles leave them out, counts of
  rows still count the row).

The privacy-unit column accepts ``refuse`` (default) or ``drop`` for rows without a unit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from dpsense.core.adjacency import Adjacency
from dpsense.core.checks import integer_in
from dpsense.core.errors import InvalidData, UsageError
from dpsense.core.numbers import ratio_text
from dpsense.core.steps import DecimalStep, check_step
from dpsense.engine import TableInfo
from dpsense.query import AggregateKind, ColumnKind, QueryIR, Schema
from dpsense.query._hierarchy import declare_hierarchy
from dpsense.query._schema import TYPICAL_KINDS, Hierarchy, check_bounds, check_typical, declared_step
from dpsense.query._values import PublicValue, normalise_set

PROFILE_VERSION = 1
POLICIES = ("refuse", "drop", "clamp")
_ENGINE_KINDS = {
    "integer": ColumnKind.INTEGER,
    "float": ColumnKind.NUMERIC,
    "decimal": ColumnKind.NUMERIC,
    "string": ColumnKind.CATEGORICAL,
    "boolean": ColumnKind.CATEGORICAL,
}


@dataclass(frozen=True)
class ColumnProfile:
    """One column's public facts: kind, declared bounds or keys, its data policy and typical range."""

    kind: ColumnKind
    bounds: tuple[Fraction, Fraction] | None = None
    keys: tuple[Any, ...] | None = None
    policy: str = "refuse"
    typical: tuple[Fraction, Fraction] | None = None
    step: DecimalStep | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON; bounds as exact ``"n/d"`` strings, keys as given (strings or integers).

        ``typical`` and ``step`` only when declared, so the profiles stored before them read the same. The
        column is immutable, so its keys are rendered once (a release renders its profile twice, and a
        column may declare thousands of keys); each call returns its own lists.
        """
        keys: list[Any] | None = self.__dict__.get("_keys_json")
        if keys is None and self.keys is not None:
            keys = [_plain(k) for k in self.keys]
            object.__setattr__(self, "_keys_json", keys)
        return {
            "kind": self.kind.value,
            "bounds": None if self.bounds is None else [_q(b) for b in self.bounds],
            "keys": None if keys is None else list(keys),
            "policy": self.policy,
            **({} if self.typical is None else {"typical": [_q(b) for b in self.typical]}),
            **({} if self.step is None else {"step": self.step.text()}),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ColumnProfile:
        """The inverse of ``to_json``."""
        bounds = doc.get("bounds")
        keys = doc.get("keys")
        typical = doc.get("typical")
        step = doc.get("step")
        return cls(
            ColumnKind(doc["kind"]),
            None if bounds is None else (Fraction(bounds[0]), Fraction(bounds[1])),
            None if keys is None else tuple(keys),
            str(doc.get("policy", "refuse")),
            None if typical is None else (Fraction(typical[0]), Fraction(typical[1])),
            None if step is None else check_step(str(step), what="a stored step"),
        )


@dataclass(frozen=True)
class Profile:
    """The public profile of one registered dataset snapshot."""

    unit: str
    adjacency: Adjacency
    columns: dict[str, ColumnProfile]
    max_rows_per_unit: int | None
    unit_policy: str = "refuse"
    policy: dict[str, Any] | None = None
    source: str | None = None
    budget: dict[str, str] = field(default_factory=dict)
    max_groups_per_unit: dict[str, int] = field(default_factory=dict)
    #: Replace adjacency only: the number of privacy units in the snapshot (after the data policies).
    #: Every neighbour under replace has as many, so it is public (recorded at registration, ``units_of``).
    units: int | None = None
    #: The declared hierarchies of group columns by name (census tables; ``query._hierarchy``).
    hierarchies: dict[str, Hierarchy] = field(default_factory=dict)

    def schema(self) -> Schema:
        """The query Schema: column kinds with the declared bounds and keys; the unit column as ``unit``."""
        kinds: dict[str, ColumnKind | str] = {name: c.kind for name, c in self.columns.items()}
        kinds[self.unit] = ColumnKind.UNIT
        bounds = {n: c.bounds for n, c in self.columns.items() if c.bounds is not None}
        keys = {n: c.keys for n, c in self.columns.items() if c.keys is not None}
        typical = {n: c.typical for n, c in self.columns.items() if c.typical is not None}
        steps = {n: c.step for n, c in self.columns.items() if c.step is not None}
        return Schema(kinds, bounds=bounds, keys=keys, typical=typical, hierarchies=self.hierarchies, steps=steps)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (stored in the ledger and in every release record)."""
        return {
            "version": PROFILE_VERSION,
            "unit": self.unit,
            "unit_policy": self.unit_policy,
            "adjacency": self.adjacency.value,
            "columns": {n: c.to_json() for n, c in sorted(self.columns.items())},
            "max_rows_per_unit": self.max_rows_per_unit,
            "policy": self.policy,
            "source": self.source,
            "budget": self.budget,
            "max_groups_per_unit": dict(sorted(self.max_groups_per_unit.items())),
            **({} if self.units is None else {"units": self.units}),
            # only when declared, so that the profiles stored before hierarchies existed read the same
            **(
                {"hierarchies": {n: h.to_json() for n, h in sorted(self.hierarchies.items())}}
                if self.hierarchies
                else {}
            ),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Profile:
        """The inverse of ``to_json``."""
        if doc.get("version") != PROFILE_VERSION:
            raise UsageError("the stored dataset profile has an unknown version", doc.get("version"), "upgrade dpsense")
        return cls(
            unit=str(doc["unit"]),
            adjacency=Adjacency.parse(doc["adjacency"]),
            columns={n: ColumnProfile.from_json(c) for n, c in doc["columns"].items()},
            max_rows_per_unit=doc.get("max_rows_per_unit"),
            unit_policy=str(doc.get("unit_policy", "refuse")),
            policy=doc.get("policy"),
            source=doc.get("source"),
            budget=dict(doc.get("budget") or {}),
            max_groups_per_unit={str(k): int(v) for k, v in (doc.get("max_groups_per_unit") or {}).items()},
            units=None if doc.get("units") is None else int(doc["units"]),
            hierarchies={str(n): Hierarchy.from_json(h) for n, h in (doc.get("hierarchies") or {}).items()},
        )


def public_units(profile: Profile, ir: QueryIR) -> int | None:
    """The public n of the query's means, or None: replace adjacency, one row per unit, no filter, no grouping.

    Under replace adjacency every neighbour holds the registered number of units (``Profile.units``).
    A mean of a column with no missing value (policy ``refuse`` or ``drop``), over the whole snapshot,
    ungrouped, bounded to one row per unit, averages exactly that many values on both neighbours, so
    its n is public and the mean is one step, sum / n, of sensitivity (U - L)/n
    (docs/math/global-sensitivity.md §1.3). Anything else keeps n private: a filter or a group selects a
    data-dependent number of rows, more rows per unit change the count with the unit, a missing value
    leaves its unit out. None as well when the query has no mean (its plan is then unchanged), or when
    one of its means does not qualify (the plan's public n is shared by its means).
    """
    means = [a for a in ir.aggregates if a.kind is AggregateKind.MEAN]
    if profile.adjacency is not Adjacency.REPLACE or profile.units is None or ir.filters or ir.group_by or not means:
        return None
    if any(c.policy == "drop" for c in profile.columns.values()):  # a drop policy makes the count data-dependent
        return None
    for agg in means:
        rows = agg.max_rows_per_unit if agg.max_rows_per_unit is not None else profile.max_rows_per_unit
        column = profile.columns.get(agg.columns[0])
        if rows != 1 or column is None or column.policy == "clamp":
            return None
    return profile.units


def build_profile(
    info: TableInfo,
    *,
    unit: str,
    adjacency: Adjacency,
    bounds: Mapping[str, tuple[PublicValue, PublicValue]],
    keys: Mapping[str, Iterable[PublicValue]],
    kinds: Mapping[str, str],
    policies: Mapping[str, str],
    max_rows_per_unit: int | None,
    max_groups_per_unit: Mapping[str, int] | None = None,
    typical: Mapping[str, tuple[PublicValue, PublicValue]] | None = None,
    hierarchies: Mapping[str, object] | None = None,
    steps: Mapping[str, PublicValue] | None = None,
) -> Profile:
    """The profile of a table from its public schema and the steward's declarations (no data read)."""
    names = info.column_names
    typical, steps = typical or {}, steps or {}
    declared_maps = (
        ("bounds", bounds),
        ("keys", keys),
        ("kinds", kinds),
        ("policies", policies),
        ("typical", typical),
        ("steps", steps),
    )
    for what, declared in declared_maps:
        for name in declared:
            if name not in names:
                raise UsageError(
                    f"{what} name a column the source does not have", name, f"use one of: {', '.join(names)}"
                )
    if unit not in names:
        raise UsageError(
            "the privacy unit must be a column of the source", unit, f"pass privacy_unit= one of: {', '.join(names)}"
        )
    unit_policy = policies.get(unit, "refuse")
    if unit_policy not in ("refuse", "drop"):
        raise UsageError("rows without a privacy unit can only be refused or dropped", unit_policy, "use 'drop'")
    columns: dict[str, ColumnProfile] = {}
    for column in info.columns:
        if column.name == unit:
            continue
        kind = _kind(column.name, column.kind, kinds.get(column.name))
        if kind is None:
            continue  # temporal and other types are not queryable yet; they stay out of the schema
        if column.name in bounds and column.kind == "string" and column.name not in kinds:
            raise InvalidData(
                "bounds are declared for a column the source holds as text: one non-numeric value (such as "
                "'n/a' or '-' in a CSV file) makes the whole column text",
                column.name,
                "write missing values as empty cells (and declare the column's data policy drop or clamp), or "
                "fix the non-numeric values in the file, then register again",
            )
        col_bounds = None
        if column.name in bounds:
            col_bounds = check_bounds(bounds[column.name], what=f"bounds of {column.name!r}")
        col_keys = None
        if column.name in keys:
            col_keys = normalise_set(keys[column.name], numeric=kind.is_numeric, what=f"keys of {column.name!r}")
        policy = policies.get(column.name, "refuse")
        if policy not in POLICIES:
            raise UsageError(f"unknown data policy for {column.name!r}", policy, f"use one of: {', '.join(POLICIES)}")
        if policy == "clamp" and col_bounds is None:
            raise UsageError(
                "the clamp policy needs declared bounds",
                column.name,
                f"declare bounds for {column.name!r} or use 'drop'",
            )
        col_typical = None
        if column.name in typical:
            if not kind.is_numeric:
                raise UsageError(TYPICAL_KINDS, column.name, "drop it, or declare the column's kind numeric")
            col_typical = check_typical(column.name, typical[column.name], col_bounds)
        col_step = declared_step(column.name, kind, steps[column.name]) if column.name in steps else None
        columns[column.name] = ColumnProfile(kind, col_bounds, col_keys, policy, col_typical, col_step)
    caps = _group_caps(max_groups_per_unit or {}, columns)
    profile = Profile(unit, adjacency, columns, max_rows_per_unit, unit_policy, max_groups_per_unit=caps)
    schema = profile.schema()  # validates kinds against bounds and keys
    trees = {name: declare_hierarchy(name, spec, schema) for name, spec in (hierarchies or {}).items()}
    return dataclasses.replace(profile, hierarchies=trees) if trees else profile


def _group_caps(declared: Mapping[str, int], columns: Mapping[str, ColumnProfile]) -> dict[str, int]:
    caps: dict[str, int] = {}
    for name, cap in declared.items():
        column = columns.get(name)
        if column is None or column.kind not in (ColumnKind.CATEGORICAL, ColumnKind.INTEGER):
            raise UsageError(
                "max_groups_per_unit names a categorical or integer column of the source", name, "name a group column"
            )
        if not integer_in(cap, 1):
            raise UsageError("max_groups_per_unit values are integers >= 1", cap, f"e.g. {{{name!r}: 1}}")
        caps[name] = cap
    return caps


def check_quality(profile: Profile, quality: Mapping[str, Any]) -> None:
    """Refuse bad data under the ``refuse`` policy (steward-facing; names the column and the fix)."""
    issues = quality.get(profile.unit)
    if issues is not None and issues.missing and profile.unit_policy == "refuse":
        raise InvalidData(
            "rows without a privacy unit were found",
            profile.unit,
            f"fix the data, or declare policies={{{profile.unit!r}: 'drop'}} to drop those rows",
        )
    for name, column in sorted(profile.columns.items()):
        issues = quality.get(name)
        if issues is None or column.policy != "refuse":
            continue
        if issues.missing or issues.nan or issues.infinite:
            alternatives = "'drop' or 'clamp'" if column.bounds is not None else "'drop'"
            raise InvalidData(
                "the column has missing, NaN or infinite values and its policy is 'refuse'",
                name,
                f"clean the data, or declare policies={{{name!r}: ...}} with {alternatives}",
            )


def checked_columns(profile: Profile) -> list[str]:
    """The columns whose quality registration checks: the unit, and every numeric column."""
    numeric = [n for n, c in sorted(profile.columns.items()) if c.kind.is_numeric or c.kind is ColumnKind.POINT]
    return [profile.unit, *numeric]


def _kind(name: str, engine_kind: str, declared: str | None) -> ColumnKind | None:
    if declared is not None:
        kind = ColumnKind.parse(declared, column=name)
        if kind is ColumnKind.UNIT:
            raise UsageError("the unit column is declared with privacy_unit=", name, "drop it from kinds")
        if (kind.is_numeric or kind is ColumnKind.POINT) and engine_kind not in ("integer", "float", "decimal"):
            raise UsageError(f"column {name!r} is not numeric in the source", engine_kind, "declare another kind")
        return kind
    return _ENGINE_KINDS.get(engine_kind)


_q = ratio_text


def _plain(value: Any) -> Any:
    if isinstance(value, Fraction):
        return int(value) if value.denominator == 1 else _q(value)
    return value
