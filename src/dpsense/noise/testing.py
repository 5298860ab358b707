"""Test-only hook: a deterministic entropy source for reproducible tests.

Never used by product code. ``deterministic_entropy(seed)`` refuses to install itself unless the
environment sets ``DPSENSE_ALLOW_TEST_ENTROPY=1`` (the test suite's conftest does), and while it is
installed ``dpsense.noise.entropy.is_test_source_active()`` is true so release paths can refuse.
The stream is SHAKE-256 of the seed and a counter: reproducible, not secret.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager

from dpsense.core.errors import UnsupportedRequest
from dpsense.noise import entropy, pool

ENV_FLAG = "DPSENSE_ALLOW_TEST_ENTROPY"


class DeterministicEntropy:
    """A reproducible byte stream (SHAKE-256 in counter mode). For tests only."""

    def __init__(self, seed: int) -> None:
        self._seed = seed.to_bytes(16, "little", signed=True)
        self._counter = 0

    def read(self, n_bytes: int) -> bytes:
        """The next ``n_bytes`` of the stream."""
        self._counter += 1
        return hashlib.shake_256(self._seed + self._counter.to_bytes(8, "little")).digest(n_bytes)


@contextmanager
def deterministic_entropy(seed: int) -> Iterator[None]:
    """Install a deterministic source for the duration of the block (tests only)."""
    if os.environ.get(ENV_FLAG) != "1":
        raise UnsupportedRequest(
            "a deterministic entropy source may only be installed in tests",
            os.environ.get(ENV_FLAG),
            f"set {ENV_FLAG}=1 in the test environment; never in production",
        )
    entropy._install(DeterministicEntropy(seed))
    pool.clear()  # pools filled from the OS source would make the block irreproducible
    try:
        yield
    finally:
        entropy._install(None)
        pool.clear()  # never let deterministic noise outlive the block
