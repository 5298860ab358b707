"""The entropy source: uniform random words from the operating system's CSPRNG.

This module is the root of all randomness in dpsense. Product code reads words only through
``words()``; the source behind it is ``os.urandom`` (getrandom(2) on Linux), read in batches of
``BATCH_BYTES`` so that small requests do not pay one system call each. The batch is dropped in a
forked child (``os.register_at_fork``) so parent and child never share random bytes.

A deterministic source can be installed only through ``dpsense.noise.testing``, which refuses
unless the process sets ``DPSENSE_ALLOW_TEST_ENTROPY=1``; ``is_test_source_active()`` lets every
release path refuse to run while one is installed.
"""

from __future__ import annotations

import os
import threading
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

#: Bytes read from the OS per refill of the small-request buffer.
BATCH_BYTES = 1 << 16


class EntropySource(Protocol):
    """Anything that yields uniform random bytes."""

    def read(self, n_bytes: int) -> bytes:
        """Return ``n_bytes`` uniform random bytes."""
        ...


class OsEntropy:
    """Batched reads from the OS CSPRNG (``os.urandom``). Thread-safe."""

    def __init__(self) -> None:
        self._buffer = b""
        self._lock = threading.Lock()

    def read(self, n_bytes: int) -> bytes:
        """Return ``n_bytes`` uniform bytes; large requests bypass the buffer."""
        if n_bytes >= BATCH_BYTES:
            return os.urandom(n_bytes)
        with self._lock:
            if len(self._buffer) < n_bytes:
                self._buffer = os.urandom(BATCH_BYTES)
            out, self._buffer = self._buffer[:n_bytes], self._buffer[n_bytes:]
            return out

    def _forget(self) -> None:
        """Drop buffered bytes (called in a forked child, which must never reuse its parent's bytes)."""
        self._buffer = b""
        self._lock = threading.Lock()


_OS_SOURCE = OsEntropy()
_active: EntropySource = _OS_SOURCE

# A forked child inherits the parent's buffer: without this it would hand out the very bytes the
# parent hands out next (identical noise in two processes).
os.register_at_fork(after_in_child=_OS_SOURCE._forget)


def _install(source: EntropySource | None) -> None:
    """Swap the active source (``None`` restores the OS CSPRNG). Only ``dpsense.noise.testing`` calls it."""
    global _active
    _active = _OS_SOURCE if source is None else source


def is_test_source_active() -> bool:
    """True while a deterministic test source is installed; release paths must refuse then."""
    return _active is not _OS_SOURCE


def words(n: int) -> NDArray[np.uint64]:
    """``n`` independent uniform 64-bit words."""
    return np.frombuffer(_active.read(8 * n), dtype=np.uint64)


def words32(n: int) -> NDArray[np.uint32]:
    """``n`` independent uniform 32-bit words."""
    return np.frombuffer(_active.read(4 * n), dtype=np.uint32)


def words16(n: int) -> NDArray[np.uint16]:
    """``n`` independent uniform 16-bit words."""
    return np.frombuffer(_active.read(2 * n), dtype=np.uint16)


def random_bytes(n: int) -> bytes:
    """``n`` uniform bytes (for secrets such as salts)."""
    return _active.read(n)
