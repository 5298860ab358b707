"""The tamper suite: every edit of a ledger's tables or history is caught by ``verify`` (issue 14, Build 1).

A ledger with a varied history (sub-budgets of every kind, a partition group, a PLD budget, a zCDP
budget, committed, refunded, failed and abandoned charges, cache hits, tokens, profiles) is built
through the public API on both backends; each case then edits the database directly, as a writer with
access to the file or the server would, and ``verify`` must report it. Cases that keep the chain
consistent with the tables (a cut tail of answers only, a history rewritten whole) are caught only
by an anchor kept outside the ledger, and the suite shows both halves of that statement.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from dpsense.accounting.pld import LaplaceEvent
from dpsense.core import PureDP
from dpsense.core.errors import LedgerStateError, LedgerUnreadable
from dpsense.core.privacy_loss import ZCDP, ApproxDP
from dpsense.ledger import Anchor, Ledger, PartitionSpec, ReleaseRecord, Scope
from dpsense.ledger._audit import GENESIS, entry_hash
from tests.unit.ledger.support import drop_pg_schema, fresh_pg_schema, rows

RECORD = ReleaseRecord({"count": 41.5}, "laplace", "1", {"epsilon": "1"}, "person_id", "add_remove", "0.1.0")
PARTS = ("north", "south", "east")


def tamper(url: str, *statements: str) -> None:
    """Run SQL against the ledger's database directly (a writer outside dpsense)."""
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            for sql in statements:
                conn.execute(sql)
            conn.commit()
        finally:
            conn.close()
        return
    import psycopg

    with psycopg.connect(url) as conn:
        for sql in statements:
            conn.execute(sql)


def _release(ledger: Ledger, rid: str, *, dataset: str = "events", analyst: str = "alice", **kw: object) -> None:
    res = ledger.reserve(dataset=dataset, analyst=analyst, request_id=rid, **kw)  # type: ignore[arg-type]
    ledger.commit(res, RECORD)


def build_history(ledger: Ledger) -> None:
    """A ledger touching every table and every charge state."""
    ledger.fingerprint_key()
    for name in ("alice", "bob"):
        ledger.add_analyst(name)
    ledger.register_dataset("events", budget=ApproxDP(10, "1e-6"), fingerprint="fp-events")
    ledger.register_dataset("rho", budget=ZCDP(2))
    ledger.register_dataset("pld", budget=ApproxDP(3, "1e-6"), accounting="pld")
    ledger.save_profile("events", snapshot="v1", fingerprint="fp-events", profile={"unit": "person_id"})
    ledger.set_budget("events", Scope.analyst("alice"), PureDP(6))
    ledger.set_budget("events", Scope.family("counts"), PureDP(4))
    ledger.set_budget("events", Scope.period(0, 4_000_000_000), ApproxDP(9, "1e-6"))
    _release(ledger, "c1", loss=PureDP(1), family="counts", cache_key="k1")
    ledger.reserve(dataset="events", analyst="bob", request_id="hit", loss=PureDP(1), cache_key="k1")  # cache hit
    _release(ledger, "c2", analyst="bob", loss=ApproxDP("0.5", "1e-8"), cache_key="k2")
    for part in ("north", "south"):
        spec = PartitionSpec("region", PARTS, part, "replace", 1)
        _release(ledger, f"p-{part}", loss=PureDP("0.25"), partition=spec)
    refunded = ledger.reserve(dataset="events", analyst="alice", request_id="refunded", loss=PureDP(1))
    ledger.fail(refunded, data_accessed=False)
    failed = ledger.reserve(dataset="events", analyst="bob", request_id="failed", loss=PureDP("0.5"))
    ledger.fail(failed, data_accessed=True)
    ledger.reserve(dataset="events", analyst="alice", request_id="crashed", loss=PureDP("0.1"))
    ledger.resolve_stale(older_than_s=-1.0)  # the crash-left reservation becomes ABANDONED
    _release(ledger, "r1", dataset="rho", loss=ZCDP("0.5"))
    _release(ledger, "e1", dataset="pld", loss=PureDP("0.02"), event=LaplaceEvent(50.0, 1.0))
    ledger.create_token("alice")
    ledger.create_token("bob", ttl_s=3600)
    revoked = ledger.create_token("bob", role="steward")
    ledger.revoke_token(revoked.split("_")[1])
    _release(ledger, "last", analyst="bob", loss=PureDP("0.1"))  # the chain's last entry is a commit


@pytest.fixture
def built(ledger_url: str) -> Iterator[tuple[Ledger, str]]:
    ledger = Ledger.open(ledger_url)
    build_history(ledger)
    report = ledger.verify()
    assert report.ok and report.tables_checked, report
    try:
        yield ledger, ledger_url
    finally:
        ledger.close()


MIN_RELEASE = "(SELECT MIN(id) FROM releases)"
MAX_RELEASE = "(SELECT MAX(id) FROM releases)"
COMMITTED = "(SELECT MIN(id) FROM charges WHERE state = 'committed')"

#: name -> statements; each must be caught by verify() with no anchor.
CASES: dict[str, tuple[str, ...]] = {
    # the breaks of issue 14
    "release value edited": (f"UPDATE releases SET value_json = '{{\"count\":7}}' WHERE id = {MIN_RELEASE}",),
    "spends reset to zero": ("UPDATE budgets SET spent_a = '0/1', spent_b = '0/1'",),
    "total cap raised": ("UPDATE budgets SET cap_a = '1000/1' WHERE scope_kind = 'total'",),
    "charge flipped to refunded": (f"UPDATE charges SET state = 'refunded' WHERE id = {COMMITTED}",),
    "release and charge deleted": (
        "DELETE FROM releases WHERE charge_id = (SELECT MAX(charge_id) FROM releases)",
        "DELETE FROM charges WHERE id = (SELECT MAX(id) FROM charges WHERE state = 'committed')",
    ),
    "every token made a steward": ("UPDATE api_tokens SET role = 'steward'",),
    "last entry dropped, head moved back": (
        "DELETE FROM audit_log WHERE seq = (SELECT MAX(seq) FROM audit_log)",
        "UPDATE audit_head SET seq = seq - 1,"
        " hash = (SELECT hash FROM audit_log WHERE seq = (SELECT MAX(seq) FROM audit_log)),"
        " prev_hash = (SELECT prev_hash FROM audit_log WHERE seq = (SELECT MAX(seq) FROM audit_log))",
    ),
    # our own
    "release cache key moved": (f"UPDATE releases SET cache_key = 'other' WHERE id = {MIN_RELEASE}",),
    "release pointed at another entry": (f"UPDATE releases SET commit_seq = 1 WHERE id = {MAX_RELEASE}",),
    "release parameters edited": (f"UPDATE releases SET parameters_json = '{{}}' WHERE id = {MAX_RELEASE}",),
    "release adjacency edited": (f"UPDATE releases SET adjacency = 'replace' WHERE id = {MAX_RELEASE}",),
    "charge loss lowered": (f"UPDATE charges SET loss = replace(loss, '1/1', '1/100') WHERE id = {COMMITTED}",),
    "charge moved to another analyst": ("UPDATE charges SET analyst = 'bob' WHERE request_id = 'c1'",),
    "charge moved out of the period": ("UPDATE charges SET charged_at = 0 WHERE request_id = 'c1'",),
    "charge moved to another part": ("UPDATE charges SET part = 'east' WHERE part = 'north'",),
    "abandoned charge marked refunded": ("UPDATE charges SET state = 'refunded' WHERE state = 'abandoned'",),
    "failed charge marked refunded": ("UPDATE charges SET state = 'refunded' WHERE request_id = 'failed'",),
    "refunded charge marked committed": ("UPDATE charges SET state = 'committed' WHERE state = 'refunded'",),
    "sub-budget deleted": ("DELETE FROM budgets WHERE scope_kind = 'analyst'",),
    "sub-budget forged": (
        "INSERT INTO budgets (dataset_id, scope_kind, scope_value, mode, cap_a, cap_b, spent_a, spent_b)"
        " SELECT id, 'family', 'forged', 'basic', '100/1', '0/1', '0/1', '0/1' FROM datasets WHERE name = 'events'",
    ),
    "accounting mode switched": ("UPDATE budgets SET mode = 'basic' WHERE mode = 'zcdp'",),
    "PLD spend lowered": ("UPDATE budgets SET spent_a = '0/1' WHERE mode = 'pld'",),
    "analyst forged": ("INSERT INTO analysts (name, created_at) VALUES ('mallory', 0)",),
    "token moved to another analyst": ("UPDATE api_tokens SET analyst = 'alice' WHERE analyst = 'bob'",),
    "revocation cleared": ("UPDATE api_tokens SET revoked_at = NULL",),
    "expiry extended": ("UPDATE api_tokens SET expires_at = expires_at + 1000000 WHERE expires_at IS NOT NULL",),
    "credential replaced": ("UPDATE api_tokens SET token_hash = '" + "0" * 64 + "'",),
    "fingerprint replaced": ("UPDATE datasets SET fingerprint = 'fp-other' WHERE name = 'events'",),
    "profile edited": ('UPDATE dataset_profiles SET profile = \'{"unit":"household"}\'',),
    "partition declaration edited": (
        "UPDATE partitions SET declaration = replace(declaration, 'replace', 'add_remove')",
    ),
    "secret deleted": ("DELETE FROM secrets",),
    "two audit payloads swapped": (
        "UPDATE audit_log SET payload = CASE seq WHEN 3 THEN (SELECT payload FROM audit_log WHERE seq = 4)"
        " ELSE (SELECT payload FROM audit_log WHERE seq = 3) END WHERE seq IN (3, 4)",
    ),
    "audit row deleted mid-chain": ("DELETE FROM audit_log WHERE seq = 10",),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_tamper_case_is_caught(built: tuple[Ledger, str], case: str) -> None:
    ledger, url = built
    tamper(url, *CASES[case])
    report = ledger.verify()
    assert not report.ok, case
    assert report.reason
    assert report.problems or report.first_broken_seq is not None


@pytest.mark.parametrize(
    ("edit", "hit_key"),
    [
        ("UPDATE releases SET value_json = '{\"count\":7}'", "k1"),
        ("UPDATE releases SET cache_key = 'k2' WHERE cache_key = 'k1'", "k2"),  # the edited row now answers k2
        ("UPDATE releases SET parameters_json = '{}'", "k1"),
    ],
)
def test_an_edited_release_is_refused_not_served_to_a_retry_or_a_cache_hit(
    built: tuple[Ledger, str], edit: str, hit_key: str
) -> None:
    ledger, url = built
    tamper(url, edit)
    before = rows(url, "SELECT COUNT(*) FROM audit_log")
    retry = {"analyst": "alice", "request_id": "c1", "loss": PureDP(1), "family": "counts", "cache_key": "k1"}
    with pytest.raises(LedgerStateError, match="the ledger was edited"):
        ledger.reserve(dataset="events", **retry)  # type: ignore[arg-type]
    with pytest.raises(LedgerStateError, match="the ledger was edited"):
        ledger.reserve(dataset="events", analyst="bob", request_id="new", loss=PureDP(1), cache_key=hit_key)
    assert rows(url, "SELECT COUNT(*) FROM audit_log") == before  # nothing written, nothing charged


def rewrite_chain(url: str, edit: Callable[[str, dict[str, Any]], dict[str, Any]]) -> list[str]:
    """Statements that rewrite every payload through ``edit(event, payload)`` and re-hash the whole chain."""
    statements = []
    prev = GENESIS
    for seq, at, event, payload in rows(url, "SELECT seq, at, event, payload FROM audit_log ORDER BY seq"):
        text = json.dumps(edit(str(event), json.loads(str(payload))), sort_keys=True, separators=(",", ":"))
        digest = entry_hash(prev, int(str(seq)), str(at), str(event), text)
        quoted = text.replace("'", "''")
        statements.append(
            f"UPDATE audit_log SET payload = '{quoted}', prev_hash = '{prev}', hash = '{digest}' WHERE seq = {seq}"
        )
        prev = digest
    return [*statements, f"UPDATE audit_head SET hash = '{prev}'"]


def test_a_rewritten_history_is_caught_only_by_the_anchor(built: tuple[Ledger, str]) -> None:
    """A writer rewrites a charge's loss in the chain *and* the tables and re-hashes the chain."""
    ledger, url = built
    anchor = ledger.checkpoint()

    def cheaper(event: str, payload: dict[str, Any]) -> dict[str, Any]:
        if event == "reserve" and payload["request_id"] == "last":
            payload["loss"] = {"kind": "pure", "epsilon": "1/1000"}
        return payload

    statements = [
        *rewrite_chain(url, cheaper),
        'UPDATE charges SET loss = \'{"epsilon":"1/1000","kind":"pure"}\' WHERE request_id = \'last\'',
    ]
    # the spends the rewritten history implies (bob's charge of 1/10 became 1/1000 in every scope it fell in)
    for scope in ("total", "period"):
        old = Fraction(
            str(rows(url, f"SELECT spent_a FROM budgets WHERE scope_kind = '{scope}' AND mode = 'basic'")[0][0])
        )
        new = old - Fraction(1, 10) + Fraction(1, 1000)
        statements.append(
            f"UPDATE budgets SET spent_a = '{new.numerator}/{new.denominator}'"
            f" WHERE scope_kind = '{scope}' AND mode = 'basic'"
        )
    tamper(url, *statements)
    assert ledger.verify().ok  # consistent forgery: the chain alone cannot tell (the documented limit)
    report = ledger.verify(expected_head=anchor)
    assert not report.ok and "rewritten" in report.reason
    assert report.first_broken_seq == anchor.seq


NEW_FIELDS = {
    "reserve": ("cache_key", "charged_at"),
    "commit": ("row_sha256",),
    "set_budget": ("scope_kind", "scope_value"),
    "create_token": ("credential_sha256",),
    "profile": ("fingerprint_sha256",),
}


@pytest.mark.parametrize(
    "case",
    ["spends reset to zero", "release value edited", "every token made a steward", "charge moved to another part"],
)
def test_entries_from_before_the_state_fields_are_replayed_with_what_they_carry(
    built: tuple[Ledger, str], case: str
) -> None:
    """A ledger whose entries predate the fields verification added (and whose releases have no commit_seq)."""
    ledger, url = built

    def legacy(event: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in payload.items() if k not in NEW_FIELDS.get(event, ())}

    tamper(url, *rewrite_chain(url, legacy), "UPDATE releases SET commit_seq = NULL")
    assert ledger.verify().ok
    retry = {"analyst": "alice", "request_id": "c1", "loss": PureDP(1), "family": "counts", "cache_key": "k1"}
    assert ledger.reserve(dataset="events", **retry).stored is not None  # type: ignore[arg-type]
    assert ledger.verify().ok
    tamper(url, *CASES[case])
    assert not ledger.verify().ok, case


def test_a_cut_tail_of_answers_only_is_caught_by_the_anchor(built: tuple[Ledger, str]) -> None:
    ledger, url = built
    ledger.reserve(dataset="events", analyst="alice", request_id="hit-2", loss=PureDP(1), cache_key="k1")
    anchor = ledger.checkpoint()
    tamper(url, *CASES["last entry dropped, head moved back"])  # drops the cache_hit entry: tables unchanged
    assert ledger.verify().ok
    report = ledger.verify(expected_head=anchor)
    assert not report.ok and "cut" in report.reason


def test_an_anchor_from_earlier_still_verifies_a_grown_ledger(built: tuple[Ledger, str]) -> None:
    ledger, _ = built
    anchor = ledger.checkpoint()
    _release(ledger, "after", loss=PureDP("0.1"))
    assert ledger.verify(expected_head=anchor).ok
    assert ledger.verify(expected_head=anchor.head).ok  # a bare hash: some entry carries it
    assert ledger.verify(expected_head=str(anchor)).ok
    assert not ledger.verify(expected_head=Anchor(anchor.head, anchor.seq + 1)).ok
    assert not ledger.verify(expected_head="f" * 64).ok


def test_a_missing_or_empty_ledger_is_unreadable_and_never_created(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(LedgerUnreadable, match="does not exist"):
        Ledger.open_existing(f"sqlite:///{missing}")
    assert not missing.exists()
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(LedgerUnreadable, match="empty"):
        Ledger.open_existing(f"sqlite:///{empty}")
    assert empty.read_bytes() == b""
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(LedgerUnreadable, match="no dpsense ledger"):
        Ledger.open_existing(f"sqlite:///{other}")


def test_a_truncated_or_corrupt_file_is_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(f"sqlite:///{path}") as ledger:
        build_history(ledger)
    data = path.read_bytes()
    for name, content in {
        "truncated": data[: len(data) // 3],
        "garbage": b"not a database at all" * 100,
        "corrupt pages": data[:100] + bytes(len(data) - 100),
    }.items():
        bad = tmp_path / f"{name}.db"
        bad.write_bytes(content)
        with pytest.raises(LedgerUnreadable), Ledger.open_existing(f"sqlite:///{bad}") as opened:
            opened.verify()


def test_a_postgres_schema_without_a_ledger_is_unreadable(pg_server: str) -> None:
    schema, url = fresh_pg_schema(pg_server)
    try:
        with pytest.raises(LedgerUnreadable, match="no dpsense ledger"):
            Ledger.open_existing(url)
        assert not rows(url, "SELECT 1 FROM pg_tables WHERE schemaname = current_schema()")  # nothing created
    finally:
        drop_pg_schema(pg_server, schema)
    with pytest.raises(LedgerUnreadable):
        Ledger.open_existing("postgresql://postgres@127.0.0.1:1/none")


def test_verify_beside_concurrent_writers_never_raises_a_false_alarm(built: tuple[Ledger, str]) -> None:
    """Verification reads the chain and every table in one snapshot (REPEATABLE READ on PostgreSQL)."""
    import threading

    _, url = built
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            with Ledger.open(url) as own:
                for i in range(25):
                    _release(own, f"w{worker}-{i}", loss=PureDP("0.01"), cache_key=f"w{worker}-{i % 5}")
        except BaseException as exc:  # reported below
            errors.append(exc)

    reports = []
    writers = [threading.Thread(target=write, args=(w,)) for w in range(3)]
    for thread in writers:
        thread.start()
    with Ledger.open(url) as verifier:
        while any(t.is_alive() for t in writers):
            reports.append(verifier.verify())
        reports.append(verifier.verify())
    for thread in writers:
        thread.join()
    assert not errors, errors
    assert len(reports) >= 2 and all(r.ok for r in reports), [r.reason for r in reports if not r.ok]
