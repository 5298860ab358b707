"""Dataset profiles: the public facts a steward registers with each named snapshot of a dataset.

A profile is a JSON object of public facts only (column kinds, declared bounds and keys, the privacy
unit, the adjacency, the per-column data policies, the privacy-policy record). It never holds a data
value or a count. One profile is stored per (dataset, snapshot version), with the snapshot's keyed
fingerprint (``keyed_fingerprint``), so that a later registration of the same data links to the same
dataset and budget (docs/design.md invariant 8) whichever snapshot of it matches.

``Profiles`` is a component of ``Ledger`` (which delegates its profile methods here): steward
operations, audited like the others (the audit payload names the snapshot and the SHA-256 of the
profile text, never the fingerprint).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dpsense.core.errors import InvalidData, UsageError
from dpsense.ledger import _audit
from dpsense.ledger._amounts import canonical_json
from dpsense.ledger._context import LedgerContext
from dpsense.ledger._rows import dataset_id as dataset_id_of
from dpsense.ledger._steward import _iso
from dpsense.ledger._types import _name


@dataclass(frozen=True)
class DatasetProfile:
    """A stored profile: the dataset, its snapshot version, the keyed fingerprint and the public facts.

    The fingerprint is for the steward and the release system only (it is keyed, so it reveals nothing
    about the content, but analysts have no use for it and never see it).
    """

    dataset: str
    snapshot: str
    fingerprint: str
    profile: dict[str, Any]
    created_at: float


_SNAPSHOTS = "SELECT snapshot FROM dataset_profiles WHERE dataset_id = ? ORDER BY id"


class Profiles:
    """The dataset profiles and dataset names of one ledger (its ``LedgerContext``)."""

    def __init__(self, context: LedgerContext) -> None:
        self._context = context

    def save_profile(self, dataset: str, *, snapshot: str, fingerprint: str, profile: Mapping[str, Any]) -> None:
        """Store the public profile of snapshot ``snapshot`` of ``dataset`` (idempotent when identical).

        Raises:
            UnknownDataset: the dataset is not registered.
            UsageError: the snapshot name is taken by other data or another profile (name a new one).
            InvalidData: the profile is not plain JSON.

        """
        snapshot = _name(snapshot, "snapshot")
        fingerprint = _name(fingerprint, "fingerprint")
        try:
            text = canonical_json(dict(profile))
        except (TypeError, ValueError):
            raise InvalidData(
                "a dataset profile must be plain JSON", type(profile).__name__, "pass strings, numbers, lists, dicts"
            ) from None
        now = self._context.clock()
        with self._context.backend.write() as tx:
            dataset_id = dataset_id_of(tx, dataset)
            rows = tx.execute(
                "SELECT fingerprint, profile FROM dataset_profiles WHERE dataset_id = ? AND snapshot = ?",
                (dataset_id, snapshot),
            )
            if rows:
                if rows[0][0] == fingerprint and rows[0][1] == text:
                    return
                raise UsageError(
                    "this snapshot version is already registered with other data or another profile",
                    snapshot,
                    "name the new snapshot, e.g. snapshot='2026-12'",
                )
            tx.execute(
                "INSERT INTO dataset_profiles (dataset_id, snapshot, fingerprint, profile, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (dataset_id, snapshot, fingerprint, text, now),
            )
            payload = {
                "dataset": dataset,
                "snapshot": snapshot,
                "fingerprint_sha256": hashlib.sha256(fingerprint.encode("utf-8")).hexdigest(),
                "profile_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            }
            _audit.append(tx, at=_iso(now), event="profile", payload=payload)

    def profile(self, dataset: str, snapshot: str | None = None) -> DatasetProfile:
        """The profile of ``snapshot`` (by default the latest registered one) of ``dataset``."""
        with self._context.backend.read() as tx:
            dataset_id = dataset_id_of(tx, dataset)
            if snapshot is None:
                rows = tx.execute(
                    "SELECT snapshot, fingerprint, profile, created_at FROM dataset_profiles"
                    " WHERE dataset_id = ? ORDER BY id DESC LIMIT 1",
                    (dataset_id,),
                )
            else:
                rows = tx.execute(
                    "SELECT snapshot, fingerprint, profile, created_at FROM dataset_profiles"
                    " WHERE dataset_id = ? AND snapshot = ?",
                    (dataset_id, snapshot),
                )
        if not rows:
            what = "any snapshot" if snapshot is None else f"snapshot {snapshot!r}"
            raise UsageError(
                f"the dataset has no profile for {what}", dataset, "register the dataset with its source first"
            )
        row = rows[0]
        return DatasetProfile(dataset, str(row[0]), str(row[1]), json.loads(row[2]), float(row[3]))

    def snapshots(self, dataset: str) -> list[str]:
        """The dataset's snapshot versions, oldest first.

        Read on every release of the service (``SharedSnapshots``): once the dataset's id is known it is
        one statement on its own (``Backend.select``), one round trip.
        """
        known = self._context.known_dataset_id(dataset)
        if known is not None:
            rows = self._context.backend.select(_SNAPSHOTS, (known,))
        else:
            with self._context.backend.read() as tx:
                rows = tx.execute(_SNAPSHOTS, (self._context.dataset_id(tx, dataset),))
        return [str(r[0]) for r in rows]

    def dataset_names(self) -> list[str]:
        """Every registered dataset, by name (local-DP collections are listed by ``collection_names``)."""
        with self._context.backend.read() as tx:
            rows = tx.execute(
                "SELECT name FROM datasets WHERE id NOT IN (SELECT dataset_id FROM collections) ORDER BY name", ()
            )
        return [str(r[0]) for r in rows]

    def dataset_for_fingerprint(self, fingerprint: str) -> tuple[str, str | None] | None:
        """The (dataset, snapshot) whose data has this keyed fingerprint, or ``None``."""
        with self._context.backend.read() as tx:
            rows = tx.execute(
                "SELECT d.name, p.snapshot FROM dataset_profiles p JOIN datasets d ON d.id = p.dataset_id"
                " WHERE p.fingerprint = ? ORDER BY p.id LIMIT 1",
                (fingerprint,),
            )
            if rows:
                return str(rows[0][0]), str(rows[0][1])
            rows = tx.execute("SELECT name FROM datasets WHERE fingerprint = ?", (fingerprint,))
        return (str(rows[0][0]), None) if rows else None
