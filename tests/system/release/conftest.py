from collections.abc import Iterator
from pathlib import Path

import pytest

import dpsense as dp
from tests.unit.ledger.support import ledger_url, pg_server

__all__ = ["ledger_url", "pg_server", "test_steward"]


@pytest.fixture
def test_steward(tmp_path: Path) -> Iterator[dp.Session]:
    """A steward's Session on a fresh SQLite ledger that accepts the test-only deterministic noise."""
    with dp.Session.open(
        f"sqlite:///{tmp_path / 'ledger.db'}", analyst="steward", role="steward", allow_test_noise=True
    ) as session:
        yield session
