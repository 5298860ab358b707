"""API tokens (salted hashes only) and spend times, on SQLite and PostgreSQL."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dpsense.core.errors import UnknownAnalyst, UsageError
from dpsense.core.privacy_loss import PureDP
from dpsense.ledger import ChargeState, Ledger, ReleaseRecord, Scope, TokenIdentity
from tests.unit.ledger.support import rows, snapshot


def _ledger(url: str) -> Ledger:
    ledger = Ledger.open(url)
    ledger.add_analyst("alice")
    ledger.add_analyst("root")
    return ledger


def test_a_token_verifies_and_names_its_analyst_and_role(ledger_url: str) -> None:
    with _ledger(ledger_url) as ledger:
        alice = ledger.create_token("alice")
        root = ledger.create_token("root", role="steward")
        assert alice.startswith("dps_") and alice != root
        a = ledger.verify_token(alice)
        assert isinstance(a, TokenIdentity) and (a.analyst, a.role) == ("alice", "analyst")
        r = ledger.verify_token(root)
        assert r is not None and (r.analyst, r.role) == ("root", "steward")


def test_only_a_salted_hash_is_stored(ledger_url: str) -> None:
    with _ledger(ledger_url) as ledger:
        one = ledger.create_token("alice")
        two = ledger.create_token("alice")
    secrets = [t.split("_", 2)[2] for t in (one, two)]  # dps_<hex id>_<secret>; the secret may hold "_"
    stored = repr(snapshot(ledger_url))
    for token, secret in zip((one, two), secrets, strict=True):
        assert token not in stored and secret not in stored
    table = rows(ledger_url, "SELECT salt, token_hash FROM api_tokens ORDER BY id")
    assert len(table) == 2
    assert bytes(table[0][0]) != bytes(table[1][0])  # a fresh salt per token
    assert all(len(str(h)) == 64 for _, h in table)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "dps_",
        "Bearer x",
        "dps_00112233445566778_abc",
        "dps_zz112233445566778899_" + "A" * 43,
        "x" * 500,
    ],
)
def test_malformed_tokens_do_not_verify(ledger_url: str, bad: str) -> None:
    with _ledger(ledger_url) as ledger:
        ledger.create_token("alice")
        assert ledger.verify_token(bad) is None


def test_a_wrong_secret_or_a_revoked_token_does_not_verify(ledger_url: str) -> None:
    with _ledger(ledger_url) as ledger:
        token = ledger.create_token("alice")
        prefix, token_id, secret = token.split("_", 2)
        flipped = ("B" if secret[0] != "B" else "C") + secret[1:]
        assert ledger.verify_token(f"{prefix}_{token_id}_{flipped}") is None
        assert ledger.verify_token(f"{prefix}_{'0' * 16}_{secret}") is None
        assert ledger.revoke_token(token_id) is True
        assert ledger.revoke_token(token_id) is False
        assert ledger.verify_token(token) is None
        infos = ledger.tokens("alice")
        assert [(i.token_id, i.revoked) for i in infos] == [(token_id, True)]


def test_tokens_need_a_known_analyst_and_a_known_role(ledger_url: str) -> None:
    with _ledger(ledger_url) as ledger:
        with pytest.raises(UnknownAnalyst):
            ledger.create_token("mallory")
        with pytest.raises(UsageError, match="role"):
            ledger.create_token("alice", role="admin")  # type: ignore[arg-type]
        assert ledger.tokens() == []


def test_token_events_are_audited_without_the_secret(ledger_url: str) -> None:
    with _ledger(ledger_url) as ledger:
        token = ledger.create_token("alice")
        ledger.revoke_token(token.split("_")[1])
        assert ledger.verify().ok
    events = rows(ledger_url, "SELECT event, payload FROM audit_log ORDER BY seq")
    names = [e for e, _ in events]
    assert "create_token" in names and "revoke_token" in names
    assert all(token.split("_", 2)[2] not in p for _, p in events)


def test_spend_timeline_lists_spending_charges_in_order(ledger_url: str) -> None:
    clock = iter(float(t) for t in range(1000, 2000))
    with Ledger.open(ledger_url, clock=lambda: next(clock)) as ledger:
        ledger.add_analyst("alice")
        ledger.add_analyst("bob")
        ledger.register_dataset("events", budget=PureDP(10))
        ledger.set_budget("events", Scope.analyst("bob"), PureDP(3))
        record = ReleaseRecord({"v": 1}, "laplace", "v1", {}, "person_id", "add_remove", "0")
        first = ledger.reserve(dataset="events", analyst="alice", request_id="a1", loss=PureDP(1))
        ledger.commit(first, record)
        second = ledger.reserve(dataset="events", analyst="bob", request_id="b1", loss=PureDP(Fraction(1, 2)))
        ledger.fail(second, data_accessed=False)  # refunded: spent nothing
        third = ledger.reserve(dataset="events", analyst="bob", request_id="b2", loss=PureDP(2))
        points = ledger.spend_timeline("events")
        assert [(p.analyst, p.loss, p.state) for p in points] == [
            ("alice", PureDP(1), ChargeState.COMMITTED),
            ("bob", PureDP(2), ChargeState.RESERVED),
        ]
        assert points[0].at < points[1].at
        ledger.fail(third, data_accessed=True)
        assert [p.state for p in ledger.spend_timeline("events")] == [ChargeState.COMMITTED, ChargeState.FAILED]
