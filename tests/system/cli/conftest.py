from __future__ import annotations

from pathlib import Path

import pytest

from tests.system.cli.support import Cli, register_events


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """A fresh SQLite ledger with nothing registered."""
    return Cli(tmp_path, f"sqlite:///{tmp_path / 'ledger.db'}")


@pytest.fixture
def registered(cli: Cli) -> Cli:
    """The ``events`` dataset registered from a CSV (budget ε=10, δ=1e-8, cap 2) and analyst alice added."""
    register_events(cli)
    return cli
