"""The frozen query IR and its canonical form.

``Query.build(schema)`` produces a ``QueryIR`` already in normal form: filters deduplicated and
sorted, ``in`` lists deduplicated and sorted, group-by columns and keys sorted in a type-stable way,
aggregates sorted by output name, every number an exact fraction and every bound resolved from the
schema or the override. So two queries that mean the same thing build *equal* IR objects, and
``canonical()`` is only their serialisation: JSON with sorted keys and numbers rendered ``"n/d"``.
``fingerprint()`` is the SHA-256 of that text, the key under which a release is stored
(docs/design.md invariant 5: same canonical query, same bounds, same mechanism version = same release).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction

from dpsense.core.memo import IdentityMemo
from dpsense.core.steps import DecimalStep
from dpsense.query._aggregates import AggregateKind
from dpsense.query._schema import Bounds
from dpsense.query._values import Tagged, Value, rational, tagged

#: Bumped whenever the canonical form changes, so old fingerprints never collide with new meanings.
CANONICAL_VERSION = 1


class FilterOp(str, Enum):
    """The public comparisons a filter may use."""

    EQ = "=="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    IN = "in"


class _ComparedByCanonicalForm(ABC):
    """Equality and hashing through the canonical JSON, which keeps ``True``, ``1`` and ``"1"`` apart.

    Plain dataclass equality would not: in Python ``True == 1 == Fraction(1)`` with equal hashes.
    """

    @abstractmethod
    def to_json(self) -> object:
        """The node as plain JSON data (the canonical form is its sorted-key dump)."""

    def _text(self) -> str:
        # The nodes are immutable, so the text is computed once per node (a release asks for it
        # several times: fingerprint, cache key, record).
        cached: str | None = self.__dict__.get("_canonical_text")
        if cached is None:
            cached = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            object.__setattr__(self, "_canonical_text", cached)
        return cached

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self) and isinstance(other, _ComparedByCanonicalForm) and other._text() == self._text()
        )

    def __hash__(self) -> int:
        return hash(self._text())


@dataclass(frozen=True, eq=False)
class FilterIR(_ComparedByCanonicalForm):
    """``column op value``; ``value`` is a sorted, deduplicated tuple for ``in``."""

    column: str
    op: FilterOp
    value: Value | tuple[Value, ...]

    def to_json(self) -> dict[str, object]:
        """The canonical JSON object of this filter."""
        value = [tagged(v) for v in self.value] if isinstance(self.value, tuple) else tagged(self.value)
        return {"column": self.column, "op": self.op.value, "value": value}


@dataclass(frozen=True, eq=False)
class GroupByIR(_ComparedByCanonicalForm):
    """A grouping column; ``keys is None`` means the groups must be selected privately."""

    column: str
    keys: tuple[Value, ...] | None

    @property
    def needs_partition_selection(self) -> bool:
        """True when no public key list exists, so a private partition selection must run."""
        return self.keys is None

    def to_json(self) -> dict[str, object]:
        """The canonical JSON object of this grouping."""
        return {"column": self.column, "keys": _keys_json(self.keys)}


@dataclass(frozen=True, eq=False)
class AggregateIR(_ComparedByCanonicalForm):
    """One statistic resolved against the schema.

    ``bounds`` holds the effective public bounds of each column in ``columns`` (the override if given,
    else the declared bounds), and is empty for statistics that need none. For a histogram, ``keys``
    is the public key list, or ``None`` when the keys must be selected privately. For an order
    statistic of a column declared integer, ``integer_candidates`` makes the exponential mechanism
    choose among the integers of the bounds (a public fact of the schema). For a mean or sum of a
    column with a declared typical range, ``typical`` holds it (the planner's adaptive-clip rule reads it);
    ``qs`` are the quantiles of ``quantiles``. For an order statistic of a column with a declared
    recording step whose bounds hold a point of it, ``step`` makes the step's points the candidates.
    For a hierarchical count, ``columns`` are the hierarchy's levels from the top down and ``split``
    the share of ε of each level (the total first), summing to 1.
    """

    name: str
    kind: AggregateKind
    columns: tuple[str, ...]
    bounds: tuple[Bounds, ...]
    max_rows_per_unit: int | None
    mechanism: str | None
    q: Fraction | None
    trim_fraction: Fraction | None
    keys: tuple[Value, ...] | None
    proposed_bound: Fraction | None = None
    integer_candidates: bool = False
    typical: Bounds | None = None
    qs: tuple[Fraction, ...] | None = None
    split: tuple[Fraction, ...] | None = None
    step: DecimalStep | None = None

    @property
    def needs_partition_selection(self) -> bool:
        """True for a histogram without public keys."""
        return self.kind is AggregateKind.HISTOGRAM and self.keys is None

    def to_json(self) -> dict[str, object]:
        """The canonical JSON object of this statistic."""
        return {
            "name": self.name,
            "kind": self.kind.value,
            "columns": list(self.columns),
            "bounds": [[rational(lo), rational(hi)] for lo, hi in self.bounds],
            "max_rows_per_unit": self.max_rows_per_unit,
            "mechanism": self.mechanism,
            "q": None if self.q is None else rational(self.q),
            "trim_fraction": None if self.trim_fraction is None else rational(self.trim_fraction),
            "keys": _keys_json(self.keys),
            # only when set, so that the canonical form (and the stored releases' keys) of every other
            # statistic stays what it was before PTR was offered
            **({} if self.proposed_bound is None else {"proposed_bound": rational(self.proposed_bound)}),
            **({"integer_candidates": True} if self.integer_candidates else {}),
            **({} if self.typical is None else {"typical": [rational(b) for b in self.typical]}),
            **({} if self.qs is None else {"qs": [rational(q) for q in self.qs]}),
            **({} if self.split is None else {"split": [rational(w) for w in self.split]}),
            **({} if self.step is None else {"step": self.step.text()}),
        }


@dataclass(frozen=True, eq=False)
class QueryIR(_ComparedByCanonicalForm):
    """A validated query in normal form: hashable, comparable, and with one canonical text."""

    dataset: str
    filters: tuple[FilterIR, ...]
    group_by: tuple[GroupByIR, ...]
    max_groups_per_unit: int | None
    aggregates: tuple[AggregateIR, ...]
    #: The declared key combinations of a grouping by several columns (tuples in ``group_by``'s column
    #: order, sorted), or ``None``: the cross product of the columns' public keys.
    key_set: tuple[tuple[Value, ...], ...] | None = None

    @property
    def needs_partition_selection(self) -> bool:
        """True when some grouping or histogram has no public keys."""
        return any(g.needs_partition_selection for g in self.group_by) or any(
            a.needs_partition_selection for a in self.aggregates
        )

    @property
    def group_columns(self) -> tuple[str, ...]:
        """The grouping's columns, in the IR's (sorted) order."""
        return tuple(g.column for g in self.group_by)

    @property
    def group_keys(self) -> tuple[Value, ...] | tuple[tuple[Value, ...], ...] | None:
        """The grouping's public keys: one column's keys, or tuples for several columns; ``None`` if selected.

        Several columns: the declared ``key_set``, else the cross product of the columns' keys in the
        column order (the last column varying fastest). ``None`` when there is no grouping or some
        column has no public keys (private partition selection then picks the combinations).
        """
        if not self.group_by:
            return None
        if len(self.group_by) == 1:
            return self.group_by[0].keys
        if self.key_set is not None:
            return self.key_set
        per_column = [g.keys for g in self.group_by]
        if any(keys is None for keys in per_column):
            return None
        return tuple(itertools.product(*(keys for keys in per_column if keys is not None)))

    @property
    def public_groups(self) -> int | None:
        """How many groups an additive step releases: the public keys, 1 ungrouped, ``None`` if selected.

        A histogram released alone counts its public keys. Computed without building a cross product.
        """
        if self.group_by:
            if len(self.group_by) > 1 and self.key_set is None:
                sizes = [g.keys for g in self.group_by]
                return None if any(k is None for k in sizes) else max(1, math.prod(len(k or ()) for k in sizes))
            keys = self.group_keys
            return None if keys is None else max(1, len(keys))
        histogram = next((a for a in self.aggregates if a.kind is AggregateKind.HISTOGRAM), None)
        if histogram is not None:
            return None if histogram.keys is None else max(1, len(histogram.keys))
        return 1

    def to_json(self) -> dict[str, object]:
        """The canonical JSON document of the whole query."""
        return {
            "version": CANONICAL_VERSION,
            "dataset": self.dataset,
            "filters": [f.to_json() for f in self.filters],
            "group_by": [g.to_json() for g in self.group_by],
            "max_groups_per_unit": self.max_groups_per_unit,
            "aggregates": [a.to_json() for a in self.aggregates],
            # only when set, so that the canonical form of every other query stays what it was
            **({} if self.key_set is None else {"key_set": [[tagged(v) for v in k] for k in self.key_set]}),
        }

    def canonical(self) -> str:
        """The canonical JSON text: sorted keys, no whitespace, numbers as exact ``"n/d"`` strings."""
        return self._text()

    def fingerprint(self) -> str:
        """The SHA-256 hex digest of ``canonical()``."""
        return hashlib.sha256(self.canonical().encode("utf-8")).hexdigest()


def _keys_json(keys: tuple[Value, ...] | None) -> list[Tagged] | None:
    return None if keys is None else list(_TAGGED_KEYS(keys))


#: The tagged form of a declared key tuple, once per tuple object (``core.memo``).
_TAGGED_KEYS: IdentityMemo[tuple[Value, ...], tuple[Tagged, ...]] = IdentityMemo(
    lambda keys: tuple(tagged(k) for k in keys)
)
