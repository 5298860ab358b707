"""The main demo: a synthetic health-events dataset released through a Session on DuckDB + SQLite.

A thin wrapper around ``dpsense.cli.demo.run_demo`` (also ``dpsense demo``): a steward registers
synthetic health events with a budget and a written privacy policy in a local SQLite ledger; the
analyst "alice" releases persons, events, mean hours, median and 90th-percentile age per region.
Running it again returns the stored release and the budget does not move. Needs the cli extra
(``pip install 'dpsense[cli]'``) for its rich output.

    python examples/health_events.py [--dir build/demo] [--persons 20000]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from dpsense.cli.demo import run_demo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("build/demo"))
    parser.add_argument("--persons", type=int, default=20_000)
    args = parser.parse_args()
    run_demo(args.dir, args.persons, Console())


if __name__ == "__main__":
    main()
