"""Contribution bounding on plain numpy arrays: clip values, keep at most C rows per unit, sum exactly.

These are the data-side halves of the declarations in ``dpsense.sensitivity.bounds``: a
sensitivity from ``global_`` holds only for data passed through them (docs/math/global-sensitivity.md,
"Contribution bounding").

* ``clip`` maps every value into [L, U]. NaN and infinities are refused: they are bad *data* that
  the data steward resolves at registration with a declared per-column policy (docs/design.md
  invariant 6). Empty arrays are fine: refusing them would reveal that the data are empty.
* ``bound_rows_per_unit`` keeps a uniformly random subset of at most C rows of each unit, never
  "the first C rows" (an order an adversary may control). The choice for one unit depends only on
  that unit's rows and its own random keys, so coupling the keys of shared rows gives neighbours
  whose bounded datasets are still neighbours; the random choice is a mixture over such couplings.
* ``exact_clipped_sum`` sums exactly. A floating-point sum of clipped doubles can move by more than
  the stated sensitivity between neighbours because rounding depends on the other terms
  (Casacuberta, Shoemate, Vadhan, Wagaman, "Widespread underestimates of sensitivity in
  differentially private libraries and how to fix them", CCS 2022; also Mironov CCS 2012 section 6).
  Example: bounds [0, 1], x = (3 * 2^-53), x' = x + (1.0): the double sum moves by 1 + 2^-53 > 1.
  ``math.fsum`` alone does not cure it (its correctly rounded result still rounds). Here each clipped
  value is rounded to a public power-of-two grid, clamped so it stays inside [L, U], and the grid
  integers are added without any rounding; the result is exact, so the sensitivity holds exactly.

Randomness comes only from ``dpsense.noise.entropy`` (the OS CSPRNG).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpsense.core.checks import integral_in
from dpsense.core.errors import InvalidBounds, InvalidData, UsageError
from dpsense.core.numbers import NumberLike
from dpsense.noise import entropy
from dpsense.sensitivity.bounds import Bounds, exact_number

#: Grid integers never exceed 2^MAX_GRID_BITS in magnitude, so int64 chunk sums cannot overflow.
MAX_GRID_BITS = 62
#: Default grid: the largest |bound| spans 2^DEFAULT_GRID_BITS grid steps (a double's mantissa).
DEFAULT_GRID_BITS = 52

_NUMERIC_KINDS = "iuf"
_MAX_CHUNK_BITS = 16


def _numeric_array(values: ArrayLike, *, name: str = "values") -> NDArray[np.float64]:
    """A float64 view of a numeric array; judged on dtype and shape only (public schema)."""
    try:
        arr = np.asarray(values)
    except (ValueError, TypeError):
        raise InvalidData(
            f"{name} must form a rectangular numeric array", "ragged or mixed input", "pass a 1-D numeric column"
        ) from None
    if arr.ndim == 0:
        raise InvalidData(f"{name} must be an array, not a scalar", f"0-d {arr.dtype}", "wrap a single value in a list")
    if arr.dtype.kind not in _NUMERIC_KINDS:
        raise InvalidData(
            f"{name} must be an integer or float array", f"dtype {arr.dtype}", "cast the column to float (or int) first"
        )
    return arr.astype(np.float64, copy=False)


def clip(values: ArrayLike, bounds: Bounds) -> NDArray[np.float64]:
    """Clip every value into the public bounds [L, U], as float64 (any shape).

    Clipping is at the doubles nearest [L, U] from the inside (``Bounds.float_interval``), so every
    output lies in the exact interval the sensitivities are computed for.

    Raises:
        InvalidData: for non-numeric input, or if any value is NaN or infinite. Such data must be
            resolved by a per-column policy before any release; the error names no value or count.

    """
    arr = _numeric_array(values)
    if not np.isfinite(arr).all():
        raise InvalidData(
            "values must be finite before clipping",
            "NaN or infinite entries",
            "declare a per-column missing-value policy at registration (drop such rows, or impute a public"
            " constant inside the bounds)",
        )
    lo, hi = bounds.float_interval()
    return np.clip(arr, lo, hi)


def _unit_codes(unit_ids: ArrayLike) -> NDArray[np.intp]:
    try:
        ids = np.asarray(unit_ids)
    except (ValueError, TypeError):
        raise InvalidData("unit ids must form a 1-D array", "ragged input", "pass one id per row") from None
    if ids.ndim != 1:
        raise InvalidData("unit ids must form a 1-D array", f"{ids.ndim}-d array", "pass one id per row")
    if ids.dtype.kind == "f" and np.isnan(ids).any():
        raise InvalidData("every row needs a unit id", "missing (NaN) ids", "drop rows without a unit at registration")
    try:
        _, codes = np.unique(ids, return_inverse=True)
    except TypeError:
        raise InvalidData(
            "unit ids must be mutually comparable", "ids of mixed types (or None)", "use one id type, e.g. str or int"
        ) from None
    return codes.reshape(-1).astype(np.intp, copy=False)


def bound_rows_per_unit(unit_ids: ArrayLike, *, max_rows: int) -> NDArray[np.intp]:
    """Indices of the rows kept when each unit keeps a uniformly random subset of at most C rows.

    Each row gets an independent uniform 64-bit key from ``dpsense.noise.entropy.words``; within each
    unit the C rows with the smallest keys are kept. Given distinct keys the kept set is a uniform
    C-subset of the unit's rows (ties, probability below n^2 / 2^65, fall back to row order).

    Args:
        unit_ids: one privacy-unit id per row (1-D; ints, strings, ...; no missing ids).
        max_rows: C >= 1, the per-unit row bound being enforced.

    Returns:
        Sorted row indices (``np.intp``) of the kept rows; empty input gives an empty result.

    Raises:
        UsageError: if max_rows is not an integer >= 1.
        InvalidData: if the ids are not 1-D, contain NaN, or are not mutually comparable.

    """
    if not integral_in(max_rows, 1):
        raise UsageError("max_rows must be an integer >= 1", max_rows, "declare the per-unit row bound, e.g. 30")
    codes = _unit_codes(unit_ids)
    n = codes.shape[0]
    if n == 0:
        return np.empty(0, dtype=np.intp)
    keys = entropy.words(n)
    order = np.lexsort((keys, codes))  # by unit, then by random key
    grouped = codes[order]
    positions = np.arange(n, dtype=np.intp)
    starts = np.ones(n, dtype=bool)
    starts[1:] = grouped[1:] != grouped[:-1]
    rank = positions - np.maximum.accumulate(np.where(starts, positions, 0))
    return np.sort(order[rank < int(max_rows)]).astype(np.intp, copy=False)


@dataclass(frozen=True)
class ExactSum:
    """An exact sum of clipped values: ``units`` steps of the public ``grid`` (a power of two).

    Attributes:
        units: the sum in grid steps, an exact Python int.
        grid: the grid step g = 2^e, a public ``Fraction``.

    """

    units: int
    grid: Fraction

    @property
    def value(self) -> Fraction:
        """The sum as an exact ``Fraction`` (units * grid)."""
        return self.units * self.grid


def _grid_exponent(bounds: Bounds, grid: NumberLike | None) -> int:
    """The exponent e of the grid 2^e: the given one (checked) or the default for the bounds."""
    magnitude = bounds.magnitude
    if grid is None:
        if magnitude == 0:
            return 0
        top = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
        while Fraction(2) ** top < magnitude:
            top += 1
        while Fraction(2) ** (top - 1) >= magnitude:
            top -= 1
        return top - DEFAULT_GRID_BITS
    g = exact_number(grid, name="grid", error=UsageError)
    num, den = g.numerator, g.denominator
    if g <= 0 or num & (num - 1) or den & (den - 1):
        raise UsageError("grid must be a positive power of two", grid, "pass e.g. grid=2**-20 or grid=1")
    exponent = num.bit_length() - den.bit_length()
    if magnitude / g > 2**MAX_GRID_BITS:
        raise UsageError(
            f"grid is too fine: max(|L|, |U|) must be at most 2^{MAX_GRID_BITS} grid steps",
            grid,
            "pass a coarser grid, or None for the default",
        )
    return exponent


def exact_clipped_sum(values: ArrayLike, bounds: Bounds, *, grid: NumberLike | None = None) -> ExactSum:
    """Sum values clipped to [L, U] exactly, so the result moves by no more than ``sum_sensitivity``.

    Each value is clipped (``clip``), rounded to the nearest multiple of g (ties to even) and clamped
    to [ceil(L/g), floor(U/g)] grid steps, so every term lies inside [L, U] *exactly*; the integers
    are then added without rounding (int64 chunk sums that cannot overflow, then Python ints). The
    rounding moves each term by at most g/2 and is a fixed per-row function, so the add/remove and
    replace sensitivities of ``sum_sensitivity`` hold for the result with no slack.

    Source: docs/math/global-sensitivity.md, pitfall (1); Casacuberta et al., CCS 2022.

    Args:
        values: numeric array (any shape; all entries are summed).
        bounds: public clipping bounds.
        grid: public grid step, a power of two; default 2^(ceil(log2 max(|L|,|U|)) - 52), which
            represents values near the larger bound exactly.

    Returns:
        ``ExactSum`` (``.value`` is the exact ``Fraction``). The empty sum is 0.

    Raises:
        InvalidData: as ``clip``.
        UsageError: if grid is not a power of two or is too fine for the bounds.
        InvalidBounds: if no grid point lies inside [L, U].

    """
    clipped = clip(values, bounds).reshape(-1)
    exponent = _grid_exponent(bounds, grid)
    step = Fraction(2) ** exponent
    lo_q, hi_q = math.ceil(bounds.lower / step), math.floor(bounds.upper / step)
    if lo_q > hi_q:
        raise InvalidBounds("no grid point lies inside the bounds", str(bounds), "pass a finer grid")
    # Scaling by a power of two is exact; every double of magnitude >= 2^52 is an integer, so rint is exact too.
    steps = np.rint(np.ldexp(clipped, -exponent)).astype(np.int64)
    steps = np.clip(steps, lo_q, hi_q)
    bits = max(abs(lo_q), abs(hi_q)).bit_length()
    chunk = 1 << min(max(0, MAX_GRID_BITS - bits), _MAX_CHUNK_BITS)
    pad = (-steps.shape[0]) % chunk
    if pad:
        steps = np.concatenate([steps, np.zeros(pad, dtype=np.int64)])
    chunk_sums: list[int] = steps.reshape(-1, chunk).sum(axis=1).tolist()
    return ExactSum(units=sum(chunk_sums), grid=step)
