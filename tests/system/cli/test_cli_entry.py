"""The console entry point: the module runs, and without the cli extra only ``audit`` works."""

from __future__ import annotations

import os
import subprocess
import sys

from dpsense.cli import MISSING_EXTRA

BLOCK_EXTRA = "import sys\nfor name in ('typer', 'rich', 'pydantic', 'yaml'):\n    sys.modules[name] = None\n"


def _python(code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPSENSE_")}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def test_without_the_extra_commands_print_how_to_install_it() -> None:
    done = _python(BLOCK_EXTRA + "from dpsense.cli import main\nsys.exit(main(['budget', 'events']))")
    assert done.returncode == 2
    assert done.stderr.strip() == MISSING_EXTRA == "the dpsense CLI needs the cli extra: pip install 'dpsense[cli]'"
    assert done.stdout == ""


def test_without_the_extra_the_package_imports_and_audit_still_parses() -> None:
    done = _python(BLOCK_EXTRA + "import dpsense.cli\nsys.exit(dpsense.cli.main(['audit', '--help']))")
    assert done.returncode == 0, done.stderr
    assert "--samples" in done.stdout and "--controls" in done.stdout and "--only" in done.stdout


def test_python_dash_m_shows_every_command() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPSENSE_")} | {"COLUMNS": "200"}
    command = [sys.executable, "-m", "dpsense.cli", "--help"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    for command in ("demo", "dataset", "analyst", "release", "preview", "budget", "history", "verify-log", "audit"):
        assert command in done.stdout
