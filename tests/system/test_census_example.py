"""examples/census_tables.py runs from a fresh process and tells its story (issue 19 part 2).

Its noise comes from the OS CSPRNG, so what is checked holds for every draw: it exits 0, the table is
exactly consistent, the release is charged once and asked again is the stored one, and the per-region
Propose-Test-Release median refuses the region of three persons.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = (
    "exactly consistent: True",
    "charged once: ε = 1; spent now (ε=1, δ=0)",
    "cached=True, charged=None",
    "islands: refused",
    "a refusal is an answer",
)


def test_the_census_example_runs() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPSENSE_")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "census_tables.py")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for line in EXPECTED:
        assert line in done.stdout, (line, done.stdout[-3000:])
