"""What the HTTP service needs from the ledger: API tokens (salted hashes only).

``Tokens`` is a component of ``Ledger`` (``dpsense.ledger._ledger``), which delegates its token
methods here; added for the release service (``dpsense.service``).

API tokens
    ``create_token(analyst, role=...)`` draws a token from the OS CSPRNG (``dpsense.noise.entropy``)
    and returns it once: ``dps_<id>_<secret>``, where ``<id>`` (8 random bytes, hex) is a public
    lookup key and ``<secret>`` (32 random bytes, URL-safe base64) is never stored. The ledger keeps
    ``sha256(salt || secret)`` with a fresh 16-byte salt per token. A 256-bit random secret cannot be
    guessed, so a fast hash is enough (no password stretching); the salt keeps equal secrets from
    sharing a stored hash and stops a precomputed table. Creating and revoking a token are audited
    (id, analyst, role, expiry; never the secret or its hash).

    A token may expire: ``create_token(..., expires_at=t)`` (Unix seconds) or ``ttl_s=s`` (``t`` =
    the ledger clock + ``s``). The expiry must be finite, after now and at most ``MAX_TOKEN_TTL_S``
    (10 years) ahead. ``verify_token`` refuses a token at or after its expiry (by the ledger clock);
    a token created without one (and every token from before schema version 7) never expires.

    The format is strict (``TOKEN_PATTERN``, ``TOKEN_LENGTH``): ``dps_``, 16 lowercase hex digits,
    ``_``, then exactly the 43 characters of the secret's canonical unpadded URL-safe base64. Padding
    (``=``), whitespace, other characters, another length or a non-canonical encoding of the same
    bytes are refused before any lookup, with the same answer as an unknown token (``None``).

    ``verify_token`` does the same work for a known and an unknown id: one statement that always
    reads one stored row (the token's, or for an unknown id the oldest token's, so the index probe
    and the row read happen either way), one hash of ``salt || secret`` and two constant-time
    comparisons (``hmac.compare_digest``: the id, the hash) against that row or a dummy; the checks
    of revocation, expiry and role are combined only after all of that (the clock is read once for
    every token, so an expired token is refused after the same work as any other refusal). A malformed
    token skips the lookup (its format is public) but is still hashed once.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import re
from dataclasses import dataclass
from typing import Literal

from dpsense.core.errors import UnknownAnalyst, UsageError
from dpsense.ledger import _audit
from dpsense.ledger._context import LedgerContext
from dpsense.ledger._steward import _iso
from dpsense.ledger._types import _name
from dpsense.noise.entropy import random_bytes

#: ``analyst`` asks for releases, ``steward`` administers, ``collector`` only submits local-DP reports.
Role = Literal["analyst", "steward", "collector"]
ROLES: tuple[Role, ...] = ("analyst", "steward", "collector")
TOKEN_PREFIX = "dps"
_ID_BYTES = 8
_SECRET_BYTES = 32
_SALT_BYTES = 16
#: The longest a token may live: 10 years (365.25-day years) of seconds.
MAX_TOKEN_TTL_S = 10 * 365.25 * 86_400
_SECRET_CHARS = 43  # len(base64url(32 bytes)) without padding
#: The exact length of a token: ``dps_`` + 16 hex digits + ``_`` + 43 base64url characters.
TOKEN_LENGTH = len(TOKEN_PREFIX) + 1 + 2 * _ID_BYTES + 1 + _SECRET_CHARS
#: The exact format of a token (lowercase hex id, unpadded URL-safe base64 secret, nothing else).
TOKEN_PATTERN = re.compile(rf"{TOKEN_PREFIX}_([0-9a-f]{{{2 * _ID_BYTES}}})_([A-Za-z0-9_-]{{{_SECRET_CHARS}}})")
#: The salt, hash and id an unknown or malformed token is compared against (the same work either way).
_DUMMY_SALT = b"\x00" * _SALT_BYTES
_DUMMY_HASH = "0" * 64
_DUMMY_ID = "-" * (2 * _ID_BYTES)  # never a stored id (not hex)
#: One row whatever the id: the token's, else the oldest token's (both cost an index probe and a row read).
_LOOKUP_SQL = (
    "SELECT token_id, analyst, role, salt, token_hash, revoked_at, expires_at FROM api_tokens"
    " WHERE id = COALESCE((SELECT id FROM api_tokens WHERE token_id = ?), (SELECT MIN(id) FROM api_tokens))"
)


@dataclass(frozen=True)
class TokenIdentity:
    """Who a verified token speaks for."""

    token_id: str
    analyst: str
    role: Role


@dataclass(frozen=True)
class TokenInfo:
    """A stored token as the steward may list it (no secret, no hash)."""

    token_id: str
    analyst: str
    role: Role
    created_at: float
    revoked: bool
    #: Unix seconds at and after which the token is refused; ``None``: it never expires.
    expires_at: float | None = None


class Tokens:
    """The API tokens of one ledger (its ``LedgerContext``): created, verified, revoked, listed."""

    def __init__(self, context: LedgerContext) -> None:
        self._context = context

    def create_token(
        self,
        analyst: str,
        *,
        role: Role = "analyst",
        expires_at: float | None = None,
        ttl_s: float | None = None,
    ) -> str:
        """A new API token for ``analyst`` with ``role``; the only time the token is ever returned.

        ``expires_at`` (Unix seconds) or ``ttl_s`` (seconds from now, by the ledger clock) makes the
        token expire; with neither it never expires.

        Raises:
            UnknownAnalyst: the analyst was never added (``add_analyst``).
            UsageError: ``role`` is not ``"analyst"``, ``"steward"`` or ``"collector"``; both ``expires_at`` and
                ``ttl_s`` are given; the expiry is not a finite number after now and at most
                ``MAX_TOKEN_TTL_S`` ahead.

        """
        analyst = _name(analyst, "analyst")
        if role not in ROLES:
            raise UsageError("a token's role is 'analyst', 'steward' or 'collector'", role, "pass role='analyst'")
        now = self._context.clock()
        expiry = _expiry(now, expires_at, ttl_s)
        token_id = random_bytes(_ID_BYTES).hex()
        secret = random_bytes(_SECRET_BYTES)
        salt = random_bytes(_SALT_BYTES)
        with self._context.backend.write() as tx:
            if not tx.execute("SELECT 1 FROM analysts WHERE name = ?", (analyst,)):
                raise UnknownAnalyst(analyst)
            tx.execute(
                "INSERT INTO api_tokens (token_id, analyst, role, salt, token_hash, created_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (token_id, analyst, role, salt, _digest(salt, secret), now, expiry),
            )
            payload = {
                "token_id": token_id,
                "analyst": analyst,
                "role": role,
                "expires_at": expiry,
                "credential_sha256": credential_digest(salt, _digest(salt, secret)),
            }
            _audit.append(tx, at=_iso(now), event="create_token", payload=payload)
        return f"{TOKEN_PREFIX}_{token_id}_{_encode(secret)}"

    def verify_token(self, token: str) -> TokenIdentity | None:
        """Who ``token`` speaks for, or ``None`` when it is malformed, unknown, wrong, revoked or expired.

        Every refusal is the same ``None``; known and unknown ids cost the same work (module docstring).
        """
        now = self._context.clock()
        parsed = _parse(token)
        token_id, secret = parsed if parsed is not None else (_DUMMY_ID, b"")
        rows: list[tuple[object, ...]] = []
        if parsed is not None:  # one statement: its own read (``Backend.select``), one round trip
            rows = [tuple(r) for r in self._context.backend.select(_LOOKUP_SQL, (token_id,))]
        stored_id, analyst, role, salt, stored_hash, revoked_at, expires_at = (
            rows[0] if rows else (_DUMMY_ID, "", "", _DUMMY_SALT, _DUMMY_HASH, None, None)
        )
        same_id = hmac.compare_digest(str(stored_id).encode("utf-8"), token_id.encode("utf-8"))
        same_hash = hmac.compare_digest(
            _digest(_as_bytes(salt), secret).encode("utf-8"), str(stored_hash).encode("utf-8")
        )
        live = now < (math.inf if expires_at is None else _as_float(expires_at))
        matched = parsed is not None and bool(rows) and same_id and same_hash
        if not (matched and live) or revoked_at is not None or role not in ROLES:
            return None
        return TokenIdentity(token_id, str(analyst), role)

    def revoke_token(self, token_id: str) -> bool:
        """Revoke a token by its public id; returns False when no active token has that id."""
        token_id = _name(token_id, "token id")
        now = self._context.clock()
        with self._context.backend.write() as tx:
            rows = tx.execute(
                "SELECT analyst, role FROM api_tokens WHERE token_id = ? AND revoked_at IS NULL{lock}", (token_id,)
            )
            if not rows:
                return False
            tx.execute("UPDATE api_tokens SET revoked_at = ? WHERE token_id = ?", (now, token_id))
            payload = {"token_id": token_id, "analyst": rows[0][0], "role": rows[0][1]}
            _audit.append(tx, at=_iso(now), event="revoke_token", payload=payload)
        return True

    def tokens(self, analyst: str | None = None) -> list[TokenInfo]:
        """Every token (of ``analyst`` when given), oldest first, without secrets or hashes."""
        sql = "SELECT token_id, analyst, role, created_at, revoked_at, expires_at FROM api_tokens"
        params: tuple[object, ...] = ()
        if analyst is not None:
            sql, params = sql + " WHERE analyst = ?", (analyst,)
        with self._context.backend.read() as tx:
            rows = tx.execute(sql + " ORDER BY id", params)
        return [
            TokenInfo(str(r[0]), str(r[1]), r[2], float(r[3]), r[4] is not None, None if r[5] is None else float(r[5]))
            for r in rows
        ]


def credential_digest(salt: bytes, token_hash: str) -> str:
    """What the audit chain records of a token's stored credential: ``sha256(salt || stored hash)``.

    It binds the row's salt and hash to the chain (``_verify`` recomputes it) and reveals nothing
    usable: the stored hash is itself a SHA-256 of a 256-bit random secret.
    """
    return hashlib.sha256(salt + token_hash.encode("ascii")).hexdigest()


def _digest(salt: bytes, secret: bytes) -> str:
    return hashlib.sha256(salt + secret).hexdigest()


def _encode(secret: bytes) -> str:
    return base64.urlsafe_b64encode(secret).decode("ascii").rstrip("=")


def _as_float(value: object) -> float:
    """A stored expiry as a float; anything unreadable counts as already expired (fail closed)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else -math.inf


def _expiry(now: float, expires_at: object, ttl_s: object) -> float | None:
    """The expiry to store for a new token (``create_token``), or ``None`` for no expiry."""
    fix = f"pass expires_at (Unix seconds) or ttl_s (seconds, > 0 and at most {MAX_TOKEN_TTL_S:.0f}), not both"
    if expires_at is not None and ttl_s is not None:
        raise UsageError("a token's expiry is expires_at or ttl_s, not both", (expires_at, ttl_s), fix)
    value = ttl_s if ttl_s is not None else expires_at
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise UsageError("a token's expiry is a finite number of seconds", value, fix)
    expiry = now + float(value) if ttl_s is not None else float(value)
    if not (expiry > now and expiry - now <= MAX_TOKEN_TTL_S):
        raise UsageError("a token expires after now and at most 10 years ahead", value, fix)
    return expiry


def _as_bytes(value: object) -> bytes:
    return bytes(value) if isinstance(value, bytes | bytearray | memoryview) else b""


def _parse(token: object) -> tuple[str, bytes] | None:
    """``(id, secret bytes)`` of a token in the exact format (``TOKEN_PATTERN``), else ``None``.

    The length is checked first (no pattern runs on a long input); the secret must be the canonical
    encoding of its 32 bytes, so no second spelling of one token is accepted.
    """
    if not isinstance(token, str) or len(token) != TOKEN_LENGTH:
        return None
    match = TOKEN_PATTERN.fullmatch(token)
    if match is None:
        return None
    token_id, encoded = match.group(1), match.group(2)
    secret = base64.urlsafe_b64decode(encoded + "=")  # the alphabet and length are already exact
    if len(secret) != _SECRET_BYTES or _encode(secret) != encoded:
        return None
    return token_id, secret
