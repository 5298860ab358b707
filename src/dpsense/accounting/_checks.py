"""Input checks shared by the accounting modules.

Every check raises a ``dpsense.core`` error whose message names the rule, the value and the fix,
and returns the value in the form the caller computes with (``Fraction`` for budgets, ``float``
for noise parameters, ``int`` for counts).
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction

from dpsense.core.errors import InvalidPrivacyParameter, InvalidSensitivity
from dpsense.core.numbers import NumberLike, to_fraction
from dpsense.core.privacy_loss import check_delta, check_epsilon


def positive_delta(value: NumberLike, *, name: str = "delta") -> Fraction:
    """A delta in (0, 1): the conversions to (ε, δ)-DP need δ > 0."""
    delta = check_delta(value, name=name)
    if delta == 0:
        raise InvalidPrivacyParameter(
            f"{name} must be > 0 for this (ε, δ) bound", value, f"pass a positive {name}, e.g. {name}=1e-8"
        )
    return delta


def epsilon_target(value: NumberLike, *, name: str = "epsilon") -> Fraction:
    """An epsilon budget or per-mechanism epsilon: finite and > 0."""
    return check_epsilon(value, name=name)


def epsilon_query(value: NumberLike, *, name: str = "epsilon") -> Fraction:
    """An epsilon at which a delta is evaluated: finite and >= 0 (δ at ε = 0 is meaningful)."""
    return check_epsilon(value, name=name, allow_zero=True)


def positive_float(value: NumberLike, *, name: str, example: str) -> float:
    """A noise parameter (sigma, scale, sigma^2): finite and > 0, returned as a float."""
    exact = to_fraction(value, name=name)
    as_float = float(exact)
    if exact <= 0 or as_float <= 0 or not math.isfinite(as_float):
        raise InvalidPrivacyParameter(
            f"{name} must be a positive, finite number", value, f"pass a positive {name}, e.g. {example}"
        )
    return as_float


def sensitivity_float(value: NumberLike, *, name: str = "sensitivity", allow_zero: bool = True) -> float:
    """A sensitivity: finite and >= 0 (or > 0 when noise is calibrated to it), as a float."""
    try:
        exact = to_fraction(value, name=name)
    except InvalidPrivacyParameter as err:
        raise InvalidSensitivity(err.rule, value, err.fix) from None
    as_float = float(exact)
    if exact < 0 or (exact == 0 and not allow_zero) or not math.isfinite(as_float):
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidSensitivity(
            f"{name} must be finite and {bound}",
            value,
            f"pass the query's sensitivity under the declared adjacency, e.g. {name}=1",
        )
    return as_float


def integer_sensitivity(value: object, *, name: str = "sensitivity", allow_zero: bool = True) -> int:
    """An integer sensitivity (for integer-valued queries such as counts)."""
    try:
        if isinstance(value, bool):
            raise TypeError
        as_int = operator.index(value)  # type: ignore[arg-type]  # TypeError is the check
    except TypeError:
        raise InvalidSensitivity(
            f"{name} must be an integer for an integer-valued mechanism",
            value,
            f"pass an int {name}; scale a fractional query to integers first",
        ) from None
    if as_int < 0 or (as_int == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else ">= 1"
        raise InvalidSensitivity(f"{name} must be an integer {bound}", value, f"pass e.g. {name}=1")
    return int(as_int)


def count(value: object, *, name: str = "k") -> int:
    """A number of compositions: an integer >= 1."""
    try:
        if isinstance(value, bool):
            raise TypeError
        as_int = operator.index(value)  # type: ignore[arg-type]  # TypeError is the check
    except TypeError:
        raise InvalidPrivacyParameter(
            f"{name} (number of mechanisms composed) must be an integer", value, f"pass an int {name} >= 1"
        ) from None
    if as_int < 1:
        raise InvalidPrivacyParameter(
            f"{name} (number of mechanisms composed) must be >= 1", value, f"pass an int {name} >= 1"
        )
    return int(as_int)


def renyi_order(value: NumberLike, *, name: str = "alpha") -> float:
    """A Renyi order: finite and > 1, as a float."""
    exact = to_fraction(value, name=name)
    as_float = float(exact)
    if exact <= 1 or as_float <= 1 or not math.isfinite(as_float):
        raise InvalidPrivacyParameter(
            f"the Renyi order {name} must be finite and > 1", value, f"pass an order such as {name}=2 or {name}=1.5"
        )
    return as_float


def ceil_rational(value: Fraction, digits: int = 20) -> Fraction:
    """``value`` itself if its denominator is small, else its round-up to ``digits`` significant digits."""
    if value <= 0 or value.denominator <= 10**digits:
        return value
    # log10 of the int parts works for any magnitude; being off by one near powers of ten is harmless
    exponent = math.floor(math.log10(value.numerator) - math.log10(value.denominator))
    scale = Fraction(10) ** (digits - 1 - exponent)
    return Fraction(math.ceil(value * scale)) / scale
