"""What the HTTP service needs from the ledger: API tokens (salted hashes only) and spend times.

A mixin of ``Ledger`` (``dpsense.ledger._ledger``), added for the release service (``dpsense.service``).

API tokens
    ``create_token(analyst, role=...)`` draws a token from the OS CSPRNG (``dpsense.noise.entropy``)
    and returns it once: ``dps_<id>_<secret>``, where ``<id>`` (8 random bytes, hex) is a public
    lookup key and ``<secret>`` (32 random bytes, URL-safe base64) is never stored. The ledger keeps
    ``sha256(salt || secret)`` with a fresh 16-byte salt per token. A 256-bit random secret cannot be
    guessed, so a fast hash is enough (no password stretching); the salt keeps equal secrets from
    sharing a stored hash and stops a precomputed table. ``verify_token`` compares in constant time
    (``hmac.compare_digest``) and hashes once even for an unknown id, so its time does not tell a
    known id from an unknown one. Creating and revoking a token are audited (id, analyst, role; never
    the secret or its hash).

Spend times
    ``spend_timeline(dataset)`` lists every charge that spends (reserved, committed, failed,
    abandoned) with its debit time, analyst and exact loss: the steward's dashboard plots cumulative
    spend from it. Refunded charges spent nothing and are left out.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from dpsense.core.errors import UnknownAnalyst, UsageError
from dpsense.core.privacy_loss import PrivacyLoss
from dpsense.ledger import _audit
from dpsense.ledger._amounts import loss_from_json
from dpsense.ledger._backends import Backend
from dpsense.ledger._rows import dataset_id as dataset_id_of
from dpsense.ledger._states import SPENT_STATES, ChargeState
from dpsense.ledger._steward import _iso
from dpsense.ledger._types import _name
from dpsense.noise.entropy import random_bytes

Role = Literal["analyst", "steward"]
ROLES: tuple[Role, ...] = ("analyst", "steward")
TOKEN_PREFIX = "dps"
_ID_BYTES = 8
_SECRET_BYTES = 32
_SALT_BYTES = 16
#: The hash an unknown token id is compared against, so that lookups take the same work either way.
_DUMMY_SALT = b"\x00" * _SALT_BYTES


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


@dataclass(frozen=True)
class SpendPoint:
    """One spending charge: when it was debited (Unix seconds), by whom, the exact loss and its state."""

    at: float
    analyst: str
    loss: PrivacyLoss
    state: ChargeState


class ServiceOps:
    """Token and spend-time operations shared by ``Ledger`` (expects ``_backend`` and ``_clock``)."""

    _backend: Backend
    _clock: Callable[[], float]

    def create_token(self, analyst: str, *, role: Role = "analyst") -> str:
        """A new API token for ``analyst`` with ``role``; the only time the token is ever returned.

        Raises:
            UnknownAnalyst: the analyst was never added (``add_analyst``).
            UsageError: ``role`` is not ``"analyst"`` or ``"steward"``.

        """
        analyst = _name(analyst, "analyst")
        if role not in ROLES:
            raise UsageError("a token's role is 'analyst' or 'steward'", role, "pass role='analyst'")
        token_id = random_bytes(_ID_BYTES).hex()
        secret = random_bytes(_SECRET_BYTES)
        salt = random_bytes(_SALT_BYTES)
        now = self._clock()
        with self._backend.write() as tx:
            if not tx.execute("SELECT 1 FROM analysts WHERE name = ?", (analyst,)):
                raise UnknownAnalyst(analyst)
            tx.execute(
                "INSERT INTO api_tokens (token_id, analyst, role, salt, token_hash, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (token_id, analyst, role, salt, _digest(salt, secret), now),
            )
            payload = {"token_id": token_id, "analyst": analyst, "role": role}
            _audit.append(tx, at=_iso(now), event="create_token", payload=payload)
        return f"{TOKEN_PREFIX}_{token_id}_{_encode(secret)}"

    def verify_token(self, token: str) -> TokenIdentity | None:
        """Who ``token`` speaks for, or ``None`` when it is malformed, unknown, wrong or revoked."""
        parsed = _parse(token)
        token_id, secret = parsed if parsed is not None else ("", b"")
        with self._backend.read() as tx:
            rows = (
                tx.execute(
                    "SELECT analyst, role, salt, token_hash, revoked_at FROM api_tokens WHERE token_id = ?", (token_id,)
                )
                if parsed is not None
                else []
            )
        if not rows:
            hmac.compare_digest(_digest(_DUMMY_SALT, secret), "0" * 64)  # the same work as a known id
            return None
        analyst, role, salt, stored, revoked_at = rows[0]
        matches = hmac.compare_digest(_digest(bytes(salt), secret), str(stored))
        if not matches or revoked_at is not None or role not in ROLES:
            return None
        return TokenIdentity(token_id, str(analyst), role)

    def revoke_token(self, token_id: str) -> bool:
        """Revoke a token by its public id; returns False when no active token has that id."""
        token_id = _name(token_id, "token id")
        now = self._clock()
        with self._backend.write() as tx:
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
        sql = "SELECT token_id, analyst, role, created_at, revoked_at FROM api_tokens"
        params: tuple[object, ...] = ()
        if analyst is not None:
            sql, params = sql + " WHERE analyst = ?", (analyst,)
        with self._backend.read() as tx:
            rows = tx.execute(sql + " ORDER BY id", params)
        return [TokenInfo(str(r[0]), str(r[1]), r[2], float(r[3]), r[4] is not None) for r in rows]

    def spend_timeline(self, dataset: str) -> list[SpendPoint]:
        """Every charge of ``dataset`` that spends, in debit order (see the module docstring)."""
        states = sorted(s.value for s in SPENT_STATES)
        marks = ", ".join("?" for _ in states)
        with self._backend.read() as tx:
            dataset_id = dataset_id_of(tx, dataset)
            rows = tx.execute(
                "SELECT COALESCE(charged_at, created_at), analyst, loss, state FROM charges"
                f" WHERE dataset_id = ? AND state IN ({marks}) ORDER BY COALESCE(charged_at, created_at), id",
                (dataset_id, *states),
            )
        return [SpendPoint(float(r[0]), str(r[1]), loss_from_json(json.loads(r[2])), ChargeState(r[3])) for r in rows]


def _digest(salt: bytes, secret: bytes) -> str:
    return hashlib.sha256(salt + secret).hexdigest()


def _encode(secret: bytes) -> str:
    return base64.urlsafe_b64encode(secret).decode("ascii").rstrip("=")


def _parse(token: object) -> tuple[str, bytes] | None:
    """``(id, secret bytes)`` of a well-formed token, else ``None``."""
    if not isinstance(token, str) or len(token) > 200:
        return None
    prefix, _, rest = token.partition("_")
    token_id, _, encoded = rest.partition("_")
    if prefix != TOKEN_PREFIX or len(token_id) != 2 * _ID_BYTES or not encoded:
        return None
    try:
        bytes.fromhex(token_id)
        secret = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    except (ValueError, binascii.Error):
        return None
    return (token_id, secret) if len(secret) == _SECRET_BYTES else None
