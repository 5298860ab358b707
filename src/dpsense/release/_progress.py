"""Progress of a long Session call, for a front end's progress bar: stage names and counts only.

A callback ``progress(stage, done, total)`` is called as each stage starts (``done`` stages of
``total`` finished) and once more with ``done == total`` at the end. Stages are public words (the
registration's steps, an aggregate's output name), never a count of rows or anything read from the
data, so a progress bar leaks nothing a release does not already show.
"""

from __future__ import annotations

from collections.abc import Callable

#: ``progress(stage, done, total)``.
Progress = Callable[[str, int, int], None]

#: The stages of ``Session.register_dataset`` (each one a scan of the data, except the last's index).
REGISTRATION_STAGES = (
    "copying the source",
    "checking the data",
    "computing the keyed fingerprint",
    "applying the policies and indexing the units",
    "storing the checked snapshot",
)


def no_progress(stage: str, done: int, total: int) -> None:
    """The default: report nothing."""


def release_stages(outputs: list[str]) -> list[str]:
    """The stages of ``Session.release``: charge, read the bounded rows, one per aggregate, commit."""
    return [
        "charging the ledger",
        "reading the bounded rows",
        *(f"releasing {name!r}" for name in outputs),
        "committing the release",
    ]
