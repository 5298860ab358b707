"""The docs run as tests: every fenced code block in README.md and docs/**/*.md runs, or says why not.

Each page runs in order, in one fresh temporary directory (its working directory), so a page's later
blocks see the files its earlier blocks wrote:

- ```python blocks run with ``exec`` in one namespace per page; a traceback names the page and the
  line of the Markdown file.
- ```bash / ```sh / ```console / ```shell blocks run their commands with ``subprocess``: in a
  transcript (lines starting with ``$ ``) only those lines, the others being output; else every line.
  A trailing ``\\`` continues a command. ``dpsense ...`` runs the venv's ``dpsense``, ``python ...``
  this interpreter; any other command fails the test (mark its block illustrative). Each must exit 0.
- Other blocks (```yaml, ```json, ```sql, ```text, unlabelled) are data and do not run.

Markers, HTML comments on the line before a block (blank lines between are allowed):

- ``<!-- illustrative -->``: the block cannot run here (a PostgreSQL URL, a Spark cluster, an HTTP
  call to a running service, pseudo-code, ``pip``/``make``). Python ones must still parse.
- ``<!-- file: NAME -->``: the block's text is written to NAME in the page's directory when reached
  (a YAML spec or privacy policy that a later command reads); it does not run.

And one marker that stands alone:

- ``<!-- setup: health_events -->``: from here on the page's Python blocks see ``dp``, ``np``, ``pd``,
  ``policy``, ``steward`` (a steward Session), ``session`` (analyst alice's Session) and ``events``
  (its handle on ``health_events``): the quickstart's data and registration with its amendment (one
  region per person; see ``_health_events``), an ``income`` column and a budget that allows δ > 0.

Releases draw from the OS CSPRNG: every DPSENSE_* variable, DPSENSE_ALLOW_TEST_ENTROPY included, is
removed from the environment (the test process's and the commands'), and nothing here compares a noisy
value.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
DPSENSE = Path(sys.executable).parent / "dpsense"

PYTHON = {"python", "py", "python3"}
SHELL = {"bash", "sh", "console", "shell", "shell-session", "zsh"}

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[^\s`]*)")
MARKER = re.compile(r"^\s*<!--\s*(?P<kind>illustrative|file|setup)\s*(?::\s*(?P<arg>\S+))?\s*-->\s*$")
COMMAND_TIMEOUT = 120


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, text, the Markdown line of its first text line, its marker."""

    lang: str
    text: str
    line: int
    marker: str | None = None
    arg: str | None = None


@dataclass(frozen=True)
class Setup:
    """A standalone ``<!-- setup: NAME -->`` marker at a Markdown line."""

    name: str
    line: int


def parse(path: Path) -> list[Block | Setup]:
    """The page's blocks and setup markers, in order; a marker must stand right before its block."""
    steps: list[Block | Setup] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    pending: tuple[str, str | None, int] | None = None
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if opened is None:
            marker = MARKER.match(lines[i])
            if marker is not None and marker["kind"] == "setup":
                steps.append(Setup(str(marker["arg"]), i + 1))
            elif marker is not None:
                if pending is not None:
                    raise ValueError(f"{path}:{pending[2]}: a marker without a block after it")
                pending = (marker["kind"], marker["arg"], i + 1)
            elif lines[i].strip() and pending is not None:
                raise ValueError(f"{path}:{pending[2]}: a marker not directly before a block")
            i += 1
            continue
        indent, fence = opened["indent"], opened["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.match(rf"^[ \t]*{re.escape(fence)}[ \t]*$", lines[j]):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        if j == len(lines):
            raise ValueError(f"{path}:{i + 1}: an unclosed code fence")
        kind, arg = (pending[0], pending[1]) if pending else (None, None)
        steps.append(Block(opened["lang"].lower(), "\n".join(body) + "\n", i + 2, kind, arg))
        pending = None
        i = j + 1
    if pending is not None:
        raise ValueError(f"{path}:{pending[2]}: a marker without a block after it")
    return steps


def commands(block: Block) -> Iterator[tuple[int, str]]:
    """The commands of a shell block with their Markdown lines, continuation lines joined."""
    transcript = any(line.startswith("$ ") for line in block.text.splitlines())
    current: list[str] = []
    start = 0
    for offset, raw in enumerate(block.text.splitlines()):
        line = raw.rstrip()
        if not current:
            if transcript:
                if not line.startswith("$ "):
                    continue  # output
                line = line[2:]
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            start = block.line + offset
        elif transcript and line.startswith("> "):
            line = line[2:]
        if line.endswith("\\"):
            current.append(line[:-1])
            continue
        current.append(line)
        yield start, " ".join(part.strip() for part in current)
        current = []
    if current:
        yield start, " ".join(part.strip() for part in current)


def argv(command: str, where: str) -> list[str]:
    """The command as an argument list for the venv's ``dpsense`` or this interpreter."""
    words = shlex.split(command, comments=True)
    if words and words[0] == "dpsense":
        return [str(DPSENSE), *words[1:]]
    if words and words[0] in {"python", "python3"}:
        return [sys.executable, *words[1:]]
    pytest.fail(
        f"{where}: `{command}` is not a dpsense or python command: mark its block <!-- illustrative -->", pytrace=False
    )


def command_env() -> dict[str, str]:
    """The user's environment without dpsense settings and without the test entropy hook."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPSENSE_")}
    env["COLUMNS"] = "200"
    if not any(env.get(k) for k in ("LOGNAME", "USER", "LNAME", "USERNAME")):
        env["USER"] = "steward"  # the CLI's default analyst is the OS user; a bare CI container may have none
    return env


def _health_events(ns: dict[str, Any], stack: list[Callable[[], object]]) -> None:
    """The quickstart's steps 1, 2 and 5 (1000 persons, an ``income`` column, δ allowed), sessions open."""
    import numpy as np
    import pandas as pd

    import dpsense as dp

    rng = np.random.default_rng(1)
    persons = 1000
    region = rng.choice(["north", "south", "east", "west"], size=persons)
    age = rng.integers(18, 95, size=persons)
    income = np.round(rng.lognormal(10.5, 0.6, size=persons), 2)
    person = np.repeat(np.arange(persons), 1 + rng.geometric(1 / 10, size=persons))
    pd.DataFrame(
        {
            "person_id": [f"p{p}" for p in person],
            "region": region[person],
            "age": age[person],
            "income": income[person],
            "hours": np.round(rng.gamma(2.0, 2.5, size=person.size), 2),
        }
    ).to_parquet("events.parquet", index=False)
    policy = dp.PrivacyPolicy(
        protected="a person: every event they logged",
        population=1_000_000,
        planned_releases=12,
        release_window="2026-12-01/2027-11-30",
        delta_rationale="δ = 1e-8 for the Gaussian examples, far below 1/population",
        per_release_epsilon=1.0,
        attacker_knowledge="everything except one person's events",
        minimum_useful_accuracy="counts within ±50 per region",
        approved_by="data steward",
        approved_on="2026-11-29",
        next_review="2027-05-29",
    )
    steward = dp.Session.open("sqlite:///ledger.db", analyst="steward", role="steward")
    stack.append(steward.close)
    steward.register_dataset(
        "health_events",
        source="events.parquet",
        privacy_unit="person_id",
        bounds={"hours": (0, 24), "age": (0, 120)},
        keys={"region": ["north", "south", "east", "west"]},
        max_rows_per_unit=30,
        max_groups_per_unit={"region": 1},
        budget=dp.Budget(epsilon=10, delta=1e-8),
        policy=policy,
    )
    steward.add_analyst("alice")
    session = dp.Session.open("sqlite:///ledger.db", analyst="alice")
    stack.append(session.close)
    events = session.dataset("health_events")
    ns.update(dp=dp, np=np, pd=pd, policy=policy, steward=steward, session=session, events=events)


SETUPS: dict[str, Callable[[dict[str, Any], list[Callable[[], object]]], None]] = {"health_events": _health_events}


def run_python(block: Block, ns: dict[str, Any], page: str) -> None:
    """Exec the block in the page's namespace, its lines numbered as in the Markdown file."""
    code = compile("\n" * (block.line - 1) + block.text, str(ROOT / page), "exec")
    exec(code, ns)


def run_shell(block: Block, page: str, cwd: Path) -> None:
    for line, command in commands(block):
        where = f"{page}:{line}"
        done = subprocess.run(
            argv(command, where),
            cwd=cwd,
            env=command_env(),
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
        if done.returncode != 0:
            pytest.fail(
                f"{where}: `{command}` exited {done.returncode}\n--- stdout\n{done.stdout}--- stderr\n{done.stderr}",
                pytrace=False,
            )


@pytest.mark.parametrize("path", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = str(path.relative_to(ROOT))
    for name in [k for k in os.environ if k.startswith("DPSENSE_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    ns: dict[str, Any] = {"__name__": "__docs__"}
    stack: list[Callable[[], object]] = []
    try:
        for step in parse(path):
            if isinstance(step, Setup):
                assert step.name in SETUPS, f"{page}:{step.line}: unknown setup {step.name!r}"
                assert "events" not in ns, f"{page}:{step.line}: one setup per page"
                SETUPS[step.name](ns, stack)
            elif step.marker == "illustrative":
                if step.lang in PYTHON:
                    ast.parse(step.text, filename=f"{page}:{step.line}")
            elif step.marker == "file":
                assert step.arg, f"{page}:{step.line}: <!-- file: NAME --> needs a name"
                (tmp_path / step.arg).write_text(step.text, encoding="utf-8")
            elif step.lang in PYTHON:
                run_python(step, ns, page)
            elif step.lang in SHELL:
                run_shell(step, page, tmp_path)
    finally:
        for close in reversed(stack):
            close()


def test_parse_reads_markers_and_transcripts(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Text.\n\n<!-- setup: health_events -->\n```python\nx = 1\n```\n\n<!-- illustrative -->\n\n"
        "```sh\nmake demo\n```\n<!-- file: spec.yaml -->\n```yaml\na: 1\n```\n"
        '```console\n$ dpsense sql "SELECT 1" \\\n    --epsilon 0.5   # a comment\noutput \\\n$ python -V\n```\n',
        encoding="utf-8",
    )
    setup, code, make, spec, console = parse(page)
    assert setup == Setup("health_events", 3)
    assert code == Block("python", "x = 1\n", 5)
    assert isinstance(make, Block) and isinstance(spec, Block) and isinstance(console, Block)
    assert (make.marker, spec.marker, spec.arg, spec.text) == ("illustrative", "file", "spec.yaml", "a: 1\n")
    assert list(commands(console)) == [(18, 'dpsense sql "SELECT 1" --epsilon 0.5   # a comment'), (21, "python -V")]
    assert argv('dpsense sql "SELECT 1" --epsilon 0.5   # a comment', "here")[1:] == [
        "sql",
        "SELECT 1",
        "--epsilon",
        "0.5",
    ]


@pytest.mark.parametrize("text", ["<!-- illustrative -->\nText.\n```sh\nx\n```\n", "<!-- illustrative -->\n"])
def test_parse_refuses_a_stray_marker(tmp_path: Path, text: str) -> None:
    page = tmp_path / "page.md"
    page.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="marker"):
        parse(page)


def test_quickstart_holds_the_new_user_session() -> None:
    """The transcript the issue asks for is there and is run as commands, not skipped as data."""
    run = [
        command
        for step in parse(ROOT / "docs" / "quickstart.md")
        if isinstance(step, Block) and step.marker is None and step.lang in SHELL
        for _, command in commands(step)
    ]
    assert any(c.startswith("dpsense dataset add ") and "--create" in c and "--steward" in c for c in run)
    assert "dpsense analyst add alice --steward" in run
    sql = [c for c in run if c.startswith("dpsense sql ")]
    assert len(sql) == 2 and sql[0] == sql[1]
    assert any(c.startswith("dpsense budget health_events") for c in run)
