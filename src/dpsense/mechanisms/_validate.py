"""Input checks shared by the mechanisms: judged on public shape and declared parameters."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpsense.core.checks import integer_in
from dpsense.core.errors import InvalidBounds, InvalidData, InvalidSensitivity, UsageError
from dpsense.core.numbers import NumberLike, to_fraction


def check_sensitivity(value: NumberLike, *, name: str = "sensitivity") -> Fraction:
    """A declared sensitivity as an exact Fraction; must be finite and > 0."""
    try:
        sens = to_fraction(value, name=name)
    except ValueError:
        raise InvalidSensitivity(
            f"{name} must be a finite number", value, f"declare the global {name} of the query, e.g. {name}=1"
        ) from None
    if sens <= 0:
        raise InvalidSensitivity(
            f"{name} must be > 0", value, f"declare the global {name} of the query (clip values first), e.g. {name}=1"
        )
    return sens


def as_float_values(value: Any) -> tuple[NDArray[np.float64], bool]:
    """The value as a 1-D float64 array and whether it was a scalar. Refuses empty, non-numeric, non-finite."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "biuf":
        raise InvalidData("the value to privatise must be numeric", str(arr.dtype), "pass a number or a numeric array")
    if arr.size == 0:
        raise InvalidData("the value to privatise is empty", "size 0", "pass at least one number")
    flat = arr.astype(np.float64).ravel()
    if not np.isfinite(flat).all():
        raise InvalidData(
            "the value to privatise must be finite",
            "a NaN or infinite entry",
            "clip inputs to declared bounds and handle NaN at registration",
        )
    return flat, arr.ndim == 0


def as_int_values(value: Any) -> tuple[NDArray[np.int64], bool]:
    """The value as a 1-D int64 array and whether it was a scalar. Refuses empty and non-integer input."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "biu":
        raise InvalidData(
            "the discrete mechanisms take integer values",
            str(arr.dtype),
            "pass integers (counts), or use the float-safe laplace()/gaussian() for real values",
        )
    if arr.size == 0:
        raise InvalidData("the value to privatise is empty", "size 0", "pass at least one integer")
    return arr.astype(np.int64).ravel(), arr.ndim == 0


def check_confidence(value: float) -> float:
    """A confidence level 1 - beta in (0, 1)."""
    conf = float(value)
    if not 0 < conf < 1:
        raise InvalidData("confidence must lie in (0, 1)", value, "pass e.g. confidence=0.95")
    return conf


#: Public output cells are float64 base measures and int64 indices: keep them exact.
MAX_CELLS = 1 << 52


def check_bounds_pair(bounds: tuple[float, float]) -> tuple[float, float]:
    """Public bounds (L, U) as floats: finite, with L <= U."""
    try:
        low, high = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise InvalidBounds("bounds must be a pair (L, U) of numbers", bounds, "pass bounds=(L, U)") from None
    if not (math.isfinite(low) and math.isfinite(high)):
        raise InvalidBounds("bounds must be finite", bounds, "pass finite public bounds (L, U)")
    if low > high:
        raise InvalidBounds("bounds must satisfy L <= U", bounds, "swap them: bounds=(L, U) with L <= U")
    return low, high


def check_resolution(resolution: int) -> int:
    """A number of public output cells in [1, 2^52]."""
    if not integer_in(resolution, 1, MAX_CELLS):
        raise UsageError("resolution must be an integer in [1, 2^52]", resolution, "pass e.g. resolution=2**32")
    return resolution


def as_record_values(values: Any) -> NDArray[np.float64]:
    """One value per record as a non-empty 1-D float64 array without NaN (infinities are clipped later)."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise InvalidData("values must be a non-empty 1-D array", f"shape {array.shape}", "pass one value per record")
    if bool(np.any(np.isnan(array))):
        raise InvalidData("values must not contain NaN", "NaN", "drop or impute missing values before the release")
    return array
