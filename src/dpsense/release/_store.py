"""The checked snapshot store: registered snapshots kept as files beside the ledger, attached in O(1).

Registration reads the data once (checks, policies, keyed fingerprint, unit index); without a store
every later process had to do it again to attach (a minute at 10^7 rows). With one, registration
also writes the prepared snapshot (policies applied, index and stored grid units included) to a
file, and a manifest beside it:

- ``<stem>.duckdb``: the snapshot, one table, written once to a temporary name, then renamed;
- ``<stem>.json``: dataset, snapshot, the registered keyed fingerprint, the public schema, the file's
  identity (inode, size, modification and change times) and a keyed checksum of its bytes, the
  whole sealed by an HMAC.

Both MACs use a key derived from the ledger's secret fingerprint key, so a manifest cannot be forged
or moved to another snapshot without the ledger. Attaching checks, before it reads anything:

1. the manifest's HMAC, and that it names this dataset, snapshot, registered fingerprint and the
   digest of the declarations the ledger holds (``declarations_digest``);
2. the file's identity as recorded; if it moved (a copy, a restore), its keyed checksum instead —
   one sequential read of the file, no query — and the manifest is resealed with the new identity;
3. the schema of the file's table, against the manifest's.

Anything that fails is not an error: the store is a cache of work already checked, and the attach
falls back to the source and its full fingerprint check, as without a store (and stores again).
``verify`` re-reads the whole file on demand (``dpsense dataset verify``). The store holds the
private data: it is created owner-only (0700 / 0600), like the ledger it sits beside
(docs/threat-model.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpsense.core.errors import DPSenseError
from dpsense.engine import ClippedSum, ColumnInfo, SnapshotFiles, StewardEngine, TableInfo
from dpsense.noise.entropy import random_bytes

#: Bumped when the file layout or the manifest changes; older manifests are then ignored (re-stored).
STORE_FORMAT = 2
_STORE_SUFFIX = ".store"
_CHUNK = 1 << 22


@dataclass(frozen=True)
class SnapshotStore:
    """A directory of prepared snapshot files (see the module docstring)."""

    directory: Path

    @classmethod
    def beside(cls, url: str) -> SnapshotStore | None:
        """The default store of a ledger URL: ``<ledger file>.store`` for a SQLite file, else none.

        A PostgreSQL ledger has no file to sit beside: pass ``store=`` a directory the steward's and the
        analysts' processes share.
        """
        prefix = "sqlite:///"
        if not url.startswith(prefix):
            return None
        path = url[len(prefix) :].split("?", 1)[0]
        if not path or path == ":memory:" or path.startswith("file::memory:"):
            return None
        return cls(Path(path + _STORE_SUFFIX))

    def files(self, dataset: str, snapshot: str, key: bytes, declarations: str) -> tuple[Path, Path]:
        """The snapshot file and its manifest for (``dataset``, ``snapshot``) prepared under ``declarations``.

        The name is a keyed hash (``key``: the ledger's) of the three: ledgers sharing a store directory
        never share a file, two registrations of one snapshot under other declarations (a race, a
        copied ledger) never share one, and the names do not show which datasets the store holds.
        """
        name = f"{dataset}\0{snapshot}\0{declarations}".encode()
        stem = hmac.new(_derived(key, b"name"), name, hashlib.sha256).hexdigest()[:32]
        return self.directory / f"{stem}.duckdb", self.directory / f"{stem}.json"

    def save(
        self,
        engine: StewardEngine,
        table: str,
        *,
        info: TableInfo,
        dataset: str,
        snapshot: str,
        fingerprint: str,
        key: bytes,
        declarations: str,
    ) -> bool:
        """Store the prepared snapshot ``table`` (schema ``info``); False (nothing stored) where the engine cannot.

        The file is written under a temporary name and renamed into place, the manifest last, so a
        crash leaves either the previous pair (whose checks then fail and fall back) or the new one.
        """
        if not (isinstance(engine, SnapshotFiles) and engine.stores_snapshots):
            return False
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        path, manifest = self.files(dataset, snapshot, key, declarations)
        scratch = path.with_name(f".{path.stem}.{random_bytes(8).hex()}.tmp")
        try:
            engine.save_snapshot(table, scratch)
            os.chmod(scratch, 0o600)
            checksum = file_checksum(scratch, key)
            os.replace(scratch, path)
        finally:
            for leftover in (scratch, scratch.with_name(scratch.name + ".wal")):
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()
        body = {
            "format": STORE_FORMAT,
            "dataset": dataset,
            "snapshot": snapshot,
            "fingerprint": fingerprint,
            "declarations": declarations,
            "columns": [[c.name, c.sql_type, c.kind] for c in info.columns],
            "checksum": checksum,
            "identity": _identity(path),
        }
        _write_manifest(manifest, body, key)
        return True

    def load(
        self,
        engine: StewardEngine,
        table: str,
        *,
        dataset: str,
        snapshot: str,
        fingerprint: str,
        key: bytes,
        declarations: str,
        unit_column: str,
        sums: Sequence[ClippedSum],
        group_columns: Sequence[str] = (),
        full_check: bool = False,
    ) -> bool:
        """Attach the stored snapshot as ``table``; False (nothing attached) when any check fails.

        ``declarations`` is the digest of the profile the ledger holds for the snapshot: a file
        prepared under other declarations (other policies or bounds: other rows, other stored sums) is
        never attached. A write-ahead log beside the file (``.wal``, which DuckDB would replay even
        read-only) refuses it too. ``full_check`` re-reads the file's keyed checksum even when its
        identity is unchanged.
        """
        if not (isinstance(engine, SnapshotFiles) and engine.stores_snapshots):
            return False
        path, manifest = self.files(dataset, snapshot, key, declarations)
        body = _read_manifest(manifest, key)
        expected = (dataset, snapshot, fingerprint, declarations)
        if (
            body is None
            or (body["dataset"], body["snapshot"], body["fingerprint"], body.get("declarations")) != expected
        ):
            return False
        if os.path.lexists(f"{path}.wal"):  # DuckDB replays a .wal on attach: data the checksum never saw
            return False
        try:
            identity = _identity(path)
        except OSError:
            return False
        if full_check or identity != body["identity"]:
            if file_checksum(path, key) != body["checksum"]:
                return False
            if identity != body["identity"]:
                with contextlib.suppress(OSError):
                    _write_manifest(manifest, {**body, "identity": identity}, key)
        info = TableInfo(table, tuple(ColumnInfo(str(n), str(t), str(k)) for n, t, k in body["columns"]))
        try:
            engine.load_snapshot(
                table, path, info=info, unit_column=unit_column, sums=sums, group_columns=group_columns
            )
        except DPSenseError:  # a file that does not hold the registered schema: use the source instead
            return False
        return True


def file_checksum(path: Path, key: bytes) -> str:
    """HMAC-SHA256 of the file's bytes under a key derived from the ledger's fingerprint key."""
    mac = hmac.new(_derived(key, b"file"), digestmod=hashlib.sha256)
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            mac.update(chunk)
    return mac.hexdigest()


def _identity(path: Path) -> list[int]:
    """What changes when the file is replaced, modified or moved: inode, size, mtime and ctime in ns."""
    st = path.stat()
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _derived(key: bytes, purpose: bytes) -> bytes:
    return hmac.new(key, b"dpsense snapshot store/" + purpose, hashlib.sha256).digest()


def _seal(body: dict[str, Any], key: bytes) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hmac.new(_derived(key, b"manifest"), text.encode(), hashlib.sha256).hexdigest()


def _write_manifest(manifest: Path, body: dict[str, Any], key: bytes) -> None:
    scratch = manifest.with_name(f".{manifest.stem}.{random_bytes(8).hex()}.tmp")
    sealed = {**body, "mac": _seal(body, key)}
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(sealed, handle, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(scratch, manifest)


def _read_manifest(manifest: Path, key: bytes) -> dict[str, Any] | None:
    """The manifest's body when it parses, is of this format and its HMAC holds; else None."""
    try:
        sealed = json.loads(manifest.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(sealed, dict) or sealed.get("format") != STORE_FORMAT:
        return None
    mac = sealed.pop("mac", None)
    if not isinstance(mac, str) or not hmac.compare_digest(mac, _seal(sealed, key)):
        return None
    return sealed


def declarations_digest(profile_json: dict[str, Any]) -> str:
    """SHA-256 of a profile's declarations (its JSON without the source path and the public unit count)."""
    declared = {k: v for k, v in profile_json.items() if k not in ("source", "units")}
    return hashlib.sha256(json.dumps(declared, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
