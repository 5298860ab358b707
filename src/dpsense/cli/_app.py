"""The typer application: the table of commands, each a short function and a thin call into ``dpsense.release``.

The commands live by role: ``_datasets`` (the steward's ``dataset`` group), ``_steward`` (budgets,
tokens, analysts), ``_releases`` (the analyst's releases, previews, budget and history), ``_ledger_log``
(the audit chain), ``_collections`` (local-DP collections). What they share
(options, consoles, opening a Session) is in ``_common``. The table below registers them in the order
``dpsense --help`` lists them; ``demo``, ``serve`` and ``audit`` are defined here.

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

import sys
from pathlib import Path
from typing import Annotated

import typer

from dpsense._version import __version__
from dpsense.cli import _collections, _datasets, _ledger_log, _releases, _steward
from dpsense.cli._audit import DEFAULT_SAMPLES
from dpsense.cli._common import _command

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


@app.command()
def demo(
    directory: Annotated[Path, typer.Option("--dir", help="Where the data and the ledger go.")] = Path("build/demo"),
    persons: Annotated[int, typer.Option("--persons", min=1, help="How many synthetic persons.")] = 20_000,
) -> None:
    """Run the health-events demo: register synthetic data, release as 'alice'; run it twice to see the cache."""
    from dpsense.cli.demo import run_demo

    with _command() as io:
        run_demo(directory, persons, io.out, progress=io.err)


# The command table: where each command is defined, in the order ``dpsense --help`` lists them
# (``demo`` above, ``serve`` and ``audit`` below; the groups ``dataset``, ``analyst`` and ``token`` first).
dataset_app.command("add")(_datasets.dataset_add)
dataset_app.command("amend")(_datasets.dataset_amend)
dataset_app.command("verify")(_datasets.dataset_verify)
dataset_app.command("list")(_datasets.dataset_list)
dataset_app.command("show")(_datasets.dataset_show)
app.command("set-budget")(_steward.set_budget)
token_app.command("create")(_steward.token_create)
token_app.command("list")(_steward.token_list)
token_app.command("revoke")(_steward.token_revoke)
analyst_app.command("add")(_steward.analyst_add)
app.command()(_releases.release)
app.command("sql")(_releases.sql_release)
app.command()(_releases.preview)
app.command()(_releases.budget)
app.command()(_releases.history)
app.command("verify-log")(_ledger_log.verify_log)
app.command()(_ledger_log.checkpoint)
app.command("resolve-stale")(_ledger_log.resolve_stale)
app.add_typer(_collections.collection_app, name="collection")


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
