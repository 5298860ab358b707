from __future__ import annotations

import sqlite3

import pytest

from dpsense.core import PureDP
from dpsense.ledger import Ledger, ReleaseRecord

RECORD = ReleaseRecord(1.0, "laplace", "1", {}, "person_id", "add_remove", "0.1.0")


def _tamper(url: str, sql: str) -> None:
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        conn.execute(sql)
        conn.commit()
        conn.close()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql)


@pytest.fixture
def ledger(ledger_url: str):
    led = Ledger.open(ledger_url)
    led.add_analyst("alice")
    led.register_dataset("events", budget=PureDP(10))
    for i in range(5):
        led.commit(led.reserve(dataset="events", analyst="alice", request_id=f"r{i}", loss=PureDP(1)), RECORD)
    assert led.verify().ok and led.verify().entries == 12
    yield led
    led.close()


@pytest.mark.parametrize(
    ("sql", "broken"),
    [
        ("UPDATE audit_log SET payload = replace(payload, '\"1/1\"', '\"1/100\"') WHERE seq = 5", 5),
        ("UPDATE audit_log SET event = 'commit' WHERE seq = 3", 3),
        ("UPDATE audit_log SET at = '2000-01-01T00:00:00+00:00' WHERE seq = 7", 7),
        ("DELETE FROM audit_log WHERE seq = 4", 4),
        (  # flip the first hex digit (a fixed 'f' would leave a hash that starts with 'f' unchanged)
            "UPDATE audit_log SET hash = CASE WHEN substr(hash, 1, 1) = 'f' THEN 'e' ELSE 'f' END || substr(hash, 2)"
            " WHERE seq = 6",
            6,
        ),
        ("DELETE FROM audit_log WHERE seq = 12", 12),
    ],
)
def test_tampering_with_one_audit_row_is_detected(ledger: Ledger, ledger_url: str, sql: str, broken: int) -> None:
    _tamper(ledger_url, sql)
    report = ledger.verify()
    assert not report.ok
    assert report.first_broken_seq == broken, report


def test_an_expected_head_detects_a_rewritten_chain(ledger: Ledger) -> None:
    head = ledger.verify().head_hash
    assert ledger.verify(expected_head=head).ok
    assert not ledger.verify(expected_head="0" * 64).ok
