"""Typos refused for free: literals and bounds the declarations show cannot be what the analyst meant.

Checked when a query is built against its schema, so before any plan, charge or data access, and in
every interface (the builder, SQL, a YAML spec, an HTTP body all build through ``Query.build``):

* a filter literal (``==``, ``!=``, ``in``) or a group key on a column with declared public keys must
  be one of them: ``region = 'norht'`` is refused with "did you mean 'north'?" (a key outside the
  declared set matches no row by declaration, and a group for it would release noise alone);
* a filter on a bounded numeric column that no value inside the declared bounds can satisfy
  (``age >= 200`` on [0, 120], ``age = -3``, ``age in (130, 140)``) is refused: it is empty by
  declaration. A filter every value satisfies (``age >= -1``) changes nothing and is allowed;
* a statistic's ``bounds=`` override may not contain the column's declared bounds and reach beyond them:
  the declared ones are the public domain, and wider clipping only adds noise (``sum bounds [0, 1e300]``
  on [0, 24]); a narrower or shifted clip is the analyst's choice.

The refusals name the rule and the fix; nothing here reads data.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from dpsense.core.errors import InvalidBounds, UsageError
from dpsense.query._ir import FilterOp
from dpsense.query._schema import Bounds, Column
from dpsense.query._values import Value, sort_key

#: At most this many declared keys are listed in a refusal.
_LISTED = 12


def check_keys(column: Column, values: Sequence[Value], *, what: str) -> None:
    """Every value is a declared key of ``column`` (when it declares keys); else a refusal with the closest one."""
    if column.keys is None:
        return
    declared = set(column.keys)
    for value in values:
        if isinstance(value, str) == column.kind.is_numeric:
            continue  # a literal of the wrong kind is the admission rule's to refuse, with its own fix
        if value not in declared:
            raise UsageError(
                f"{what} {_shown(value)} is not a declared key of {column.name!r} (it matches no row by declaration)",
                value if isinstance(value, str) else _plain(value),
                _closest(value, column.keys),
            )


def check_filter_bounds(column: Column, op: FilterOp, value: Value | tuple[Value, ...]) -> None:
    """Refuse a filter on a bounded numeric column that no value inside its declared bounds satisfies."""
    if column.bounds is None or not column.kind.is_numeric:
        return
    low, high = column.bounds
    values = value if isinstance(value, tuple) else (value,)
    numbers = [v for v in values if not isinstance(v, (str, bool))]
    if len(numbers) != len(values):
        return  # a wrong-kind literal is the admission rule's to refuse, with its own fix
    empty = _EMPTY_WHEN.get(op)
    if empty is not None and all(empty(v, low, high) for v in numbers):
        shown = ", ".join(_plain(v) for v in numbers)
        shown = f"({shown})" if op is FilterOp.IN else shown
        raise UsageError(
            f"the filter {column.name} {op.value} {shown} holds for no value inside the declared bounds "
            f"[{_plain(low)}, {_plain(high)}] of {column.name!r} (empty by declaration)",
            shown,
            f"check the literal (a typo?); filter within [{_plain(low)}, {_plain(high)}], or ask the steward to "
            "declare wider bounds if values beyond them exist",
        )


#: Per comparison, when ``column op v`` holds for no value of [low, high].
_EMPTY_WHEN: dict[FilterOp, Callable[[Any, Any, Any], bool]] = {
    FilterOp.EQ: lambda v, low, high: not low <= v <= high,
    FilterOp.IN: lambda v, low, high: not low <= v <= high,
    FilterOp.GT: lambda v, low, high: v >= high,
    FilterOp.GE: lambda v, low, high: v > high,
    FilterOp.LT: lambda v, low, high: v <= low,
    FilterOp.LE: lambda v, low, high: v < low,
}


def check_override(name: str, column: Column, override: Bounds) -> None:
    """A ``bounds=`` override does not contain the declared bounds and reach beyond them: it is never wider.

    An override inside the declared bounds (a narrower clip) or shifted across them is the analyst's
    choice; one holding the whole declared domain and more clips nothing the declared bounds keep and
    only adds noise (``bounds=(0, 1e300)`` on [0, 24]).
    """
    if column.bounds is None:
        return
    low, high = column.bounds
    if override[0] <= low and override[1] >= high and override != column.bounds:
        raise InvalidBounds(
            f"the bounds of {name!r} reach beyond the declared bounds [{_plain(low)}, {_plain(high)}] of "
            f"{column.name!r}, its public domain (wider clipping only adds noise)",
            f"[{_plain(override[0])}, {_plain(override[1])}]",
            f"pass bounds inside [{_plain(low)}, {_plain(high)}], or leave bounds= out to use the declared ones",
        )


def _closest(value: Value, keys: tuple[Value, ...]) -> str:
    """A "did you mean ...?" for the closest declared key (by value for numbers, by spelling for text)."""
    ordered = sorted(keys, key=sort_key)
    listed = ", ".join(_shown(k) for k in ordered[:_LISTED]) + (", ..." if len(ordered) > _LISTED else "")
    numbers = [k for k in ordered if isinstance(k, (int, Fraction)) and not isinstance(k, bool)]
    if isinstance(value, (int, Fraction)) and not isinstance(value, bool) and numbers:
        nearest = min(numbers, key=lambda k: (abs(k - value), k))
        return f"did you mean {_shown(nearest)}? (the declared keys: {listed})"
    match = difflib.get_close_matches(_plain(value), [_plain(k) for k in ordered], n=1, cutoff=0.5)
    if match:
        chosen = next(k for k in ordered if _plain(k) == match[0])
        return f"did you mean {_shown(chosen)}? (the declared keys: {listed})"
    return f"use one of the declared keys: {listed}"


def _shown(value: object) -> str:
    """A key as the analyst wrote it: text quoted, numbers plain."""
    return repr(value) if isinstance(value, str) else _plain(value)


def _plain(value: object) -> str:
    if isinstance(value, Fraction):
        small = value.denominator == 1 and abs(value.numerator) < 10**15
        return str(value.numerator) if small else f"{float(value):g}"
    return str(value)
