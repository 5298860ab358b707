"""Exact, type-stable public values: the literals a query may contain.

Numbers become exact ``Fraction`` values through their decimal spelling (``0.1``, ``"0.1"`` and
``Fraction(1, 10)`` are one value; so are ``24`` and ``24.0``). Strings stay strings and booleans stay
booleans, so ``1``, ``"1"`` and ``True`` remain three different keys. Every value renders to a tagged
JSON form that sorts the same way whatever the Python types were.

Every number a front end reads (a literal, a bound, ε in a request) obeys one size rule,
``number_problem``: finite, at most ``MAX_NUMBER_DIGITS`` significant digits, and zero or of a size
between ``10**-MAX_NUMBER_EXPONENT`` and ``10**MAX_NUMBER_EXPONENT``. ``0.1e99999`` or a 5000-digit
string is refused before any exact arithmetic (or Python's int-to-text digit limit) sees it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from dpsense.core.checks import integer_in
from dpsense.core.errors import InvalidPrivacyParameter, UsageError
from dpsense.core.numbers import NumberLike, ratio_text, to_fraction

#: A literal as the analyst may write it.
PublicValue = str | bool | int | float | Fraction | Decimal
#: A literal after normalisation: numbers are exact fractions.
Value = str | bool | Fraction

Tagged = tuple[str, str | bool]

#: The most significant digits a number may be written with.
MAX_NUMBER_DIGITS = 100
#: A non-zero number lies between 10**-MAX_NUMBER_EXPONENT and 10**MAX_NUMBER_EXPONENT in size.
MAX_NUMBER_EXPONENT = 300
#: The longest text read as a number (digits, sign, point, exponent and ``_`` separators).
MAX_NUMBER_CHARS = 160
#: The size rule, as errors state it.
NUMBER_RULE = (
    f"a number must be finite, have at most {MAX_NUMBER_DIGITS} significant digits and lie between "
    f"1e-{MAX_NUMBER_EXPONENT} and 1e{MAX_NUMBER_EXPONENT} in size (or be 0)"
)
_HUGE = Fraction(10) ** MAX_NUMBER_EXPONENT
_TINY = 1 / _HUGE


def number_problem(value: object) -> str | None:
    """Why ``value`` breaks the size rule (``NUMBER_RULE``), or None when it keeps it or is no number.

    Text is judged as the decimal it spells (text that is no decimal is left to the caller's own
    check); a boolean is no number. The check is linear in the text and never builds a big integer.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return f"{value!r} is not a finite number"
        return _size_problem(Fraction(abs(value)) if value else Fraction(0))
    if isinstance(value, int):
        if value and abs(value).bit_length() > 1000:  # far above 1e300: no text is built
            return f"an integer of {abs(value).bit_length()} bits is over 1e{MAX_NUMBER_EXPONENT}"
        return _decimal_problem(Decimal(value))
    if isinstance(value, Fraction):
        return _size_problem(abs(value))
    if isinstance(value, Decimal):
        return _decimal_problem(value)
    if isinstance(value, str):
        text = value.strip()
        if len(text) > MAX_NUMBER_CHARS:
            return f"a number written with {len(text)} characters is over the {MAX_NUMBER_CHARS}-character limit"
        try:
            return _decimal_problem(Decimal(text))
        except (InvalidOperation, ValueError):
            return None
    return None


def _decimal_problem(value: Decimal) -> str | None:
    if not value.is_finite():
        return f"{value} is not a finite number"
    if value.is_zero():
        return None
    digits = len(value.as_tuple().digits) - _trailing_zeros(value)
    if digits > MAX_NUMBER_DIGITS:
        return f"a number with {digits} significant digits is over the {MAX_NUMBER_DIGITS}-digit limit"
    if not -MAX_NUMBER_EXPONENT <= value.adjusted() < MAX_NUMBER_EXPONENT:
        return f"a number of size 1e{value.adjusted()} is outside 1e-{MAX_NUMBER_EXPONENT}..1e{MAX_NUMBER_EXPONENT}"
    return None


def _trailing_zeros(value: Decimal) -> int:
    digits = value.as_tuple().digits
    count = 0
    for d in reversed(digits):
        if d:
            break
        count += 1
    return count


def _size_problem(size: Fraction) -> str | None:
    if size and not _TINY <= size < _HUGE:
        return f"a number outside 1e-{MAX_NUMBER_EXPONENT}..1e{MAX_NUMBER_EXPONENT} in size"
    return None


def check_number(value: object, *, what: str, error: type[UsageError] = UsageError) -> None:
    """Refuse ``value`` with ``error`` naming ``what`` when it breaks the size rule (``number_problem``)."""
    problem = number_problem(value)
    if problem is not None:
        raise error(f"{what}: {NUMBER_RULE}", problem, f"write {what} as a plain number such as 0.5, 24 or 1e-8")


def exact(value: object, *, what: str, error: type[UsageError] = UsageError) -> Fraction:
    """``value`` as an exact fraction, or ``error`` naming ``what`` and the fix."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Fraction, Decimal)):
        raise error(f"{what} must be a number", value, f"write {what} as an int, float, decimal string or Fraction")
    check_number(value, what=what, error=error)
    number: NumberLike = value
    try:
        return to_fraction(number, name=what)
    except InvalidPrivacyParameter as exc:
        raise error(exc.rule, value, exc.fix) from None


def positive_int(value: object, *, what: str, example: str) -> int:
    """``value`` if it is an int >= 1 (booleans refused), else a UsageError naming the fix."""
    if not integer_in(value, 1):
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


#: An exact number as ``"n/d"`` (``core.numbers.ratio_text``, the one spelling).
rational = ratio_text
