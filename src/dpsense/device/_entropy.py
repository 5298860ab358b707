"""The device's one source of randomness: the platform CSPRNG (``os.urandom``), standard library only.

Clients read bytes only through ``read``. Reads are batched (``BATCH_BYTES``) and the batch is dropped
in a forked child, so two processes never share random bytes. A deterministic source can be installed
only through ``dpsense.device.testing``, which refuses unless ``DPSENSE_ALLOW_TEST_ENTROPY=1``.
"""

from __future__ import annotations

import os
import threading
from typing import Protocol

#: Bytes read from the OS per refill of the buffer.
BATCH_BYTES = 1 << 12


class ByteSource(Protocol):
    """Anything that yields uniform random bytes."""

    def read(self, n_bytes: int) -> bytes:
        """Return ``n_bytes`` uniform random bytes."""
        ...


class _OsBytes:
    """Batched, thread-safe reads from ``os.urandom`` (getrandom(2) on Linux)."""

    def __init__(self) -> None:
        self._buffer = b""
        self._lock = threading.Lock()

    def read(self, n_bytes: int) -> bytes:
        if n_bytes >= BATCH_BYTES:
            return os.urandom(n_bytes)
        with self._lock:
            if len(self._buffer) < n_bytes:
                self._buffer = os.urandom(BATCH_BYTES)
            out, self._buffer = self._buffer[:n_bytes], self._buffer[n_bytes:]
            return out

    def forget(self) -> None:
        """Drop the buffer (in a forked child, which must never reuse its parent's bytes)."""
        self._buffer = b""
        self._lock = threading.Lock()


_OS = _OsBytes()
_active: ByteSource = _OS
os.register_at_fork(after_in_child=_OS.forget)


def install(source: ByteSource | None) -> None:
    """Swap the active source (None restores the OS CSPRNG). Only ``dpsense.device.testing`` calls it."""
    global _active
    _active = _OS if source is None else source


def is_test_source_active() -> bool:
    """True while a deterministic test source is installed."""
    return _active is not _OS


def read(n_bytes: int) -> bytes:
    """``n_bytes`` uniform random bytes from the active source."""
    return _active.read(n_bytes)
