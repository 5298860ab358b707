"""The ``dpsense`` command line: a thin front end over ``dpsense.release`` (layer L5).

Commands (``dpsense COMMAND --help`` for each):
    dpsense audit [--samples N] [--controls] [--only NAME]
        Empirical privacy audits of the installed mechanisms (argparse; needs no extra).
    dpsense demo [--dir build/demo] [--persons N]
    dpsense dataset add NAME --source PATH --unit COL ... --budget-epsilon E --privacy-policy P.yaml --steward
    dpsense analyst add NAME --steward
    dpsense release SPEC.yaml [--json | --csv]
    dpsense preview SPEC.yaml
    dpsense budget DATASET [--json | --csv]
    dpsense history DATASET [--json | --csv]
    dpsense verify-log [--json] [--checkpoint FILE [--key-file KEY] | --expected-head SEQ:HASH]
    dpsense checkpoint [--out FILE] [--key-file KEY]

Every command but ``audit`` needs the ``cli`` extra (typer, rich, pydantic, PyYAML), imported only
when such a command runs, so ``import dpsense.cli`` and ``dpsense audit`` work without it. Common
options: ``--ledger URL`` (env ``DPSENSE_LEDGER``, default ``sqlite:///dpsense.db``), ``--analyst
NAME`` (env ``DPSENSE_ANALYST``, default the OS user), ``--steward``; on ``dataset add``, ``release``,
``preview`` and ``sql`` also ``--engine duckdb|spark`` (env ``DPSENSE_ENGINE``; a release spec may say
``engine: spark``), ``--spark-master URL`` and ``--spark-collect-limit N`` (Spark needs the ``spark``
extra). Exit codes: 0 ok, 1 a tampered ledger or a failed audit, 2 a refusal or bad input, 3 budget
exhausted, 4 a charged failure, 5 a ledger that cannot be read.
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
    if args[:1] == ["audit"]:
        from dpsense.cli._audit import main as audit_main

        return audit_main(args)
    try:
        from dpsense.cli._app import run
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] not in CLI_EXTRA_MODULES:
            raise
        print(MISSING_EXTRA, file=sys.stderr)
        return 2
    return run(args)


__all__ = ["main"]
