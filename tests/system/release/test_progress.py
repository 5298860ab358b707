"""Progress of registration and release: stage names in order, done counts rising to the total, no data.

The CLI's bar (``dpsense.cli._progress``) draws these stages on a terminal once a call has run for a
second; the stages are public words, so a bar shows nothing a release does not.
"""

from __future__ import annotations

import io
import time
from pathlib import Path

from rich.console import Console

import dpsense as dp
from dpsense.cli._progress import progress_bar
from tests.system.release.support import planted, register


def _recorder() -> tuple[list[tuple[str, int, int]], object]:
    seen: list[tuple[str, int, int]] = []
    return seen, lambda stage, done, total: seen.append((stage, done, total))


def _rising_to_the_end(seen: list[tuple[str, int, int]]) -> None:
    dones = [d for _, d, _ in seen]
    assert dones == sorted(dones) and dones[0] == 0
    assert {t for _, _, t in seen} == {seen[0][2]} and seen[-1][1] == seen[-1][2]


def test_registration_and_release_report_their_stages(tmp_path: Path) -> None:
    frame = planted()
    with dp.Session.open(f"sqlite:///{tmp_path / 'ledger.db'}", analyst="steward", role="steward") as steward:
        seen, callback = _recorder()
        events = register(steward, frame, progress=callback)
        _rising_to_the_end(seen)
        assert [s for s, _, _ in seen] == [
            "copying the source",
            "checking the data",
            "computing the keyed fingerprint",
            "applying the policies and indexing the units",
            "storing the checked snapshot",
            "registered",
        ]
        query = events.query().group_by("region").agg(n=dp.count(), m=dp.mean("hours"))
        seen, callback = _recorder()
        steward.release(query, epsilon=1, progress=callback)  # type: ignore[arg-type]
        _rising_to_the_end(seen)
        assert [s for s, _, _ in seen] == [
            "charging the ledger",
            "reading the bounded rows",
            "releasing 'n'",  # in the order the plan runs them: by meaning, count() before mean(hours)
            "releasing 'm'",
            "committing the release",
            "released",
        ]
        seen, callback = _recorder()
        steward.release(query, epsilon=1, progress=callback)  # type: ignore[arg-type]
        assert [s for s, _, _ in seen][-1] == "the stored release (no new charge)"
        _rising_to_the_end(seen)
        text = repr(seen)
        for value in (frame["hours"].sum(), len(frame), frame["hours"].mean()):
            assert repr(float(value)) not in text and str(value) not in text


def _terminal() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=True, width=120), buffer


def test_the_cli_bar_draws_after_its_delay_and_not_before() -> None:
    console, buffer = _terminal()
    with progress_bar(console, "registering 'events'", delay=0.0) as progress:
        time.sleep(0.2)
        progress("checking the data", 1, 4)
        time.sleep(0.3)
    assert "registering 'events': checking the data" in buffer.getvalue() and "1/4" in buffer.getvalue()

    console, buffer = _terminal()
    with progress_bar(console, "releasing", delay=5.0) as progress:
        progress("charging the ledger", 0, 3)
    assert "releasing" not in buffer.getvalue()  # a call under the delay draws nothing


def test_the_cli_bar_leaves_nothing_on_a_pipe() -> None:
    """Off a terminal no bar is drawn, and no blank line is left before the command's own line.

    rich draws no bar on a pipe but ended one with a newline, so a slow refusal's stderr began with a
    blank line instead of ``error:`` (a CI failure of the CLI's hostile-input corpus, under load).
    """
    buffer = io.StringIO()
    console = Console(file=buffer, width=120)
    assert not console.is_terminal
    with progress_bar(console, "releasing", delay=0.0) as progress:
        time.sleep(0.2)
        progress("charging the ledger", 1, 3)
    console.print("error: refused", soft_wrap=True)
    assert buffer.getvalue() == "error: refused\n"
