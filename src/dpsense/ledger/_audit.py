"""The append-only audit log as a hash chain.

Entry ``n`` stores ``hash_n = sha256(hash_{n-1} + canonical_json(entry_n))`` where ``entry_n`` is
``{"seq", "at", "event", "payload"}`` and ``hash_0`` is 64 zeros. ``audit_head`` holds the last
sequence number and hash; appending locks it, so the chain is a total order of ledger writes.
Editing, deleting or reordering any row (or cutting the tail) breaks a link that ``verify`` finds.
A writer who rewrites the whole chain *and* the head is not detected by the chain alone: record
the head outside the ledger (a checkpoint) and pass it back as an anchor (``_verify``), which also
compares every table with the state the chain implies.

Payloads hold identifiers, exact amounts and released values' digests, never secrets and never an
unnoised value.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

from dpsense.ledger._amounts import canonical_json
from dpsense.ledger._backends import Tx

GENESIS = "0" * 64


@dataclass(frozen=True)
class AuditReport:
    """The result of verifying a ledger: ``ok``, how many entries, the head, and what is wrong if anything.

    ``first_broken_seq`` names the first broken link of the chain (or the anchor's entry); table
    problems have none and are listed in ``problems``.
    """

    ok: bool
    entries: int
    head_hash: str
    first_broken_seq: int | None = None
    reason: str = ""
    #: Table rows that differ from the state the chain implies (``_verify``), at most ``MAX_PROBLEMS``.
    problems: tuple[str, ...] = ()
    #: True when every table was compared with the chain's replay (not only the chain walked).
    tables_checked: bool = False

    def to_json(self) -> dict[str, object]:
        """The report as one JSON document (``dpsense verify-log --json`` and ``GET /v1/steward/audit``)."""
        return {
            "ok": self.ok,
            "entries": self.entries,
            "head_hash": self.head_hash,
            "first_broken_seq": self.first_broken_seq,
            "reason": self.reason,
            "problems": list(self.problems),
            "tables_checked": self.tables_checked,
        }


def entry_hash(prev_hash: str, seq: int, at: str, event: str, payload: str) -> str:
    """The chained hash of one entry (``payload`` is its canonical JSON text)."""
    entry = canonical_json({"seq": seq, "at": at, "event": event, "payload": json.loads(payload)})
    return hashlib.sha256((prev_hash + entry).encode("utf-8")).hexdigest()


#: PostgreSQL appends in one statement: the head row is locked by the UPDATE (which re-reads the
#: latest committed head when it had to wait), the hash is computed by the server from the same bytes
#: ``entry_hash`` hashes: prev_hash + the entry's canonical JSON, whose last key is ``seq``.
_PG_APPEND = (
    "WITH h AS (UPDATE audit_head SET seq = seq + 1, prev_hash = hash, hash = encode(sha256("
    "convert_to(hash, 'UTF8') || ?::bytea || convert_to((seq + 1)::text || '}', 'UTF8')), 'hex')"
    " WHERE id = 1 RETURNING seq, prev_hash, hash)"
    " INSERT INTO audit_log (seq, at, event, payload, prev_hash, hash)"
    " SELECT seq, ?, ?, ?, prev_hash, hash FROM h RETURNING seq"
)


#: ``_PG_APPEND`` that also records the entry as the commit of a release (``releases.commit_seq``).
_PG_APPEND_COMMIT = (
    "WITH h AS (UPDATE audit_head SET seq = seq + 1, prev_hash = hash, hash = encode(sha256("
    "convert_to(hash, 'UTF8') || ?::bytea || convert_to((seq + 1)::text || '}', 'UTF8')), 'hex')"
    " WHERE id = 1 RETURNING seq, prev_hash, hash),"
    " e AS (INSERT INTO audit_log (seq, at, event, payload, prev_hash, hash)"
    " SELECT seq, ?, ?, ?, prev_hash, hash FROM h RETURNING seq)"
    " UPDATE releases SET commit_seq = (SELECT seq FROM e) WHERE id = ? RETURNING commit_seq"
)


def append(tx: Tx, *, at: str, event: str, payload: Mapping[str, object], commit_of_release: int | None = None) -> int:
    """Append one entry inside the caller's write transaction; returns its sequence number.

    Both backends store the same bytes; PostgreSQL does it in one round trip (``_PG_APPEND``).
    ``commit_of_release`` also points that release's ``commit_seq`` at the new entry, in the same
    statement on PostgreSQL, so the append stays the transaction's last statement (the head row is
    locked only for the commit).
    """
    text = canonical_json(payload)
    if tx.dialect == "postgresql":
        body = f'{{"at":{canonical_json(at)},"event":{canonical_json(event)},"payload":{text},"seq":'
        params: tuple[object, ...] = (body.encode("utf-8"), at, event, text)
        if commit_of_release is None:
            return int(tx.execute(_PG_APPEND, params)[0][0])
        return int(tx.execute(_PG_APPEND_COMMIT, (*params, commit_of_release))[0][0])
    if commit_of_release is not None:  # SQLite runs in process: no round trip is saved by folding
        seq = int(tx.execute("SELECT seq FROM audit_head WHERE id = 1")[0][0]) + 1
        tx.send("UPDATE releases SET commit_seq = ? WHERE id = ?", (seq, commit_of_release))
    seq, prev = tx.execute("SELECT seq, hash FROM audit_head WHERE id = 1{lock}")[0]
    seq = int(seq) + 1
    digest = entry_hash(prev, seq, at, event, text)
    tx.send(
        "INSERT INTO audit_log (seq, at, event, payload, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?)",
        (seq, at, event, text, prev, digest),
    )
    tx.send("UPDATE audit_head SET seq = ?, prev_hash = ?, hash = ? WHERE id = 1", (seq, prev, digest))
    return seq


def walk(tx: Tx) -> tuple[AuditReport, list[tuple[int, str, str, str, str]]]:
    """Walk the chain from the start: the report (first broken link, if any) and the entries read.

    Each entry is ``(seq, at, event, payload text, hash)``. The report says nothing of the tables:
    ``_verify.verify`` replays the entries against them.
    """
    head_seq, head_hash = tx.execute("SELECT seq, hash FROM audit_head WHERE id = 1")[0]
    rows = tx.execute("SELECT seq, at, event, payload, prev_hash, hash FROM audit_log ORDER BY seq")
    entries: list[tuple[int, str, str, str, str]] = []
    prev = GENESIS
    for count, (seq, at, event, payload, prev_hash, digest) in enumerate(rows, start=1):
        if int(seq) != count:
            return AuditReport(False, len(rows), head_hash, count, f"entry {count} is missing (found seq {seq})"), []
        if prev_hash != prev:
            return AuditReport(False, len(rows), head_hash, count, "prev_hash does not match the previous entry"), []
        try:
            recomputed = entry_hash(prev, int(seq), at, event, payload)
        except ValueError:
            return AuditReport(False, len(rows), head_hash, count, "payload is not valid JSON"), []
        if recomputed != digest:
            return AuditReport(False, len(rows), head_hash, count, "entry content does not match its hash"), []
        entries.append((int(seq), str(at), str(event), str(payload), str(digest)))
        prev = digest
    if int(head_seq) != len(rows) or head_hash != prev:
        report = AuditReport(False, len(rows), head_hash, len(rows) + 1, "the chain head does not match the last entry")
        return report, []
    return AuditReport(True, len(rows), head_hash), entries
