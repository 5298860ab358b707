"""Exact, type-stable public values: the literals a query may contain.

Numbers become exact ``Fraction`` values through their decimal spelling (``0.1``, ``"0.1"`` and
``Fraction(1, 10)`` are one value; so are ``24`` and ``24.0``). Strings stay strings and booleans stay
booleans, so ``1``, ``"1"`` and ``True`` remain three different keys. Every value renders to a tagged
JSON form that sorts the same way whatever the Python types were.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from fractions import Fraction

from dpsense.core.errors import InvalidPrivacyParameter, UsageError
from dpsense.core.numbers import NumberLike, to_fraction

#: A literal as the analyst may write it.
PublicValue = str | bool | int | float | Fraction | Decimal
#: A literal after normalisation: numbers are exact fractions.
Value = str | bool | Fraction

Tagged = tuple[str, str | bool]


def exact(value: object, *, what: str, error: type[UsageError] = UsageError) -> Fraction:
    """``value`` as an exact fraction, or ``error`` naming ``what`` and the fix."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Fraction, Decimal)):
        raise error(f"{what} must be a number", value, f"write {what} as an int, float, decimal string or Fraction")
    number: NumberLike = value
    try:
        return to_fraction(number, name=what)
    except InvalidPrivacyParameter as exc:
        raise error(exc.rule, value, exc.fix) from None


def positive_int(value: object, *, what: str, example: str) -> int:
    """``value`` if it is an int >= 1 (booleans refused), else a UsageError naming the fix."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{what} must be an integer >= 1", value, f"pass a whole number such as {example}")
    return value


def normalise(value: object, *, numeric: bool, what: str) -> Value:
    """A public literal in normal form; ``numeric`` columns accept only numbers (or numeric strings)."""
    if numeric:
        return exact(value, what=what)
    if isinstance(value, (str, bool)):
        return value
    if isinstance(value, (int, float, Fraction, Decimal)):
        return exact(value, what=what)
    raise UsageError(f"{what} must be a string, number or boolean", type(value).__name__, f"pass a plain {what}")


def normalise_set(values: object, *, numeric: bool, what: str) -> tuple[Value, ...]:
    """A non-empty list of literals, deduplicated and sorted in the type-stable order."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise UsageError(f"{what} must be a list of values", values, f"pass {what} as a list, e.g. ['a', 'b']")
    # keyed by the tagged form: as Python values True == 1 == Fraction(1), as literals they differ
    items = {tagged(v): v for v in (normalise(v, numeric=numeric, what=what) for v in values)}.values()
    if not items:
        raise UsageError(f"{what} must not be empty", [], f"list at least one value in {what}")
    return tuple(sorted(items, key=sort_key))


def tagged(value: Value) -> Tagged:
    """The JSON form of a value: ``("b", True)``, ``("n", "1/10")`` or ``("s", "north")``."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, Fraction):
        return ("n", rational(value))
    return ("s", value)


def sort_key(value: Value) -> tuple[int, Fraction, str]:
    """A total order across types: booleans, then numbers by size, then strings."""
    if isinstance(value, bool):
        return (0, Fraction(int(value)), "")
    if isinstance(value, Fraction):
        return (1, value, "")
    return (2, Fraction(0), value)


def rational(value: Fraction) -> str:
    """An exact number as ``"n/d"`` in lowest terms (``Fraction`` keeps it reduced)."""
    return f"{value.numerator}/{value.denominator}"
