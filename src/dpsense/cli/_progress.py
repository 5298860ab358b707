"""A progress bar on stderr for the Session's long calls (registration, release) that take over a second.

The bar is fed by the Session's ``progress(stage, done, total)`` callback (public stage names only:
``dpsense.release._progress``). It appears only once a call has run for ``DELAY`` seconds, on a
terminal only, and leaves no trace when it ends. On a pipe or a file nothing is drawn: rich would
draw no bar there but would still end the bar with a blank line, before the command's own output.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from dpsense.release._progress import Progress as ProgressCallback

#: Seconds a call runs before its bar appears.
DELAY = 1.0


def _ignore(stage: str, done: int, total: int) -> None:
    """The callback when stderr is not a terminal: nothing is drawn."""


@contextmanager
def progress_bar(console: Console, title: str, *, delay: float = DELAY) -> Iterator[ProgressCallback]:
    """A callback for ``progress=`` that draws ``title: stage [bar] done/total elapsed`` after ``delay`` s."""
    if not console.is_terminal:
        yield _ignore
        return
    bar = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    task = bar.add_task(title, total=None)
    started = threading.Event()
    lock = threading.Lock()

    def show() -> None:
        with lock:
            if not started.is_set():
                bar.start()
                started.set()

    def update(stage: str, done: int, total: int) -> None:
        bar.update(task, description=f"{title}: {stage}", completed=done, total=total)

    timer = threading.Timer(delay, show)
    timer.daemon = True
    timer.start()
    try:
        yield update
    finally:
        timer.cancel()
        with lock:
            if started.is_set():
                bar.stop()
            started.set()  # a late timer shows nothing
