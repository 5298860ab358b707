"""Helpers the release benchmarks share: an engine wrapper that times its calls, size labels, memory."""

from __future__ import annotations

import resource
import time
from typing import Any


class TimedEngine:
    """An engine that adds up the seconds spent in its calls (to split a release's time)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr) or name == "release_scope":
            return attr

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return timed


def label(rows: int) -> str:
    """``1e7`` for 10**7, else the number."""
    exponent = len(str(rows)) - 1
    return f"1e{exponent}" if rows == 10**exponent else str(rows)


def peak_rss_mib() -> float:
    """This process's peak resident memory so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
