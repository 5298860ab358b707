"""``dpsense audit``: the empirical privacy audits of the installed mechanisms (argparse, no extras).

Prints, per mechanism, the claimed (ε, δ) next to a statistical lower bound on ε (confidence
1 - 1e-9). A lower bound above the claim means the build is broken; the controls are deliberately
broken mechanisms that show the audit can tell. Exit code 1 when any audit fails.

``dpsense.audit`` (scipy) is imported only when the audits run, so this module is cheap to import
(``dpsense --help`` and ``dpsense audit --help`` stay fast).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

DEFAULT_SAMPLES = 200_000


def audit(*, samples: int, controls: bool, only: str) -> int:
    """Run the audits and print one line per scenario; 1 when any fails, else 0."""
    from dpsense.audit._types import run_audit
    from dpsense.audit.registry import all_scenarios

    scenarios = [s for s in all_scenarios() if (controls or not s.control)]
    if only:
        scenarios = [s for s in scenarios if only.lower() in s.name.lower()]
    print(f"{'mechanism':46s} {'claim ε':>8s} {'δ':>8s} {'ε lower bound':>14s}  {'verdict':9s} neighbours")
    failures = 0
    for scenario in scenarios:
        start = time.perf_counter()
        row = run_audit(scenario, samples=max(1000, samples // (10 if scenario.slow else 1)))
        if row.flagged and not scenario.control:
            verdict = "VIOLATED"
            failures += 1
        elif scenario.control:
            verdict = "caught" if row.flagged else "missed"
            failures += 0 if row.flagged else 1
        else:
            verdict = "ok"
        print(
            f"{scenario.name:46s} {scenario.epsilon:8.3g} {scenario.delta:8.2g} "
            f"{row.result.epsilon_lower_bound:14.3f}  {verdict:9s} {scenario.neighbours}"
            f"  [{time.perf_counter() - start:.1f}s]"
        )
    return 1 if failures else 0


def main(argv: Sequence[str]) -> int:
    """``dpsense audit [--samples N] [--controls] [--only NAME]`` parsed with argparse."""
    parser = argparse.ArgumentParser(prog="dpsense", description="Differentially private statistics.")
    sub = parser.add_subparsers(dest="command", required=True)
    command = sub.add_parser("audit", help="empirical privacy checks of the installed mechanisms")
    command.add_argument("--samples", type=int, default=DEFAULT_SAMPLES, help="outputs per neighbouring dataset")
    command.add_argument("--controls", action="store_true", help="also run the deliberately broken controls")
    command.add_argument("--only", default="", help="run the scenarios whose name contains this text")
    args = parser.parse_args(argv)
    return audit(samples=args.samples, controls=args.controls, only=args.only)
