"""Ledger secrets: keys drawn from the OS CSPRNG, stored in a table no analyst-facing read returns.

Secrets are never logged and never written to the audit chain (only the event that one was
created, with its name). ``keyed_fingerprint`` turns a snapshot's bytes into the fingerprint the
steward registers, so that equal snapshots link to the same budget without revealing content.
"""

from __future__ import annotations

import hashlib
import hmac

from dpsense.ledger._backends import Tx
from dpsense.noise.entropy import random_bytes

FINGERPRINT_KEY = "fingerprint_key"
KEY_BYTES = 32


def get_or_create(tx: Tx, name: str, *, now: float) -> tuple[bytes, bool]:
    """The secret ``name``, created from the CSPRNG on first use; returns (value, created)."""
    rows = tx.execute("SELECT value FROM secrets WHERE name = ?", (name,))
    if rows:
        return bytes(rows[0][0]), False
    tx.execute(
        "INSERT INTO secrets (name, value, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING",
        (name, random_bytes(KEY_BYTES), now),
    )
    return bytes(tx.execute("SELECT value FROM secrets WHERE name = ?", (name,))[0][0]), True


def keyed_fingerprint(key: bytes, content: bytes) -> str:
    """HMAC-SHA256 of a snapshot's canonical bytes under the ledger's fingerprint key (hex)."""
    return hmac.new(key, content, hashlib.sha256).hexdigest()
