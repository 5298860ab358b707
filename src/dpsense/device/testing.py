"""Test-only hook: a deterministic byte source for the device clients (reproducible tests).

Never used by product code. ``deterministic_entropy(seed)`` refuses unless the environment sets
``DPSENSE_ALLOW_TEST_ENTROPY=1`` (the test suite's conftest does); while it is installed
``is_test_source_active()`` is true. The stream is SHAKE-256 of the seed and a counter: reproducible,
not secret. It mirrors ``dpsense.noise.testing`` without importing it (the device package is
standard-library only).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager

from dpsense.device import _entropy

ENV_FLAG = "DPSENSE_ALLOW_TEST_ENTROPY"

__all__ = ["ENV_FLAG", "deterministic_entropy", "is_test_source_active"]


class _ShakeStream:
    def __init__(self, seed: int) -> None:
        self._seed = b"dpsense-device" + seed.to_bytes(16, "little", signed=True)
        self._counter = 0

    def read(self, n_bytes: int) -> bytes:
        self._counter += 1
        return hashlib.shake_256(self._seed + self._counter.to_bytes(8, "little")).digest(n_bytes)


@contextmanager
def deterministic_entropy(seed: int) -> Iterator[None]:
    """Install a deterministic byte source for the duration of the block (tests only).

    Raises:
        PermissionError: the environment does not set DPSENSE_ALLOW_TEST_ENTROPY=1.

    """
    if os.environ.get(ENV_FLAG) != "1":
        raise PermissionError(
            f"a deterministic entropy source may only be installed in tests (got {ENV_FLAG}="
            f"{os.environ.get(ENV_FLAG)!r}). Fix: set {ENV_FLAG}=1 in the test environment; never in production"
        )
    _entropy.install(_ShakeStream(seed))
    try:
        yield
    finally:
        _entropy.install(None)


def is_test_source_active() -> bool:
    """True while a deterministic source is installed."""
    return _entropy.is_test_source_active()
