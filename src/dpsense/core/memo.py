"""Results of pure functions of large immutable public values, remembered by the value's identity.

A release reads a dataset's declared public keys (a tuple of up to 10^5 values, the same object for
every query of the schema) several times: their canonical JSON, their engine form, their type check.
Hashing such a tuple costs what the function costs, so ``IdentityMemo`` keys on ``id()``; each entry
holds the value itself, so the id cannot be reused while the entry lives. Results must be immutable
(tuples), as every caller shares them. Only public values belong here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class IdentityMemo(Generic[K, V]):
    """``function(value)``, computed once per value object among the ``size`` most recent ones."""

    def __init__(self, function: Callable[[K], V], size: int = 64) -> None:
        self._function = function
        self._size = size
        self._entries: dict[int, tuple[K, V]] = {}
        self._lock = threading.Lock()

    def __call__(self, value: K) -> V:
        """The function's result for this very object (``is``, not ``==``): remembered, or computed now."""
        with self._lock:
            entry = self._entries.get(id(value))
        if entry is not None and entry[0] is value:
            return entry[1]
        result = self._function(value)  # outside the lock: a race computes twice, never wrongly
        with self._lock:
            if len(self._entries) >= self._size:
                self._entries.pop(next(iter(self._entries)))
            self._entries[id(value)] = (value, result)
        return result
