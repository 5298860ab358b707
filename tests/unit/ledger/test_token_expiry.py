"""API token expiry (schema version 7): refused at or after the expiry, by the ledger clock.

Time is injected through the ledger's clock hook (``Ledger.open(url, clock=...)``), never slept. An
expired token is refused after the same work as any other refusal (the counting instrument of
``test_token_hardening``), and a ledger at schema version 6 migrates to 7 with its tokens intact.
"""

from __future__ import annotations

import json
import math

import pytest

from dpsense.core.errors import UsageError
from dpsense.ledger import MAX_TOKEN_TTL_S, Ledger, _audit
from dpsense.ledger import _backends as backends
from dpsense.ledger import _service as service
from dpsense.ledger._schema import LATEST_VERSION, MIGRATIONS
from dpsense.ledger._steward import _iso
from dpsense.noise.entropy import random_bytes
from tests.unit.ledger import test_token_hardening as hardening
from tests.unit.ledger.support import rows

START = 1_700_000_000.0


class Clock:
    """The ledger clock: a settable time that counts how often it is read."""

    def __init__(self, now: float = START) -> None:
        self.now = now
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now


def _ledger(url: str, clock: Clock) -> Ledger:
    ledger = Ledger.open(url, clock=clock)
    ledger.add_analyst("alice")
    return ledger


def test_a_token_verifies_before_its_expiry_and_is_refused_at_and_after_it(ledger_url: str) -> None:
    clock = Clock()
    with _ledger(ledger_url, clock) as ledger:
        by_ttl = ledger.create_token("alice", ttl_s=60)
        by_time = ledger.create_token("alice", role="steward", expires_at=START + 120)
        infos = {i.token_id: i for i in ledger.tokens("alice")}
        assert infos[by_ttl.split("_")[1]].expires_at == START + 60
        assert infos[by_time.split("_")[1]].expires_at == START + 120
        clock.now = START + 59.999
        assert ledger.verify_token(by_ttl) is not None
        identity = ledger.verify_token(by_time)
        assert identity is not None and identity.role == "steward"
        clock.now = START + 60  # at the expiry: refused
        assert ledger.verify_token(by_ttl) is None
        assert ledger.verify_token(by_time) is not None
        clock.now = START + 120
        assert ledger.verify_token(by_time) is None
        clock.now = START + 10**6
        assert ledger.verify_token(by_ttl) is None and ledger.verify_token(by_time) is None
        clock.now = START  # the clock decides, nothing was changed by a refusal
        assert ledger.verify_token(by_ttl) is not None
    with Ledger.open(ledger_url, clock=Clock(START + 61)) as again:  # the expiry is stored
        assert again.verify_token(by_ttl) is None and again.verify_token(by_time) is not None


def test_a_token_without_expiry_never_expires(ledger_url: str) -> None:
    clock = Clock()
    with _ledger(ledger_url, clock) as ledger:
        token = ledger.create_token("alice")
        (info,) = ledger.tokens("alice")
        assert info.expires_at is None
        for later in (START + 1, START + MAX_TOKEN_TTL_S * 100, 1e300):
            clock.now = later
            assert ledger.verify_token(token) is not None


def test_the_expiry_is_recorded_in_the_audit_entry(ledger_url: str) -> None:
    with _ledger(ledger_url, Clock()) as ledger:
        expiring = ledger.create_token("alice", ttl_s=3600)
        forever = ledger.create_token("alice")
        assert ledger.verify().ok
    payloads = [
        json.loads(str(r[0]))
        for r in rows(ledger_url, "SELECT payload FROM audit_log WHERE event = 'create_token' ORDER BY seq")
    ]
    digests = [p.pop("credential_sha256") for p in payloads]  # the stored credential's digest (verify checks it)
    assert all(len(d) == 64 for d in digests) and digests[0] != digests[1]
    assert payloads == [
        {"token_id": expiring.split("_")[1], "analyst": "alice", "role": "analyst", "expires_at": START + 3600},
        {"token_id": forever.split("_")[1], "analyst": "alice", "role": "analyst", "expires_at": None},
    ]


@pytest.mark.parametrize(
    ("kwargs", "rule"),
    [
        ({"ttl_s": 0}, "after now"),
        ({"ttl_s": -5}, "after now"),
        ({"ttl_s": MAX_TOKEN_TTL_S + 1}, "10 years"),
        ({"ttl_s": math.nan}, "finite"),
        ({"ttl_s": math.inf}, "finite"),
        ({"ttl_s": True}, "finite"),
        ({"ttl_s": "60"}, "finite"),
        ({"expires_at": START}, "after now"),
        ({"expires_at": START - 1}, "after now"),
        ({"expires_at": START + MAX_TOKEN_TTL_S + 1}, "10 years"),
        ({"expires_at": -math.inf}, "finite"),
        ({"expires_at": START + 60, "ttl_s": 60}, "not both"),
    ],
)
def test_an_invalid_expiry_is_refused_before_any_write(ledger_url: str, kwargs: dict[str, object], rule: str) -> None:
    with _ledger(ledger_url, Clock()) as ledger:
        with pytest.raises(UsageError, match=rule):
            ledger.create_token("alice", **kwargs)  # type: ignore[arg-type]
        assert ledger.tokens() == []
        ledger.create_token("alice", ttl_s=MAX_TOKEN_TTL_S)  # the limit itself is allowed
        ledger.create_token("alice", expires_at=START + 0.001)


def test_an_expired_token_costs_the_same_work_as_a_valid_one(ledger_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    with _ledger(ledger_url, clock) as ledger:
        ledger.create_token("alice")  # an older token: the row an unknown id is compared against
        valid = ledger.create_token("alice", ttl_s=3600)
        forever = ledger.create_token("alice")
        expired = ledger.create_token("alice", ttl_s=10)
        revoked = ledger.create_token("alice", ttl_s=3600)
        ledger.revoke_token(revoked.split("_", 2)[1])
        clock.now = START + 100
        prefix, _, secret = valid.split("_", 2)
        cases = {
            "valid, expiring later": (valid, True),
            "valid, never expiring": (forever, True),
            "expired": (expired, False),
            "revoked": (revoked, False),
            "unknown id": (f"{prefix}_{'0' * 16}_{secret}", False),
        }
        seen: dict[str, tuple[int, int, tuple[str, ...], int, int]] = {}
        for name, (candidate, ok) in cases.items():
            reads = clock.reads
            with hardening._counting(monkeypatch, ledger) as counts:
                assert (ledger.verify_token(candidate) is not None) is ok, name
            seen[name] = (counts.digests, counts.compares, tuple(counts.statements), counts.rows, clock.reads - reads)
        assert len(set(seen.values())) == 1, seen
        digests, compares, statements, read_rows, clock_reads = next(iter(seen.values()))
        assert (digests, compares, len(statements), read_rows, clock_reads) == (1, 2, 1, 1, 1)


def _create_v6_token(ledger: Ledger, analyst: str) -> str:
    """A token written exactly as ``create_token`` did before schema version 7 (no expiry column)."""
    token_id = random_bytes(service._ID_BYTES).hex()
    secret = random_bytes(service._SECRET_BYTES)
    salt = random_bytes(service._SALT_BYTES)
    now = ledger._context.clock()
    with ledger._context.backend.write() as tx:
        tx.execute(
            "INSERT INTO api_tokens (token_id, analyst, role, salt, token_hash, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (token_id, analyst, "steward", salt, service._digest(salt, secret), now),
        )
        payload = {"token_id": token_id, "analyst": analyst, "role": "steward"}
        _audit.append(tx, at=_iso(now), event="create_token", payload=payload)
    return f"{service.TOKEN_PREFIX}_{token_id}_{service._encode(secret)}"


def test_a_ledger_at_schema_6_migrates_to_7_and_its_tokens_keep_working(
    ledger_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert LATEST_VERSION >= 7 and MIGRATIONS[6].version == 7
    with monkeypatch.context() as patch:  # a dpsense that knows migrations 1..6 only
        patch.setattr(backends, "MIGRATIONS", MIGRATIONS[:6])
        patch.setattr(backends, "LATEST_VERSION", 6)
        with _ledger(ledger_url, Clock()) as old:
            token = _create_v6_token(old, "alice")
    assert rows(ledger_url, "SELECT MAX(version) FROM schema_version") == [(6,)]
    if ledger_url.startswith("sqlite:"):
        columns = [r[1] for r in rows(ledger_url, "PRAGMA table_info(api_tokens)")]
    else:
        sql = "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
        columns = [r[0] for r in rows(ledger_url, sql + " AND table_name = 'api_tokens'")]
    assert "expires_at" not in columns

    clock = Clock(START + MAX_TOKEN_TTL_S * 50)
    with Ledger.open(ledger_url, clock=clock) as ledger:
        assert rows(ledger_url, "SELECT MAX(version) FROM schema_version") == [(LATEST_VERSION,)]
        identity = ledger.verify_token(token)
        assert identity is not None and (identity.analyst, identity.role) == ("alice", "steward")
        (info,) = ledger.tokens("alice")
        assert info.expires_at is None and not info.revoked
        fresh = ledger.create_token("alice", ttl_s=5)
        assert ledger.verify_token(fresh) is not None
        clock.now += 5
        assert ledger.verify_token(fresh) is None and ledger.verify_token(token) is not None
        assert ledger.verify().ok
    with Ledger.open(ledger_url, clock=clock) as again:  # reopening does not migrate twice
        assert again.verify_token(token) is not None
    assert rows(ledger_url, "SELECT COUNT(*) FROM schema_version WHERE version = 7") == [(1,)]
