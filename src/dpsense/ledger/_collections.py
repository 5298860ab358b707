"""Local-DP collections in the ledger: registration, per-client report budgets, batches, estimates.

``Collections`` is a component of ``Ledger`` (``dpsense.ledger._ledger``), which delegates its
collection methods here. A collection gathers reports that each client randomized on its own device
(local DP, docs/collections.md); the server never sees a true value. What the ledger guarantees:

* **Registration** (``register_collection``): a row in ``datasets`` (collections and datasets share
  one name space, so a collection's estimates are ordinary releases of that name) and one in
  ``collections`` with the public scheme, the public dictionary (or none) and the per-client report
  budget. Audited ``register_collection``. Registering the same declaration again is a no-op;
  another declaration under a taken name is refused.
* **Per-client report budgets** (``ingest``): every accepted report of a client adds one to its row in
  ``collection_clients``, in the batch's transaction, under the condition that the count stays at
  most ``max_reports_per_client``: one ``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` per chunk of
  clients, so two concurrent batches can never take a client past its budget (the row lock orders
  them). A client whose reports in a batch would pass the budget has all of them in that batch
  refused; the others are accepted. The budget bounds each client's lifetime loss: each report is
  ε-LDP, so M reports cost at most M·ε (basic composition); with a memoized scheme (RAPPOR) the loss
  about any one value stays at most ε∞ however many reports (the scheme's ``guarantee``).
* **Idempotent batches**: a batch is keyed by (collection, submitter, batch id). Sent again with the
  same body (SHA-256 of its canonical JSON) it returns the stored outcome and changes nothing; with
  another body it is refused. The batch row stores the additive summary of its accepted reports
  (the server's sufficient statistics; reports are already randomized) and the accepted count per
  client. Audited ``ingest`` with the digests of both, so ``verify`` recomputes every client's count
  from the batches and finds an edited count, summary or batch.
* **Estimates** (``store_estimate``): an estimate is post-processing of the reports (Dwork-Roth Prop.
  2.1), so it costs no central budget: it is stored as an ordinary committed release whose charge
  has loss ε = 0, audited ``reserve`` and ``commit`` like any other. The collection's row is locked
  first, so identical concurrent requests store one release per cache key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dpsense.core.errors import RequestIdConflict, UnknownDataset, UsageError
from dpsense.core.privacy_loss import PureDP
from dpsense.ledger import _audit
from dpsense.ledger._amounts import canonical_json, loss_to_json
from dpsense.ledger._backends import Tx
from dpsense.ledger._context import LedgerContext
from dpsense.ledger._rows import answer_payload, cached_release, charge_payload, commit_payload, release_of_charge
from dpsense.ledger._states import ChargeState
from dpsense.ledger._steward import _iso
from dpsense.ledger._types import ReleaseRecord, Reservation, StoredRelease, _name
from dpsense.ledger._writes import insert_charge, store_release

#: The most reports one client may be allowed over a collection's life (a public declaration).
MAX_REPORTS_PER_CLIENT = 1_000_000
#: Clients upserted per statement (SQLite allows 32 766 parameters; three per client).
_CHUNK = 2_000
#: Why a report was refused (the only reason the ledger decides): its client's report budget.
CLIENT_BUDGET = "client_budget"

_COLLECTION_COLS = "c.id, d.name, c.scheme, c.dictionary, c.max_reports_per_client, c.created_at"


@dataclass(frozen=True)
class CollectionInfo:
    """A registered collection: its public declaration and public tallies (no report content)."""

    name: str
    scheme: dict[str, Any]
    dictionary: list[str] | None
    max_reports_per_client: int
    created_at: float
    #: Accepted reports, clients that sent at least one, and stored batches.
    reports: int
    clients: int
    batches: int
    #: Identifies the set of stored batches (their count and largest row id): the estimate's input.
    state: tuple[int, int]


@dataclass(frozen=True)
class IngestOutcome:
    """What a batch did: its row, how many reports were accepted, which were refused and why."""

    batch: int
    accepted: int
    #: (index of the report in the batch, reason) for each refused report, in batch order.
    refused: tuple[tuple[int, str], ...]
    #: True when this was a retry of a stored batch: nothing changed.
    replayed: bool


class Collections:
    """The collections of one ledger (its ``LedgerContext``): every write audited."""

    def __init__(self, context: LedgerContext) -> None:
        self._context = context

    def register_collection(
        self,
        name: str,
        *,
        scheme: Mapping[str, Any],
        dictionary: Sequence[str] | None,
        max_reports_per_client: int,
    ) -> None:
        """Register a collection (idempotent for the same declaration).

        ``scheme`` is the public scheme as JSON (checked by the caller, ``dpsense.device``), and
        ``dictionary`` the public candidate values or ``None``.

        Raises:
            RegistrationConflict: the name is a dataset, or a collection with another declaration.
            UsageError: a malformed name or report budget.

        """
        name = _name(name, "collection")
        if isinstance(max_reports_per_client, bool) or not isinstance(max_reports_per_client, int):
            raise UsageError("max_reports_per_client must be an integer", repr(max_reports_per_client), "pass e.g. 100")
        if not 1 <= max_reports_per_client <= MAX_REPORTS_PER_CLIENT:
            raise UsageError(
                f"max_reports_per_client must lie in [1, {MAX_REPORTS_PER_CLIENT:,}]",
                max_reports_per_client,
                "pass the most reports one client may send over the collection's life, e.g. 100",
            )
        scheme_text = canonical_json(dict(scheme))
        dictionary_text = None if dictionary is None else canonical_json(list(dictionary))
        now = self._context.clock()
        with self._context.backend.write() as tx:
            rows = tx.execute(
                "SELECT c.scheme, c.dictionary, c.max_reports_per_client FROM datasets d"
                " LEFT JOIN collections c ON c.dataset_id = d.id WHERE d.name = ?",
                (name,),
            )
            if rows:
                if (rows[0][0], rows[0][1], rows[0][2]) == (scheme_text, dictionary_text, max_reports_per_client):
                    return
                what = "a dataset" if rows[0][0] is None else "a collection with another declaration"
                raise UsageError(
                    f"the name is taken by {what}",
                    name,
                    "register the collection under a new name (a declaration never changes once reports arrive)",
                )
            dataset_id = tx.execute(
                "INSERT INTO datasets (name, fingerprint, created_at) VALUES (?, NULL, ?) RETURNING id", (name, now)
            )[0][0]
            tx.send(
                "INSERT INTO collections (dataset_id, scheme, dictionary, max_reports_per_client, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (int(dataset_id), scheme_text, dictionary_text, max_reports_per_client, now),
            )
            payload = {
                "collection": name,
                "scheme": json.loads(scheme_text),
                "dictionary_sha256": None if dictionary_text is None else _sha(dictionary_text),
                "max_reports_per_client": max_reports_per_client,
            }
            _audit.append(tx, at=_iso(now), event="register_collection", payload=payload)

    def collection(self, name: str) -> CollectionInfo:
        """The declaration and tallies of collection ``name``.

        Raises:
            UnknownDataset: no collection has that name.

        """
        with self._context.backend.read() as tx:
            row = _collection_row(tx, name)
            tallies = tx.execute(
                "SELECT COALESCE(SUM(reports), 0), COUNT(*) FROM collection_clients WHERE collection_id = ?",
                (int(row[0]),),
            )[0]
            batches = tx.execute(
                "SELECT COUNT(*), COALESCE(MAX(id), 0) FROM collection_batches WHERE collection_id = ?",
                (int(row[0]),),
            )[0]
        return CollectionInfo(
            str(row[1]),
            json.loads(str(row[2])),
            None if row[3] is None else json.loads(str(row[3])),
            int(row[4]),
            float(row[5]),
            int(tallies[0]),
            int(tallies[1]),
            int(batches[0]),
            (int(batches[0]), int(batches[1])),
        )

    def collection_names(self) -> list[str]:
        """Every registered collection, by name."""
        with self._context.backend.read() as tx:
            rows = tx.execute(
                "SELECT d.name FROM collections c JOIN datasets d ON d.id = c.dataset_id ORDER BY d.name", ()
            )
        return [str(r[0]) for r in rows]

    def ingest(
        self,
        name: str,
        *,
        submitter: str,
        batch_id: str,
        body_sha256: str,
        clients: Sequence[str],
        summarize: Callable[[Sequence[int]], Mapping[str, Any]],
    ) -> IngestOutcome:
        """Store one batch of reports: per-client budgets enforced, idempotent by (submitter, batch id).

        ``clients[i]`` is the client of the batch's report ``i``; ``summarize(accepted)`` returns the
        additive summary (JSON) of the reports at the accepted indices (called inside the
        transaction, once the budgets decided which are accepted). ``body_sha256`` identifies the
        batch's content for retries.

        Raises:
            UnknownDataset: no collection has that name.
            RequestIdConflict: the batch id was used by this submitter for another body.

        """
        batch_id = _name(batch_id, "batch id")
        now = self._context.clock()
        with self._context.backend.write() as tx:
            row = _collection_row(tx, name)
            collection_id, cap = int(row[0]), int(row[4])
            claimed = tx.execute(  # the batch key first: an identical concurrent batch waits here, then replays
                "INSERT INTO collection_batches (collection_id, submitter, batch_id, body_sha256, accepted, outcome,"
                " summary, created_at) VALUES (?, ?, ?, ?, 0, '', '', ?)"
                " ON CONFLICT (collection_id, submitter, batch_id) DO NOTHING RETURNING id",
                (collection_id, submitter, batch_id, body_sha256, now),
            )
            if not claimed:
                return _stored_batch(tx, collection_id, submitter, batch_id, body_sha256)
            batch = int(claimed[0][0])
            wanted: dict[str, int] = {}
            for client in clients:
                wanted[client] = wanted.get(client, 0) + 1
            granted = _grant(tx, collection_id, cap, {c: k for c, k in wanted.items() if k <= cap})
            accepted = [i for i, client in enumerate(clients) if client in granted]
            refused = [(i, CLIENT_BUDGET) for i, client in enumerate(clients) if client not in granted]
            summary_text = canonical_json(dict(summarize(accepted)))
            counts_text = canonical_json({c: wanted[c] for c in sorted(granted)})
            outcome_text = canonical_json({"clients": json.loads(counts_text), "refused": refused})
            tx.send(
                "UPDATE collection_batches SET accepted = ?, outcome = ?, summary = ? WHERE id = ?",
                (len(accepted), outcome_text, summary_text, batch),
            )
            payload = {
                "collection": name,
                "batch": int(batch),
                "submitter": submitter,
                "batch_id": batch_id,
                "body_sha256": body_sha256,
                "accepted": len(accepted),
                "outcome_sha256": _sha(outcome_text),
                "summary_sha256": _sha(summary_text),
            }
            _audit.append(tx, at=_iso(now), event="ingest", payload=payload)
        return IngestOutcome(batch, len(accepted), tuple(refused), False)

    def summaries(self, name: str) -> tuple[tuple[int, int], list[dict[str, Any]]]:
        """The stored batch summaries of collection ``name`` (oldest first) and the state they make."""
        with self._context.backend.read() as tx:
            row = _collection_row(tx, name)
            rows = tx.execute(
                "SELECT id, summary FROM collection_batches WHERE collection_id = ? ORDER BY id", (int(row[0]),)
            )
        state = (len(rows), max((int(r[0]) for r in rows), default=0))
        return state, [json.loads(str(r[1])) for r in rows]

    def store_estimate(
        self, name: str, *, analyst: str, request_id: str, cache_key: str, record: ReleaseRecord | None
    ) -> tuple[StoredRelease, bool] | None:
        """Store an estimate as a release at zero central cost; ``(stored release, True when stored now)``.

        A retry of the same (analyst, request id) and a request whose ``cache_key`` has a stored
        release return that release (audited ``replay`` / ``cache_hit``) and store nothing. With
        ``record=None`` the call only answers such a request and returns ``None`` (nothing written)
        when there is nothing to answer: the caller decodes the estimate only then.

        Raises:
            UnknownDataset, UnknownAnalyst: not registered.
            RequestIdConflict: the request id was used for another request.

        """
        request_id = _name(request_id, "request id")
        loss = PureDP(0)
        now = self._context.clock()
        with self._context.backend.write() as tx:
            dataset_id = int(_collection_row(tx, name, lock=True)[6])
            self._context.check_analyst(tx, analyst)
            base = Reservation(None, name, analyst, request_id, loss, ChargeState.RESERVED)
            existing = tx.execute(
                "SELECT id, dataset_id, cache_key, state FROM charges WHERE analyst = ? AND request_id = ?",
                (analyst, request_id),
            )
            if existing:
                if (int(existing[0][1]), existing[0][2]) != (dataset_id, cache_key):
                    raise RequestIdConflict(
                        "a request id is reused for a different request", request_id, "use a new request id"
                    )
                answer = release_of_charge(tx, int(existing[0][0]))
                event = "replay"
            else:
                hit = cached_release(tx, dataset_id, cache_key)
                if hit is None:
                    if record is None:
                        return None
                    return self._store(tx, base, dataset_id, cache_key, record, now), True
                answer, event = hit, "cache_hit"
            payload = answer_payload(base, answer.charge_id, answer.release_id)
            if event == "cache_hit":
                payload["cache_key"] = cache_key
            _audit.append(tx, at=_iso(now), event=event, payload=payload)
        return answer, False

    def _store(
        self, tx: Tx, base: Reservation, dataset_id: int, cache_key: str, record: ReleaseRecord, now: float
    ) -> StoredRelease:
        """Insert the zero-loss charge and its release, audited ``reserve`` then ``commit``."""
        loss_text = canonical_json(loss_to_json(base.loss))
        release = (
            canonical_json(record.value),
            record.mechanism,
            record.mechanism_version,
            canonical_json(record.parameters),
            record.privacy_unit,
            record.adjacency,
            record.code_version,
        )
        values = (dataset_id, base.analyst, base.request_id, loss_text, None, cache_key, "[]", "collection")
        charge_id = insert_charge(tx, (*values, now, now, None, now, None, None, cache_key))
        assert charge_id is not None  # the request id was checked absent in this transaction
        payload = charge_payload(charge_id, base, None, cache_key=cache_key, charged_at=now)
        _audit.append(tx, at=_iso(now), event="reserve", payload=payload)
        done = store_release(tx, charge_id, now, release)
        assert done is not None  # the charge was inserted open in this transaction
        release_id = done[0]
        payload = commit_payload(charge_id, release_id, cache_key, release)
        _audit.append(tx, at=_iso(now), event="commit", payload=payload, commit_of_release=release_id)
        value_json, mechanism, version, params_json, unit, adjacency, code = release
        params = json.loads(params_json)
        value = json.loads(value_json)
        return StoredRelease(
            release_id,
            charge_id,
            base.dataset,
            cache_key,
            value,
            mechanism,
            version,
            params,
            unit,
            adjacency,
            code,
            created_at=now,
        )


def _collection_row(tx: Tx, name: str, *, lock: bool = False) -> tuple[Any, ...]:
    rows = tx.execute(
        f"SELECT {_COLLECTION_COLS}, c.dataset_id FROM collections c JOIN datasets d ON d.id = c.dataset_id"
        " WHERE d.name = ?" + ("{lock}" if lock else ""),
        (name,),
    )
    if not rows:
        raise UnknownDataset(name)
    return tuple(rows[0])


def _stored_batch(tx: Tx, collection_id: int, submitter: str, batch_id: str, body_sha256: str) -> IngestOutcome:
    """The outcome of a stored batch, answered to its retry; a batch id reused for another body is refused."""
    rows = tx.execute(
        "SELECT id, body_sha256, accepted, outcome FROM collection_batches"
        " WHERE collection_id = ? AND submitter = ? AND batch_id = ?",
        (collection_id, submitter, batch_id),
    )
    if str(rows[0][1]) != body_sha256:
        raise RequestIdConflict(
            "a batch id is reused for a different batch of reports",
            batch_id,
            "send a new batch with a new batch_id (a retry must send the same reports)",
        )
    refused = json.loads(str(rows[0][3]))["refused"]
    return IngestOutcome(int(rows[0][0]), int(rows[0][2]), tuple((int(i), str(r)) for i, r in refused), True)


def _grant(tx: Tx, collection_id: int, cap: int, wanted: Mapping[str, int]) -> set[str]:
    """Add each client's reports to its count where the count stays within ``cap``; the clients granted.

    One upsert per chunk: a new client's row is inserted (its count is at most ``cap``, checked by
    the caller), an existing one is raised only when the sum stays within ``cap``; RETURNING names the
    rows written. The rows are written in sorted order, the lock order of every batch.
    """
    granted: set[str] = set()
    items = sorted(wanted.items())
    for start in range(0, len(items), _CHUNK):
        chunk = items[start : start + _CHUNK]
        values = ", ".join("(?, ?, ?)" for _ in chunk)
        params: list[object] = [v for client, k in chunk for v in (collection_id, client, k)]
        rows = tx.execute(
            f"INSERT INTO collection_clients (collection_id, client_id, reports) VALUES {values}"
            " ON CONFLICT (collection_id, client_id) DO UPDATE SET reports = collection_clients.reports"
            " + excluded.reports WHERE collection_clients.reports + excluded.reports <= ? RETURNING client_id",
            (*params, cap),
        )
        granted.update(str(r[0]) for r in rows)
    return granted


def compare_collections(
    tx: Tx, chain: Mapping[str, Mapping[str, Any]], batches: Mapping[int, Mapping[str, Any]]
) -> list[str]:
    """The problems ``verify`` finds in the collection tables against the audit chain.

    ``chain`` holds the ``register_collection`` payloads by name, ``batches`` the ``ingest`` payloads
    by batch row id. Every client's report count must equal the sum of its accepted reports over the
    batches, whose outcomes and summaries must match the digests the chain records.
    """
    out: list[str] = []
    rows = tx.execute(
        "SELECT d.name, c.id, c.scheme, c.dictionary, c.max_reports_per_client FROM collections c"
        " JOIN datasets d ON d.id = c.dataset_id",
        (),
    )
    table = {str(r[0]): r for r in rows}
    out += [f"collection {n!r} is in the chain but not in the table" for n in sorted(set(chain) - set(table))]
    out += [f"collection {n!r} is in the table but not in the chain" for n in sorted(set(table) - set(chain))]
    ids = {int(r[1]): str(r[0]) for r in rows}
    for name, r in sorted(table.items()):
        p = chain.get(name)
        dictionary = None if r[3] is None else _sha(str(r[3]))
        if p is not None and (
            json.loads(str(r[2])) != p["scheme"]
            or dictionary != p["dictionary_sha256"]
            or int(r[4]) != int(p["max_reports_per_client"])
        ):
            out.append(f"collection {name!r}: its declaration differs from the chain")
    counted: dict[tuple[str, str], int] = {}
    stored = tx.execute(
        "SELECT id, collection_id, submitter, batch_id, body_sha256, accepted, outcome, summary"
        " FROM collection_batches",
        (),
    )
    found = {int(r[0]) for r in stored}
    out += [f"batch {b} is in the chain but not in the table" for b in sorted(set(batches) - found)]
    for r in stored:
        b, name = int(r[0]), ids.get(int(r[1]), f"#{r[1]}")
        p = batches.get(b)
        if p is None:
            out.append(f"batch {b} is in the table but not in the chain")
            continue
        row = (name, str(r[2]), str(r[3]), str(r[4]), int(r[5]), _sha(str(r[6])), _sha(str(r[7])))
        keys = ("collection", "submitter", "batch_id", "body_sha256", "accepted", "outcome_sha256", "summary_sha256")
        if row != tuple(p[k] for k in keys):
            out.append(f"batch {b}: its row differs from the chain")
            continue
        for client, k in json.loads(str(r[6]))["clients"].items():
            counted[(name, client)] = counted.get((name, client), 0) + int(k)
    clients = {
        (ids.get(int(r[0]), f"#{r[0]}"), str(r[1])): int(r[2])
        for r in tx.execute("SELECT collection_id, client_id, reports FROM collection_clients", ())
    }
    for key in sorted(set(clients) | set(counted)):
        if clients.get(key, 0) != counted.get(key, 0):
            out.append(f"collection {key[0]!r}: a client's report count differs from its batches")
    return out


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
