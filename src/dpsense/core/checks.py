"""The one rule for integer parameters: what counts as an integer, and the range test.

Every public integer a caller passes (a contribution bound, a resolution, a rank, a public n, a
count of blocks) is judged here: a Python ``int`` that is not a ``bool`` (``True`` is an ``int`` in
Python, and ``max_rows_per_unit=True`` is a mistake, not 1) inside the closed range [low, high]
(``integer_in``), or any ``numbers.Integral`` such as a NumPy integer where the caller accepts those
(``integral_in``). Each caller keeps its own error, naming its rule and its fix in the words of its
interface.
"""

from __future__ import annotations

from numbers import Integral
from typing import TypeGuard

__all__ = ["integer_in", "integral_in"]


def integer_in(value: object, low: int | None = None, high: int | None = None) -> TypeGuard[int]:
    """Whether ``value`` is an ``int`` (never a bool) with ``low <= value <= high`` (``None``: unbounded)."""
    return isinstance(value, int) and _within(value, low, high)


def integral_in(value: object, low: int | None = None, high: int | None = None) -> TypeGuard[Integral]:
    """``integer_in`` for any ``numbers.Integral`` (NumPy integers included), never a bool."""
    return isinstance(value, Integral) and _within(value, low, high)


def _within(value: Integral | int, low: int | None, high: int | None) -> bool:
    if isinstance(value, bool):
        return False
    number = int(value)
    return (low is None or number >= low) and (high is None or number <= high)
