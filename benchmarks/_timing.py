"""Helpers the release benchmarks share: an engine wrapper that times its calls, size labels, memory."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
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


def high_water_rss_mib() -> float:
    """This process's peak resident memory since its ``exec`` (Linux: VmHWM of /proc/self/status).

    Unlike ``peak_rss_mib`` (``ru_maxrss``), a child started from a large parent does not inherit the
    parent's peak.
    """
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return peak_rss_mib()


def current_rss_mib() -> float:
    """This process's resident memory now (Linux: /proc/self/statm)."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def best_of(repeats: int, *runs: Callable[[], object]) -> list[float]:
    """The best time of each run over ``repeats`` rounds, after one warm-up round.

    The runs alternate within a round, so that a load change on the machine hits a measurement and
    its baseline alike and the ratio stays fair.
    """
    for run in runs:
        run()
    best = [float("inf")] * len(runs)
    for _ in range(repeats):
        for i, run in enumerate(runs):
            start = time.perf_counter()
            run()
            best[i] = min(best[i], time.perf_counter() - start)
    return best
