"""The examples in examples/ run from a fresh process and tell their story (issue 19: one per subsystem).

Each example draws its noise from the OS CSPRNG, so what is checked is what holds for every draw: it
exits 0 and prints the lines that name what it shows.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = {
    "local_collection.py": ("RAPPOR", "refused 3 (its budget is 2)", "cached=True", "audit chain intact: True"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_example_runs(name: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DPSENSE_ALLOW_TEST_ENTROPY"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for line in EXPECTED[name]:
        assert line in done.stdout, (line, done.stdout[-3000:])
