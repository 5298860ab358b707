"""Noise pools: exact noise drawn ahead of the release, so a release's duration does not depend on it.

The exact samplers are rejection samplers: how long one draw takes depends on the value drawn
(Jin et al., IEEE S&P 2022 time the rejection loops). A single release therefore never runs a
sampler on its own path: it pops a value from a pool that was filled, in bulk, by an earlier call.
When a pool runs low it is refilled *after* the values for the current release were taken, with a
fixed batch size, so the time of any call is independent of the noise it returned: the refill cost
depends only on the batch size and on the other (unreleased) values in the batch.

Pools are per process, keyed by the noise family and its exact integer parameters, and thread-safe;
a forked child starts with no pools (``os.register_at_fork``), never with a copy of its parent's.
They hold only noise (never data), and noise that was handed out is removed from the pool.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpsense.noise import exact

I64 = NDArray[np.int64]

#: Values drawn per refill at most. Large enough that refills are rare, small enough to be cheap.
BATCH = 4096
#: Values a new pool draws first; each refill doubles its batch up to ``BATCH``. A scale asked for once
#: (a service whose analysts pick ε freely meets many) then costs a few dozen draws, not 4 096.
FIRST_BATCH = 64
#: Pools kept per process; the least recently used is dropped beyond it (its values were never released).
MAX_POOLS = 256


class NoisePool:
    """A reservoir of pre-drawn integer noise for one (family, parameter) pair."""

    def __init__(self, draw: Callable[[int], I64], batch: int = BATCH, first: int = FIRST_BATCH) -> None:
        self._draw = draw
        self._largest = batch
        self._batch = min(first, batch)
        self._values: I64 = draw(self._batch)
        self._lock = threading.Lock()

    def take(self, n: int) -> I64:
        """Remove and return ``n`` values; top up afterwards so the next call finds them ready.

        The batch (the number of values a refill draws, a public constant of the pool's history: how
        many values were asked for, never which) doubles at each refill up to ``BATCH``.
        """
        with self._lock:
            if self._values.size < n:
                # Only when one request exceeds the reserve: draw exactly what is missing, in bulk.
                self._values = np.concatenate([self._values, self._draw(n - self._values.size + self._batch)])
            out, self._values = self._values[:n].copy(), self._values[n:]
            if self._values.size < self._batch // 2:
                self._batch = min(2 * self._batch, self._largest)
                self._values = np.concatenate([self._values, self._draw(self._batch)])
            return out


_pools: dict[tuple[str, Fraction], NoisePool] = {}  # in order of last use (a dict keeps insertion order)
_registry_lock = threading.Lock()


def _pool(family: str, parameter: Fraction, draw: Callable[[int], I64]) -> NoisePool:
    key = (family, parameter)
    with _registry_lock:
        pool = _pools.pop(key, None)
        if pool is None:
            pool = NoisePool(draw)
            while len(_pools) >= MAX_POOLS:
                del _pools[next(iter(_pools))]  # the least recently used
        _pools[key] = pool
        return pool


def pooled_discrete_laplace(scale: Fraction, n: int) -> I64:
    """``n`` discrete Laplace draws (``exact.discrete_laplace``) taken from a pre-filled pool."""
    return _pool("dlap", scale, lambda m: exact.discrete_laplace(scale, m)).take(n)


def pooled_discrete_gaussian(sigma2: Fraction, n: int) -> I64:
    """``n`` discrete Gaussian draws (``exact.discrete_gaussian``) taken from a pre-filled pool."""
    return _pool("dgauss", sigma2, lambda m: exact.discrete_gaussian(sigma2, m)).take(n)


def clear() -> None:
    """Drop every pool (tests use it after installing a deterministic entropy source)."""
    with _registry_lock:
        _pools.clear()


def _forget_after_fork() -> None:
    """A forked child must not release the noise its parent pre-drew (it would repeat the parent's)."""
    global _registry_lock
    _pools.clear()
    _registry_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
