"""What every command of the ``dpsense`` CLI shares: its options, its consoles and how it opens a Session.

``_command`` gives a command its two consoles (results on stdout, progress and errors on stderr) and
turns a ``DPSenseError`` into one red line and an exit code; ``_session`` opens a Session on the chosen
engine; ``_require_ledger`` refuses a SQLite ledger file that does not exist unless ``--create``. The
commands live in ``_datasets``, ``_steward``, ``_releases`` and ``_ledger_log``; ``_app`` assembles them.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from dpsense.cli._engine import EngineChoice, EngineName, open_engine
from dpsense.cli._errors import exit_code, print_error
from dpsense.core.errors import DPSenseError, LedgerUnreadable, UsageError

if TYPE_CHECKING:  # imported by the commands that use them, when they run
    from dpsense.ledger import Ledger
    from dpsense.release import Session

DEFAULT_LEDGER = "sqlite:///dpsense.db"
_POSTGRES = ("postgresql://", "postgres://")
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report an interrupted command
_WIDE = 160  # columns for tables when stdout is not a terminal and COLUMNS is unset


LedgerOpt = Annotated[
    str, typer.Option("--ledger", envvar="DPSENSE_LEDGER", help="Ledger URL: sqlite:///path.db or postgresql://...")
]
AnalystOpt = Annotated[
    str | None, typer.Option("--analyst", envvar="DPSENSE_ANALYST", help="Who asks [default: the OS user].")
]
StewardOpt = Annotated[bool, typer.Option("--steward", help="Act as the data steward (role 'steward').")]
StoreOpt = Annotated[
    Path | None,
    typer.Option(
        "--store",
        envvar="DPSENSE_STORE",
        file_okay=False,
        metavar="DIR",
        help="Where registered snapshots are kept checked, so attaching one reads no source again "
        "[default: <ledger file>.store beside a SQLite ledger; none for PostgreSQL].",
    ),
]
CreateOpt = Annotated[
    bool,
    typer.Option("--create", help="Start a new ledger if the SQLite file does not exist (else that is an error)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
CsvOpt = Annotated[bool, typer.Option("--csv", help="Print CSV on stdout.")]
SpecArg = Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="The release spec (YAML).")]
EngineOpt = Annotated[
    EngineName | None,
    typer.Option("--engine", envvar="DPSENSE_ENGINE", help="Where the data is read: duckdb (default) or spark."),
]
SparkMasterOpt = Annotated[
    str | None,
    typer.Option(
        "--spark-master",
        envvar="DPSENSE_SPARK_MASTER",
        help="With --engine spark: local[N], spark://HOST:PORT, yarn, k8s://... [default: local[2]].",
    ),
]
SparkCollectLimitOpt = Annotated[
    int | None,
    typer.Option(
        "--spark-collect-limit",
        envvar="DPSENSE_SPARK_COLLECT_LIMIT",
        metavar="N",
        help="With --engine spark: a public bound on rows collected to the driver [default: 1000000].",
    ),
]


class AdjacencyChoice(str, Enum):
    """The declared adjacency of a dataset."""

    ADD_REMOVE = "add_remove"
    REPLACE = "replace"


@dataclass(frozen=True)
class _IO:
    """Where a command writes: ``out`` for results (stdout), ``err`` for progress and errors (stderr)."""

    out: Console
    err: Console

    def document(self, text: str) -> None:
        """One machine-readable document on stdout."""
        typer.echo(text, nl=not text.endswith("\n"))


@contextmanager
def _command() -> Iterator[_IO]:
    """The consoles of one command; a ``DPSenseError`` becomes one red line and its exit code."""
    wide = None if os.environ.get("COLUMNS") else _WIDE
    stdout = Console(highlight=False)
    io = _IO(stdout if stdout.is_terminal else Console(highlight=False, width=wide), Console(stderr=True))
    try:
        yield io
    except DPSenseError as exc:
        print_error(io.err, str(exc))
        raise typer.Exit(exit_code(exc)) from None
    except KeyboardInterrupt:
        print_error(
            io.err,
            "interrupted: the command stopped where it was (a registration writes the ledger last, so an "
            "interrupted one registered nothing; a release that had read data stays charged, see history)",
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None


@contextmanager
def _session(
    ledger: str,
    analyst: str | None,
    steward: bool,
    engine: EngineChoice | None = None,
    *,
    store: Path | None = None,
    create: bool | None = None,
) -> Iterator[Session]:
    """A Session on the chosen engine (DuckDB unless told); the engine is closed after the Session.

    ``store``: the ``--store`` directory (``None``: the Session's default). ``create``: the command's
    ``--create`` flag, or ``None`` for a command that has none (it never starts a ledger).
    """
    from dpsense.release import Session

    who, role = analyst or _os_user(), "steward" if steward else "analyst"
    _require_ledger(ledger, create)
    with (
        open_engine(engine or EngineChoice()) as built,
        Session.open(ledger, analyst=who, role=role, engine=built, store=True if store is None else store) as s,
    ):
        yield s


@contextmanager
def _steward_ledger(ledger: str, steward: bool, what: str) -> Iterator[Ledger]:
    """The ledger itself, opened for a steward command that needs no Session (tokens)."""
    from dpsense.ledger import Ledger

    _require_steward(steward, what)
    _require_ledger(ledger, None)
    with Ledger.open(ledger) as opened:
        yield opened


def _require_ledger(ledger: str, create: bool | None) -> None:
    """Refuse a SQLite ledger file that does not exist unless ``create``: a mistyped URL starts no ledger."""
    if ledger.startswith(_POSTGRES):
        return
    from dpsense.ledger._backends import sqlite_path

    path = sqlite_path(ledger)  # refuses other schemes and memory databases
    if os.path.exists(path):
        return
    if not create:
        fix = (
            "check --ledger (or DPSENSE_LEDGER), or pass --create to start a new ledger"
            if create is not None
            else "check --ledger (or DPSENSE_LEDGER); a new ledger starts with `dpsense dataset add ... --create`"
        )
        raise LedgerUnreadable("the ledger file does not exist", path, fix)
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise UsageError("a new ledger's folder must exist", folder, "check --ledger, or create the folder first")


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        raise UsageError("cannot tell who is asking", None, "pass --analyst NAME or set DPSENSE_ANALYST") from None


def _require_steward(steward: bool, what: str) -> None:
    if not steward:
        raise UsageError(f"only the data steward may {what}", "role=analyst", "run it as the steward: add --steward")


def _format(as_json: bool, as_csv: bool) -> str:
    if as_json and as_csv:
        raise UsageError("--json and --csv print one document each", "--json --csv", "pick one of them")
    return "json" if as_json else "csv" if as_csv else "human"


def _pairs(flag: str, items: list[str] | None) -> list[tuple[str, str]]:
    """``["n=50"]`` -> ``[("n", "50")]`` for a NAME=VALUE option (a malformed item names the flag)."""
    pairs = []
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise UsageError(f"{flag} takes NAME=VALUE", item, f"write e.g. {flag} n=50")
        pairs.append((name.strip(), value.strip()))
    return pairs
