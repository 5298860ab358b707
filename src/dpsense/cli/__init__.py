"""The ``dpsense`` command line: a thin front end over ``dpsense.release`` (layer L5).

Commands (``dpsense COMMAND --help`` for each):
    dpsense audit [--samples N] [--controls] [--only NAME]
        Empirical privacy audits of the installed mechanisms (argparse; needs no extra).
    dpsense demo [--dir build/demo] [--persons N]
    dpsense dataset add NAME --source PATH --unit COL ... --budget-epsilon E --privacy-policy P.yaml --steward
        [--create] [--store DIR]
    dpsense analyst add NAME --steward [--create]
    dpsense release SPEC.yaml [--json | --csv]
    dpsense preview SPEC.yaml
    dpsense budget DATASET [--json | --csv]
    dpsense history DATASET [--json | --csv]
    dpsense dataset verify NAME [--snapshot S] --steward
    dpsense collection add|ingest|estimate|show NAME ...   (local-DP collections, docs/collections.md)
    dpsense verify-log [--json] [--checkpoint FILE [--key-file KEY] | --expected-head SEQ:HASH]
    dpsense checkpoint [--out FILE] [--key-file KEY]
    dpsense --version

Every command but ``audit`` needs the ``cli`` extra (typer, rich, pydantic, PyYAML), imported only
when such a command runs, so ``import dpsense.cli`` and ``dpsense audit`` work without it. Common
options: ``--ledger URL`` (env ``DPSENSE_LEDGER``, default ``sqlite:///dpsense.db``), ``--analyst
NAME`` (env ``DPSENSE_ANALYST``, default the OS user), ``--steward``; on ``dataset add``,
``release``, ``preview`` and ``sql`` also ``--engine duckdb|spark`` (env ``DPSENSE_ENGINE``; a
release spec may say ``engine: spark``), ``--spark-master URL`` and ``--spark-collect-limit N``
(Spark needs the ``spark`` extra); on every command that opens a Session ``--store DIR`` (env
``DPSENSE_STORE``; default ``<ledger file>.store`` beside a SQLite ledger). A SQLite ledger file
that does not exist is an error (nothing is created) unless ``dataset add`` or ``analyst add`` is
given ``--create``. Exit codes: 0 ok, 1 a tampered ledger, a stored snapshot that fails its check or
a failed audit, 2 a refusal or bad input, 3 budget exhausted, 4 a charged failure, 5 a ledger that
cannot be read or does not exist.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

#: The third-party modules of the ``cli`` extra.
CLI_EXTRA_MODULES = frozenset({"typer", "click", "rich", "pydantic", "pydantic_core", "yaml"})
MISSING_EXTRA = "the dpsense CLI needs the cli extra: pip install 'dpsense[cli]'"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dpsense`` console script; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:  # answered before typer and rich are imported (the app says the same)
        from dpsense._version import __version__

        print(f"dpsense {__version__}")
        return 0
    if args[:1] == ["audit"]:
        from dpsense.cli._audit import main as audit_main

        return audit_main(args)
    try:
        from dpsense.cli._app import run

        return run(args)  # a command imports the rest of the extra (pydantic, PyYAML) when it runs
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] not in CLI_EXTRA_MODULES:
            raise
        print(MISSING_EXTRA, file=sys.stderr)
        return 2


__all__ = ["main"]
