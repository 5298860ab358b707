"""The typer application: one short function per command, each a thin call into ``dpsense.release``.

Output rules: ``--json`` / ``--csv`` print exactly one document on stdout and nothing else there;
tables and lines for people go to stdout through rich; progress spinners and errors go to stderr.
Every ``DPSenseError`` becomes one red line on stderr and an exit code (see ``_errors``).

Start-up is kept cheap (``dpsense --help`` in a fraction of a second): this module imports typer, rich's
console and the light CLI modules only; a command imports what it runs (the Session and pandas, the
ledger, pydantic, the audits' scipy) when it runs. A help text that shows a file's lines as written
starts that paragraph with click's no-rewrap marker, a line holding only the backspace character: such
docstrings are not raw strings (hence ``noqa: D301``), since in a raw one the marker is a backslash
and a "b", which click prints and rewraps with the lines below it.

A SQLite ledger file that does not exist is refused (exit 5, nothing created) unless the command is
given ``--create`` (``dataset add``, ``analyst add``): a typo in ``--ledger`` must not start an empty
ledger. ``--store DIR`` (env ``DPSENSE_STORE``) names the snapshot store of every command that opens
a Session; without it the Session's default is used (``<ledger file>.store`` beside a SQLite ledger).
"""

from __future__ import annotations

import getpass
import math
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from dpsense._version import __version__
from dpsense.cli._audit import DEFAULT_SAMPLES
from dpsense.cli._engine import EngineChoice, EngineName, EngineSettings, choose_engine, open_engine
from dpsense.cli._errors import EXIT_TAMPERED, exit_code, print_error
from dpsense.cli._options import (
    KINDS,
    POLICIES,
    number_option,
    parse_bounds,
    parse_choices,
    parse_choices_by_value,
    parse_counts,
    parse_hierarchies,
    parse_keys,
    parse_steps,
    real_option,
)
from dpsense.core.errors import DPSenseError, LedgerUnreadable, UsageError

if TYPE_CHECKING:  # imported by the commands that use them, when they run
    from dpsense.ledger import Anchor, Ledger
    from dpsense.release import Session

DEFAULT_LEDGER = "sqlite:///dpsense.db"
_POSTGRES = ("postgresql://", "postgres://")
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report an interrupted command
_WIDE = 160  # columns for tables when stdout is not a terminal and COLUMNS is unset

app = typer.Typer(
    name="dpsense",
    help="Differentially private statistics: register data, release noisy answers, audit the ledger.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,  # a traceback's locals could hold data: never render them
    rich_markup_mode=None,
)
dataset_app = typer.Typer(help="Register datasets and verify their stored snapshots (steward).", no_args_is_help=True)
analyst_app = typer.Typer(help="Allow analysts to release (steward).", no_args_is_help=True)
app.add_typer(dataset_app, name="dataset")
app.add_typer(analyst_app, name="analyst")
token_app = typer.Typer(help="API tokens of the HTTP service (steward).", no_args_is_help=True)
app.add_typer(token_app, name="token")

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


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"dpsense {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Differentially private statistics: register data, release noisy answers, audit the ledger."""


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


@app.command()
def demo(
    directory: Annotated[Path, typer.Option("--dir", help="Where the data and the ledger go.")] = Path("build/demo"),
    persons: Annotated[int, typer.Option("--persons", min=1, help="How many synthetic persons.")] = 20_000,
) -> None:
    """Run the health-events demo: register synthetic data, release as 'alice'; run it twice to see the cache."""
    from dpsense.cli.demo import run_demo

    with _command() as io:
        run_demo(directory, persons, io.out, progress=io.err)


KindOpt = Annotated[list[str] | None, typer.Option("--kind", metavar="COL=KIND", help=" | ".join(KINDS))]
ColumnPolicyOpt = Annotated[list[str] | None, typer.Option("--policy", metavar="COL=POLICY", help=" | ".join(POLICIES))]
MaxRowsOpt = Annotated[int | None, typer.Option("--max-rows-per-unit", metavar="C")]
StepOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--step",
        metavar="COL=S",
        help="COL's values are recorded in steps of the decimal S (e.g. alcohol=0.01, income=1000): its "
        "medians and quantiles choose among the multiples of S.",
    ),
]


@dataset_app.command("add")
def dataset_add(
    name: Annotated[str, typer.Argument(help="The dataset's name.")],
    source: Annotated[
        str,
        typer.Option(
            "--source",
            help="CSV or Parquet file; with --engine spark also a Parquet directory, a URI (s3a://, hdfs://) "
            "or a catalog table name.",
        ),
    ],
    unit: Annotated[str, typer.Option("--unit", help="The privacy-unit column (whose data one guarantee covers).")],
    budget_epsilon: Annotated[str, typer.Option("--budget-epsilon", metavar="E", help="The total ε.")],
    privacy_policy: Annotated[
        Path, typer.Option("--privacy-policy", exists=True, dir_okay=False, help="The privacy policy (YAML).")
    ],
    budget_delta: Annotated[str, typer.Option("--budget-delta", metavar="D", help="The total δ.")] = "0",
    adjacency: Annotated[AdjacencyChoice, typer.Option("--adjacency")] = AdjacencyChoice.ADD_REMOVE,
    bound: Annotated[list[str] | None, typer.Option("--bound", metavar="COL=L:U", help="Public bounds.")] = None,
    typical: Annotated[
        list[str] | None,
        typer.Option(
            "--typical",
            metavar="COL=A:B",
            help="Where most values of COL lie, inside its --bound (a hint, not a bound): a mean or sum over "
            "bounds 8x wider than its power-of-two cover clips adaptively by default.",
        ),
    ] = None,
    keys: Annotated[list[str] | None, typer.Option("--keys", metavar="COL=a,b,c", help="Public keys.")] = None,
    step: StepOpt = None,
    kind: KindOpt = None,
    policy: ColumnPolicyOpt = None,
    max_rows_per_unit: MaxRowsOpt = None,
    max_groups: Annotated[
        list[str] | None,
        typer.Option("--max-groups", metavar="COL=K", help="At most K values of COL per unit (e.g. region=1)."),
    ] = None,
    hierarchy: Annotated[
        list[str] | None,
        typer.Option(
            "--hierarchy",
            metavar="NAME=LEVEL,LEVEL:LEAVES",
            help="A public hierarchy for census tables: its levels from the top down and a file of its leaves, "
            "one a line, values comma-separated in the levels' order (docs/census.md).",
        ),
    ] = None,
    snapshot: Annotated[str, typer.Option("--snapshot", help="The snapshot's name.")] = "v1",
    ledger: LedgerOpt = DEFAULT_LEDGER,
    create: CreateOpt = False,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    engine: EngineOpt = None,
    spark_master: SparkMasterOpt = None,
    spark_collect_limit: SparkCollectLimitOpt = None,
) -> None:
    """Register a dataset with its budget, public declarations and privacy policy (steward).

    A new SQLite ledger needs --create (the first registration starts it).

    The privacy policy file holds every field of dpsense.PrivacyPolicy:

    \b
        protected: "a person: every event they logged"
        population: 1000000          # a public upper bound on the privacy units
        planned_releases: 12
        release_window: 2026-12-01/2027-11-30
        delta_rationale: "pure ε-DP releases: δ = 0"
        per_release_epsilon: 1.0
        attacker_knowledge: "all but one person's events"
        minimum_useful_accuracy: "counts within ±50"
        approved_by: "the data steward"
        approved_on: 2026-11-29
        next_review: 2027-05-29
    """  # noqa: D301 (the \b line is click's no-rewrap marker: see the module docstring)
    from dpsense.cli import _output as out
    from dpsense.cli._progress import progress_bar
    from dpsense.cli._spec import load_policy
    from dpsense.release import Budget

    with _command() as io:
        _require_steward(steward, "register datasets")
        bounds = parse_bounds(bound or [])
        typical_ranges = parse_bounds(typical or [], flag="--typical")
        public_keys = parse_keys(keys or [])
        kinds = parse_choices("--kind", kind or [], KINDS, "location=point")
        policies = parse_choices("--policy", policy or [], POLICIES, "hours=clamp")
        group_caps = parse_counts("--max-groups", max_groups or [], "region=1")
        hierarchies = parse_hierarchies(hierarchy or [])
        total = (number_option("--budget-epsilon", budget_epsilon), number_option("--budget-delta", budget_delta))
        the_policy = load_policy(privacy_policy)
        choice = choose_engine(EngineSettings(engine, spark_master, spark_collect_limit))
        if choice.name is EngineName.DUCKDB and not Path(source).is_file():
            raise UsageError(
                "--source must be an existing CSV or Parquet file on the embedded engine",
                source,
                "check the path, or pass --engine spark for a directory, a URI or a table name",
            )
        with _session(ledger, analyst, steward, choice, store=store, create=create) as session:
            with progress_bar(io.err, f"registering {name!r}") as progress:
                dataset = session.register_dataset(
                    name,
                    source=source,
                    privacy_unit=unit,
                    budget=Budget(*total),
                    policy=the_policy,
                    adjacency=adjacency.value,
                    bounds=bounds,
                    keys=public_keys,
                    kinds=kinds,
                    policies=policies,
                    max_rows_per_unit=max_rows_per_unit,
                    max_groups_per_unit=group_caps,
                    typical=typical_ranges,
                    hierarchies=hierarchies or None,
                    steps=parse_steps(step or []),
                    snapshot=snapshot,
                    progress=progress,
                )
            status = session.budget(dataset.name)
        how = "same data as a registered snapshot: linked to its budget" if dataset.linked else "registered"
        io.out.print(f"dataset {dataset.name!r} snapshot {dataset.snapshot!r}: {how}", markup=False)
        io.out.print(out.profile_table(dataset.name, dataset.snapshot, dataset.profile))
        io.out.print(f"budget {out.loss_text(status.cap)}, spent {out.loss_text(status.spent)}", markup=False)


def _pairs(flag: str, items: list[str] | None) -> list[tuple[str, str]]:
    """``["n=50"]`` -> ``[("n", "50")]`` for a NAME=VALUE option (a malformed item names the flag)."""
    pairs = []
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise UsageError(f"{flag} takes NAME=VALUE", item, f"write e.g. {flag} n=50")
        pairs.append((name.strip(), value.strip()))
    return pairs


#: What ``dataset amend --remove`` can take away, by its flag's name.
_REMOVABLE = ("bound", "typical", "keys", "max-groups", "step")


@dataset_app.command("amend")
def dataset_amend(
    name: Annotated[str, typer.Argument(help="The dataset's name.")],
    bound: Annotated[list[str] | None, typer.Option("--bound", metavar="COL=L:U", help="New public bounds.")] = None,
    typical: Annotated[
        list[str] | None, typer.Option("--typical", metavar="COL=A:B", help="A new typical range of COL.")
    ] = None,
    keys: Annotated[list[str] | None, typer.Option("--keys", metavar="COL=a,b,c", help="New public keys.")] = None,
    step: StepOpt = None,
    kind: KindOpt = None,
    policy: ColumnPolicyOpt = None,
    max_rows_per_unit: MaxRowsOpt = None,
    max_groups: Annotated[
        list[str] | None, typer.Option("--max-groups", metavar="COL=K", help="At most K values of COL per unit.")
    ] = None,
    remove: Annotated[
        list[str] | None,
        typer.Option(
            "--remove",
            metavar="WHAT=COL",
            help=f"Take a declaration away: WHAT is one of {', '.join(_REMOVABLE)} (e.g. typical=hours).",
        ),
    ] = None,
    privacy_policy: Annotated[
        Path | None,
        typer.Option("--privacy-policy", exists=True, dir_okay=False, help="A new privacy policy (YAML)."),
    ] = None,
    source: Annotated[
        str | None, typer.Option("--source", help="The registered data, if it moved [default: the registered path].")
    ] = None,
    snapshot: Annotated[
        str | None, typer.Option("--snapshot", help="The new version's name [default: <snapshot>.2, .3, ...].")
    ] = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
) -> None:
    """Correct a registered dataset's declarations: a new version of its newest snapshot (steward).

    Name only what changes; every other declaration is kept. The registered data is read again and
    must be unchanged (changed data is a new snapshot: dataset add --snapshot). The new version spends
    the same budget; earlier releases keep the declarations they were made under. The privacy unit,
    adjacency and budget cannot be amended. Example:

    \b
        dpsense dataset amend events --max-groups region=1 --bound hours=0:48 --steward
    """  # noqa: D301 (the \b line is click's no-rewrap marker: see the module docstring)
    from dpsense.cli import _output as out
    from dpsense.cli._progress import progress_bar
    from dpsense.cli._spec import load_policy

    with _command() as io:
        _require_steward(steward, "amend datasets")
        removed = parse_choices_by_value("--remove", remove or [], _REMOVABLE, "typical=hours")
        bounds: dict[str, Any] = {**parse_bounds(bound or []), **dict.fromkeys(removed["bound"])}
        typical_ranges: dict[str, Any] = {
            **parse_bounds(typical or [], flag="--typical"),
            **dict.fromkeys(removed["typical"]),
        }
        public_keys: dict[str, Any] = {**parse_keys(keys or []), **dict.fromkeys(removed["keys"])}
        group_caps: dict[str, Any] = {
            **parse_counts("--max-groups", max_groups or [], "region=1"),
            **dict.fromkeys(removed["max-groups"]),
        }
        the_policy = None if privacy_policy is None else load_policy(privacy_policy)
        with (
            _session(ledger, analyst, steward, store=store) as session,
            progress_bar(io.err, f"amending {name!r}") as progress,
        ):
            dataset = session.amend_dataset(
                name,
                bounds=bounds,
                keys=public_keys,
                kinds=parse_choices("--kind", kind or [], KINDS, "location=point"),
                policies=parse_choices("--policy", policy or [], POLICIES, "hours=clamp"),
                typical=typical_ranges,
                steps={**parse_steps(step or []), **dict.fromkeys(removed["step"])},
                max_rows_per_unit=max_rows_per_unit,
                max_groups_per_unit=group_caps,
                policy=the_policy,
                source=source,
                snapshot=snapshot,
                progress=progress,
            )
        io.out.print(f"dataset {dataset.name!r} snapshot {dataset.snapshot!r}: amended", markup=False)
        for change in dataset.amended:
            io.out.print(f"  {change}", markup=False, soft_wrap=True)
        io.out.print(out.profile_table(dataset.name, dataset.snapshot, dataset.profile))


@dataset_app.command("verify")
def dataset_verify(
    name: Annotated[str, typer.Argument(help="The dataset's name.")],
    snapshot: Annotated[
        str | None, typer.Option("--snapshot", help="The registered snapshot [default: the latest].")
    ] = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
) -> None:
    """Re-read a dataset's stored snapshot file in full and check it against the ledger (steward).

    Attaching trusts a stored file while its identity (inode, size, times) is the recorded one; this
    re-computes its keyed checksum and checks its schema, reading every byte. Exit codes: 0 it is the
    registered snapshot; 1 it is missing or fails its check (nothing is lost: the next attach reads the
    source again and stores it anew); 2 bad input (an unknown dataset or snapshot); 5 no such ledger.
    """
    with _command() as io:
        _require_steward(steward, "verify stored snapshots")
        if store is None and ledger.startswith(_POSTGRES):
            raise UsageError(
                "a PostgreSQL ledger has no default snapshot store", ledger, "pass --store DIR (or DPSENSE_STORE)"
            )
        with _session(ledger, analyst, steward, store=store) as session:
            ok = session.verify_snapshot(name, snapshot=snapshot)
            which = session.ledger.profile(name, snapshot).snapshot
        if not ok:
            print_error(
                io.err,
                f"the stored snapshot {which!r} of {name!r} is missing or fails its check; "
                "the next attach reads the source again and stores it anew",
            )
            raise typer.Exit(EXIT_TAMPERED)
        io.out.print(
            f"the stored snapshot {which!r} of {name!r} is the registered one (checked in full)",
            markup=False,
            soft_wrap=True,
        )


@dataset_app.command("list")
def dataset_list(
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """List the registered datasets: each one's snapshots (the newest answers), privacy unit and budget."""
    from dpsense.cli import _output as out

    with _command() as io:
        with _session(ledger, analyst, steward, store=store) as session:
            rows = []
            for name in session.datasets():
                newest = session.ledger.profile(name)
                status = session.budget(name)
                rows.append(
                    {
                        "dataset": name,
                        "snapshots": session.ledger.snapshots(name),
                        "newest": newest.snapshot,
                        "privacy_unit": newest.profile.get("unit"),
                        "adjacency": newest.profile.get("adjacency"),
                        "budget": out.loss_text(status.cap),
                        "remaining": out.loss_text(status.remaining),
                    }
                )
        if as_json:
            io.document(out.dumps({"datasets": rows}))
            return
        io.out.print(out.record_table("datasets", rows))


@dataset_app.command("show")
def dataset_show(
    name: Annotated[str, typer.Argument(help="The dataset's name.")],
    snapshot: Annotated[str | None, typer.Option("--snapshot", help="A snapshot [default: the newest].")] = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
) -> None:
    """Show a snapshot's public profile: every declaration releases use (bounds, keys, caps, policies)."""
    from dpsense.cli import _output as out
    from dpsense.release._profile import Profile

    with _command() as io:
        with _session(ledger, analyst, steward, store=store) as session:
            stored = session.ledger.profile(name, snapshot)
        io.out.print(out.profile_table(name, stored.snapshot, Profile.from_json(stored.profile)))


@app.command("set-budget")
def set_budget(
    dataset: Annotated[str, typer.Argument(help="The dataset's name.")],
    epsilon: Annotated[str, typer.Option("--epsilon", help="The scope's cap ε (a decimal).")],
    delta: Annotated[str, typer.Option("--delta", help="The scope's cap δ.")] = "0",
    for_analyst: Annotated[
        str | None, typer.Option("--for-analyst", metavar="NAME", help="A sub-budget of one analyst.")
    ] = None,
    family: Annotated[str | None, typer.Option("--family", help="A sub-budget of one query family.")] = None,
    period: Annotated[
        str | None,
        typer.Option("--period", metavar="START:END", help="A sub-budget of a time window (Unix seconds)."),
    ] = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
) -> None:
    """Create or change a dataset's total budget or a sub-budget (steward); the policy's rules still hold."""
    from dpsense.cli import _output as out
    from dpsense.ledger import Scope
    from dpsense.release import Budget

    with _command() as io:
        _require_steward(steward, "set budgets")
        chosen = [flag for flag, value in (("--for-analyst", for_analyst), ("--family", family), ("--period", period))
                  if value is not None]  # fmt: skip
        if len(chosen) > 1:
            raise UsageError("a budget has one scope", chosen, "pass one of --for-analyst, --family, --period")
        scope = Scope.total()
        if for_analyst is not None:
            scope = Scope.analyst(for_analyst)
        elif family is not None:
            scope = Scope.family(family)
        elif period is not None:
            start, sep, end = period.partition(":")
            if not (sep and all(part.strip().isascii() and part.strip().isdigit() for part in (start, end))):
                raise UsageError(
                    "--period takes START:END in Unix seconds", period, "e.g. --period 1767225600:1769904000"
                )
            scope = Scope.period(int(start), int(end))
        cap = Budget(number_option("--epsilon", epsilon), number_option("--delta", delta))
        with _session(ledger, analyst, steward, store=store) as session:
            session.set_budget(dataset, scope, cap)
            status = session.budget(dataset, scope)
        io.out.print(
            f"budget of {dataset!r} ({scope}): cap {out.loss_text(status.cap)}, spent {out.loss_text(status.spent)}",
            markup=False,
        )


@token_app.command("create")
def token_create(
    name: Annotated[str, typer.Argument(help="The analyst the token speaks for (added if new).")],
    role: Annotated[str, typer.Option("--role", help="analyst or steward.")] = "analyst",
    expires_in: Annotated[
        float | None, typer.Option("--expires-in", metavar="SECONDS", help="Lifetime [default: never expires].")
    ] = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
) -> None:
    """Create an API token for the HTTP service (steward); it is printed once, only its hash is kept."""
    with _command() as io:
        if role not in ("analyst", "steward"):
            raise UsageError("--role is analyst or steward", role, "pass --role analyst")
        with _steward_ledger(ledger, steward, "create tokens") as opened:
            opened.add_analyst(name)
            token = opened.create_token(name, role=role, ttl_s=expires_in)  # type: ignore[arg-type]
        io.out.print(token, markup=False, soft_wrap=True)


@token_app.command("list")
def token_list(
    ledger: LedgerOpt = DEFAULT_LEDGER,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """List the API tokens (steward): id, analyst, role, state, expiry; never a secret."""
    import time

    from dpsense.cli import _output as out

    with _command() as io:
        with _steward_ledger(ledger, steward, "list tokens") as opened:
            infos = opened.tokens()
        now = time.time()
        rows = [
            {
                "token_id": info.token_id,
                "analyst": info.analyst,
                "role": info.role,
                "state": "revoked"
                if info.revoked
                else "expired"
                if info.expires_at is not None and now >= info.expires_at
                else "active",
                "expires": "never" if info.expires_at is None else out.utc_text(info.expires_at),
            }
            for info in infos
        ]
        if as_json:
            io.document(out.dumps({"tokens": rows}))
            return
        io.out.print(out.record_table("API tokens", rows))


@token_app.command("revoke")
def token_revoke(
    token_id: Annotated[str, typer.Argument(help="The token's public id (dpsense token list).")],
    ledger: LedgerOpt = DEFAULT_LEDGER,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
) -> None:
    """Revoke an API token by its public id (steward)."""
    with _command() as io:
        with _steward_ledger(ledger, steward, "revoke tokens") as opened:
            if not opened.revoke_token(token_id):
                raise UsageError("no active token has that id", token_id, "see dpsense token list --steward")
        io.out.print(f"token {token_id} revoked", markup=False)


@analyst_app.command("add")
def analyst_add(
    name: Annotated[str, typer.Argument(help="The analyst's name.")],
    ledger: LedgerOpt = DEFAULT_LEDGER,
    create: CreateOpt = False,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
) -> None:
    """Allow an analyst to release from this ledger (steward); a new SQLite ledger needs --create."""
    with _command() as io:
        _require_steward(steward, "add analysts")
        with _session(ledger, analyst, steward, store=store, create=create) as session:
            session.add_analyst(name)
        io.out.print(f"analyst {name!r} added", markup=False)


@app.command()
def release(
    spec_yaml: SpecArg,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    as_json: JsonOpt = False,
    as_csv: CsvOpt = False,
    explain: Annotated[bool, typer.Option("--explain", help="Also print the explain report.")] = False,
    engine: EngineOpt = None,
    spark_master: SparkMasterOpt = None,
    spark_collect_limit: SparkCollectLimitOpt = None,
) -> None:
    """Release the statistics a YAML spec asks for (charged once; the same request again is free).

    A typo in the spec is refused with the closest valid name before the ledger is opened. Example:

    \b
        dataset: events              # snapshot: v1, source: data.csv (relative to the spec) optional
        epsilon: 0.5                 # delta: 0, request_id: job-1 optional
        filters: [{column: age, op: ">=", value: 18}]
        group_by: {column: region}   # keys: [north, south] optional; or {columns: [region, diagnosis]}
        max_groups_per_unit: 1
        aggregates:
          people: {kind: count_units}
          events: {kind: count, max_rows_per_unit: 30}
          hours: {kind: mean, column: hours, bounds: [0, 24]}
          p90: {kind: quantile, column: age, q: 0.9}
        engine: spark                # optional: duckdb (default) or spark
        spark_master: local[2]       # optional, spark only; spark_collect_limit: N too

    Kinds: count, count_units, sum, mean, variance, median, quantile (q), trimmed_mean
    (trim_fraction), histogram (column, keys), min_distance (columns), triangle_count (columns),
    clipped_count (column), approx_bounds (column); each also takes max_rows_per_unit and mechanism,
    the numeric ones bounds.
    """  # noqa: D301 (the \b line is click's no-rewrap marker: see the module docstring)
    from dpsense.cli import _output as out
    from dpsense.cli._progress import progress_bar
    from dpsense.cli._spec import load_release_spec
    from dpsense.interface.documents import budget_document, release_document

    with _command() as io:
        shape = _format(as_json, as_csv)
        spec, query = load_release_spec(spec_yaml)
        choice = choose_engine(EngineSettings(engine, spark_master, spark_collect_limit), spec.engine_settings())
        with _session(ledger, analyst, steward, choice, store=store) as session:
            with io.err.status(f"loading {spec.dataset!r} and checking its fingerprint…"):
                session.dataset(spec.dataset, source=spec.source_path(spec_yaml), snapshot=spec.snapshot)
            with progress_bar(io.err, "releasing") as progress:
                result = session.release(
                    query,
                    epsilon=spec.epsilon,
                    delta=spec.delta,
                    public_n=spec.public_n,
                    request_id=spec.request_id,
                    progress=progress,
                )
            status = session.budget(result.record.dataset)
        if shape == "json":
            io.document(out.dumps(release_document(result) | {"budget": budget_document(status)}))
        elif shape == "csv":
            io.document(out.release_csv(result))
        else:
            io.out.print(out.release_table(result))
            if explain:
                io.out.print(result.explain(), markup=False)
            io.out.print(out.budget_line(result, status), markup=False)


@app.command("sql")
def sql_release(
    query: Annotated[str, typer.Argument(help="One SELECT of aggregates over a registered dataset.")],
    epsilon: Annotated[str, typer.Option("--epsilon", help="The release's ε (a decimal, e.g. 0.5).")],
    delta: Annotated[str, typer.Option("--delta", help="The release's δ (0 for pure ε-DP).")] = "0",
    request_id: Annotated[str | None, typer.Option("--request-id", help="Idempotency key.")] = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    as_json: JsonOpt = False,
    as_csv: CsvOpt = False,
    explain: Annotated[bool, typer.Option("--explain", help="Also print the explain report.")] = False,
    engine: EngineOpt = None,
    spark_master: SparkMasterOpt = None,
    spark_collect_limit: SparkCollectLimitOpt = None,
) -> None:
    """Release a SQL question (the DP subset: aggregates, WHERE on public predicates, GROUP BY public keys).

    Rewrites of a question already asked (aliases, order, commuted predicates, BETWEEN, COUNT(1), case)
    return the stored release at no cost. Example:

    \b
        dpsense sql "SELECT region, COUNT(DISTINCT person_id) FROM events GROUP BY region" --epsilon 0.5
    """  # noqa: D301 (the \b line is click's no-rewrap marker: see the module docstring)
    from dpsense.cli import _output as out
    from dpsense.cli._progress import progress_bar
    from dpsense.interface.documents import budget_document, release_document

    with _command() as io:
        shape = _format(as_json, as_csv)
        choice = choose_engine(EngineSettings(engine, spark_master, spark_collect_limit))
        with _session(ledger, analyst, steward, choice, store=store) as session:
            with progress_bar(io.err, "releasing") as progress:
                result = session.sql(
                    query,
                    epsilon=number_option("--epsilon", epsilon),
                    delta=number_option("--delta", delta),
                    request_id=request_id,
                    progress=progress,
                )
            status = session.budget(result.record.dataset)
        if shape == "json":
            io.document(out.dumps(release_document(result) | {"budget": budget_document(status)}))
        elif shape == "csv":
            io.document(out.release_csv(result))
        else:
            io.out.print(out.release_table(result))
            if explain:
                io.out.print(result.explain(), markup=False)
            io.out.print(out.budget_line(result, status), markup=False)


@app.command()
def preview(
    spec_yaml: SpecArg,
    target: Annotated[
        list[str] | None,
        typer.Option(
            "--target",
            metavar="NAME=ERROR",
            help="Also print the least ε at which statistic NAME's 95% error is at most ERROR (e.g. n=50).",
        ),
    ] = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    engine: EngineOpt = None,
    spark_master: SparkMasterOpt = None,
    spark_collect_limit: SparkCollectLimitOpt = None,
) -> None:
    """Print the plan a release would run (mechanisms, sensitivities, cost) and each statistic's expected error.

    Nothing is charged and no data is read. With --target NAME=ERROR, also the least ε at which that
    statistic's 95% error bound is at most ERROR (up to the policy's per-release cap).
    """
    from dpsense.cli import _output as out
    from dpsense.cli._spec import load_release_spec

    with _command() as io:
        targets = {name: real_option("--target", value) for name, value in _pairs("--target", target)}
        spec, query = load_release_spec(spec_yaml)
        choice = choose_engine(EngineSettings(engine, spark_master, spark_collect_limit), spec.engine_settings())
        with _session(ledger, analyst, steward, choice, store=store) as session:
            with io.err.status(f"loading {spec.dataset!r} and checking its fingerprint…"):
                session.dataset(spec.dataset, source=spec.source_path(spec_yaml), snapshot=spec.snapshot)
            plan = session.preview(query, epsilon=spec.epsilon, delta=spec.delta, public_n=spec.public_n)
            expected = session.forecast(query, epsilon=spec.epsilon, delta=spec.delta)
            needed = session.epsilon_for(query, error=targets, delta=spec.delta) if targets else None
            status = session.budget(spec.dataset)
        io.out.print(plan.explain(), markup=False)
        io.out.print(expected.text(), markup=False, soft_wrap=True)
        if needed is not None:
            wanted = ", ".join(f"{name!r} within ±{value:g}" for name, value in targets.items())
            io.out.print(f"least ε for {wanted}: {out.decimal_text(needed)}", markup=False)
        io.out.print(
            f"preview only: nothing charged. A release would charge {out.loss_text(plan.requested)}; "
            f"remaining {out.loss_text(status.remaining)}",
            markup=False,
        )


@app.command()
def budget(
    dataset: Annotated[str, typer.Argument(help="The dataset's name.")],
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    as_json: JsonOpt = False,
    as_csv: CsvOpt = False,
) -> None:
    """Show a dataset's total budget: cap, spent, remaining (exact)."""
    from dpsense.cli import _output as out
    from dpsense.interface.documents import budget_document

    with _command() as io:
        shape = _format(as_json, as_csv)
        with _session(ledger, analyst, steward, store=store) as session:
            status = session.budget(dataset)
        if shape == "json":
            io.document(out.dumps(budget_document(status)))
        elif shape == "csv":
            io.document(out.budget_csv(status))
        else:
            io.out.print(out.budget_table(status))


@app.command()
def history(
    dataset: Annotated[str, typer.Argument(help="The dataset's name.")],
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    as_json: JsonOpt = False,
    as_csv: CsvOpt = False,
) -> None:
    """List the stored releases of a dataset (the steward sees all, an analyst their own)."""
    from dpsense.cli import _output as out

    with _command() as io:
        shape = _format(as_json, as_csv)
        with _session(ledger, analyst, steward, store=store) as session:
            releases, charges = session.history(dataset), session.ledger.charges(dataset)
        rows = out.history_rows(releases, charges)
        if shape == "json":
            io.document(out.dumps(out.history_document(dataset, releases, charges)))
        elif shape == "csv":
            io.document(out.history_csv(rows))
        else:
            io.out.print(out.history_table(dataset, rows))


ExpectedHeadOpt = Annotated[
    str | None,
    typer.Option("--expected-head", metavar="SEQ:HASH", help="A head recorded earlier: the chain must still carry it."),
]
CheckpointOpt = Annotated[
    Path | None,
    typer.Option("--checkpoint", dir_okay=False, help="A checkpoint file written by `dpsense checkpoint`."),
]
KeyFileOpt = Annotated[
    Path | None,
    typer.Option("--key-file", dir_okay=False, help="The MAC key of the checkpoint (kept outside the ledger)."),
]


@app.command("verify-log")
def verify_log(
    ledger: LedgerOpt = DEFAULT_LEDGER,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    as_json: JsonOpt = False,
    expected_head: ExpectedHeadOpt = None,
    checkpoint_file: CheckpointOpt = None,
    key_file: KeyFileOpt = None,
) -> None:
    """Verify the ledger: its audit chain, every table against the chain, and an anchor kept outside it.

    Exit codes: 0 intact; 1 tampered (a broken link, a table row the chain does not imply, or the anchor
    missing: history cut or rewritten); 5 the ledger cannot be read (missing, empty, truncated or corrupt;
    nothing is created); 2 bad options. Without --expected-head or --checkpoint a history rewritten whole,
    tables included, is not detected: keep checkpoints (`dpsense checkpoint`).
    """
    from dpsense.cli import _output as out
    from dpsense.ledger import Ledger

    del analyst, steward  # verifying reads no data and changes nothing: any role may
    with _command() as io:
        anchor = _anchor(expected_head, checkpoint_file, key_file)
        with Ledger.open_existing(ledger) as opened:
            report = opened.verify(expected_head=anchor)
        if as_json:
            io.document(out.dumps(out.audit_document(report)))
        elif report.ok:
            against = f", carries {anchor}" if anchor is not None else ""
            line = (
                f"ledger ok: {report.entries} entries, every table matches the chain{against}, head {report.head_hash}"
            )
            io.out.print(line, markup=False, soft_wrap=True)
        else:
            where = f" at entry {report.first_broken_seq}" if report.first_broken_seq is not None else ""
            print_error(io.err, f"ledger tampered{where}: {report.reason}")
            for problem in report.problems[1:]:
                print_error(io.err, problem)
        if not report.ok:
            raise typer.Exit(EXIT_TAMPERED)


@app.command()
def checkpoint(
    ledger: LedgerOpt = DEFAULT_LEDGER,
    out_file: Annotated[
        Path | None, typer.Option("--out", dir_okay=False, help="Write the checkpoint here [default: stdout].")
    ] = None,
    key_file: KeyFileOpt = None,
) -> None:
    """Record the verified audit head to keep outside the ledger (with --key-file, MAC-signed).

    Later, `dpsense verify-log --checkpoint FILE` proves the history up to this head was neither cut nor
    rewritten. The ledger is verified first: a tampered ledger gets no checkpoint (exit 1).
    """
    from dpsense.cli import _output as out
    from dpsense.ledger import Anchor, Ledger, checkpoint_document

    with _command() as io:
        key = _read_key(key_file)
        with Ledger.open_existing(ledger) as opened:
            report = opened.verify()
        if not report.ok:
            print_error(io.err, f"ledger tampered: {report.reason}; no checkpoint written")
            raise typer.Exit(EXIT_TAMPERED)
        anchor = Anchor(report.head_hash, report.entries)
        text = out.dumps(checkpoint_document(anchor, at=datetime.now(UTC).isoformat(), key=key))
        if out_file is None:
            io.document(text)
            return
        try:
            out_file.write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise UsageError(
                "--out cannot be written", str(out_file), f"pick a writable path ({exc.strerror})"
            ) from None
        io.err.print(f"checkpoint {anchor} written to {out_file}", markup=False, highlight=False)


def _anchor(expected_head: str | None, checkpoint_file: Path | None, key_file: Path | None) -> Anchor | None:
    """The anchor of verify-log's options (at most one of --expected-head and --checkpoint)."""
    from dpsense.ledger import Anchor, read_checkpoint

    if expected_head is not None and checkpoint_file is not None:
        raise UsageError("--expected-head and --checkpoint name one anchor each", "both", "pass one of them")
    if key_file is not None and checkpoint_file is None:
        raise UsageError("--key-file checks a checkpoint's MAC", str(key_file), "pass --checkpoint FILE with it")
    if expected_head is not None:
        return Anchor.parse(expected_head)
    if checkpoint_file is None:
        return None
    try:
        text = checkpoint_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            "--checkpoint cannot be read", str(checkpoint_file), f"pass a checkpoint file ({exc})"
        ) from None
    return read_checkpoint(text, key=_read_key(key_file))


def _read_key(key_file: Path | None) -> bytes | None:
    if key_file is None:
        return None
    try:
        return key_file.read_bytes()
    except OSError as exc:
        raise UsageError("--key-file cannot be read", str(key_file), f"pass the key's file ({exc.strerror})") from None


@app.command("resolve-stale")
def resolve_stale(
    older_than: Annotated[
        float, typer.Option("--older-than", help="Seconds a reservation must have been untouched (default one hour).")
    ] = 3600.0,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Mark reservations left by crashed processes ABANDONED (steward); they stay charged.

    The rule (docs/ledger.md): a reservation untouched for --older-than seconds is marked ABANDONED, never
    refunded (the crashed process may have read data); a retry with the same request id may still complete
    it, and an identical request supersedes it at once instead of waiting out the lease. Pick --older-than
    above the slowest release: a live release marked ABANDONED and then superseded ends in ChargedFailure.
    """
    from dpsense.cli import _output as out

    with _command() as io:
        _require_steward(steward, "resolve stale reservations")
        if not (math.isfinite(older_than) and older_than > 0):
            raise UsageError(
                "--older-than must be a finite number of seconds > 0", older_than, "pass e.g. --older-than 3600"
            )
        with _session(ledger, analyst, steward, store=store) as session:
            marked = session.ledger.resolve_stale(older_than_s=older_than)
        if as_json:
            io.document(out.dumps({"abandoned": marked, "older_than_s": older_than}))
        else:
            io.out.print(f"{marked} stale reservation(s) marked abandoned (they stay charged)", markup=False)


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
)
def serve(ctx: typer.Context) -> None:
    """Run the HTTP release service (needs dpsense[service]); `dpsense serve --help` lists its options."""
    try:
        from dpsense.service.cli import main as service_main
    except ModuleNotFoundError as exc:
        raise typer.Exit(_missing_service(exc)) from None
    raise typer.Exit(service_main(["serve", *ctx.args]))


def _missing_service(exc: ModuleNotFoundError) -> int:
    print(
        f"dpsense serve needs the service extra (missing {exc.name}): pip install 'dpsense[service]'", file=sys.stderr
    )
    return 2


@app.command()
def audit(
    samples: Annotated[int, typer.Option("--samples", help="Outputs per neighbouring dataset.")] = DEFAULT_SAMPLES,
    controls: Annotated[bool, typer.Option("--controls", help="Also run the deliberately broken controls.")] = False,
    only: Annotated[str, typer.Option("--only", help="Run the scenarios whose name contains this text.")] = "",
) -> None:
    """Empirical privacy checks of the installed mechanisms (also runs without the cli extra)."""
    from dpsense.cli._audit import audit as run_audit

    raise typer.Exit(run_audit(samples=samples, controls=controls, only=only))


def run(args: list[str]) -> int:
    """Run the application on ``args``; returns the exit code."""
    try:
        app(args=args, prog_name="dpsense")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0
