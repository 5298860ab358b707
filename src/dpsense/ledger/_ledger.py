"""The ledger: budgets, the reserve -> commit | fail lifecycle, cached releases, the audit chain.

One ``Ledger`` object wraps one backend connection; pass it to whoever releases (it is never a
global). Every write is one backend transaction: budget rows of the dataset are locked (``BEGIN
IMMEDIATE`` on SQLite, ``SELECT ... FOR UPDATE`` on PostgreSQL), the check against every applicable
scope is done in exact arithmetic, the debit, the charge row and the audit entry are written, and
the transaction commits, all before the caller reads any data. Lock order (budgets, then charge,
then the audit head) is the same in every write, so writers cannot deadlock.

Round trips inside a write are kept few (they are paid while the locks are held): one locking
SELECT for every scope, the charge inserted with ``ON CONFLICT DO NOTHING RETURNING`` (a conflict
means a retry, answered from the stored row before anything is written), the debits in one UPDATE,
and on PostgreSQL the commit step and the audit append each in one statement (``_writes``,
``_audit``). Reads and the writes that depend on them are always in the same transaction.

The state machine is in ``_states``. Bad input is refused before the transaction writes anything:
the ledger's bytes are unchanged. Refusals (including ``BudgetExhausted``) are not audited, for
the same reason. Answers given from the ledger without a new charge (a cache hit, the replay of a
committed request, the resumption of an open one) are audited, so the steward sees every answer.

Single flight per cache key (docs/design.md invariant 5, docs/ledger.md): a reservation with a cache key
holds that key (``charges.flight_key``, unique per dataset) until it commits or fails. ``reserve``
for a held key does not charge: it waits (short read-only polls, outside any transaction) until
the holder commits (the stored release is returned, audited ``cache_hit``) or fails (the waiter
reserves itself). The wait for one holder is bounded by the lease ``lease_s``, counted from the
holder's last reserve (its ``updated_at``) or from the start of the wait, whichever ends first;
a holder still pending after its lease, or marked ABANDONED by ``resolve_stale``, is superseded:
it becomes FAILED (stays spent, audited ``fail`` with ``superseded``), can never commit, and the
waiter reserves anew. ``commit`` never stores a second release for a key that has one.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from dpsense.accounting.pld import PldEvent
from dpsense.core.errors import (
    DPSenseError,
    InvalidData,
    LedgerStateError,
    LedgerUnreadable,
    RequestIdConflict,
    UsageError,
)
from dpsense.core.privacy_loss import PrivacyLoss
from dpsense.ledger import _audit, _partitions, _verify
from dpsense.ledger._amounts import (
    Pair,
    as_loss,
    canonical_json,
    check_positive,
    loss_from_json,
    loss_to_json,
)
from dpsense.ledger._audit import AuditReport
from dpsense.ledger._backends import Backend, Row, Tx, open_backend
from dpsense.ledger._collections import CollectionInfo, Collections, IngestOutcome
from dpsense.ledger._context import LedgerContext
from dpsense.ledger._events import check_event, event_to_json
from dpsense.ledger._partitions import GroupCharge, PartitionSpec, check_partition, group_key, payload_json
from dpsense.ledger._profiles import DatasetProfile, Profiles
from dpsense.ledger._rows import (
    BUDGET_COLS,
    CHARGE_COLS,
    RELEASE_COLS,
    BudgetRow,
    Plan,
    answer_payload,
    apply_debits,
    cached_release,
    charge_id_of,
    charge_payload,
    commit_payload,
    debits_json,
    plan_debits,
    release_of_charge,
    remaining,
    stored,
)
from dpsense.ledger._rows import dataset_id as dataset_id_of
from dpsense.ledger._service import Role, TokenIdentity, TokenInfo, Tokens
from dpsense.ledger._states import OPEN_STATES, SPENT_STATES, ChargeState, check_transition
from dpsense.ledger._steward import Accounting, Stewardship, _iso
from dpsense.ledger._types import (
    BudgetStatus,
    ChargeRecord,
    ReleaseRecord,
    Reservation,
    Scope,
    StoredRelease,
    _name,
)
from dpsense.ledger._verify import Anchor
from dpsense.ledger._writes import flight_holder, insert_charge, refund, store_release, supersede

#: How long a pending reservation with a cache key holds it against identical requests (seconds).
DEFAULT_LEASE_S = 120.0
_POLL_FIRST_S = 0.002
_POLL_MAX_S = 0.05


@dataclass(frozen=True)
class _Wait:
    """``reserve`` found the cache key held by another pending charge: wait for it, then look again."""

    charge_id: int
    updated_at: float


@dataclass(frozen=True)
class _Request:
    """A reserve request, checked, with the canonical texts its charge row stores (a retry must match them)."""

    dataset: str
    analyst: str
    request_id: str
    loss: PrivacyLoss
    family: str | None
    cache_key: str | None
    event: PldEvent | None
    partition: PartitionSpec | None
    event_json: dict[str, Any] | None
    event_text: str | None
    loss_text: str


@dataclass(frozen=True)
class _Attempt:
    """One reserve transaction (``Ledger._reserve_once``): the request, its time, what ``_begin`` read.

    ``since`` is when this ``reserve`` started waiting for each holder it waited for (by charge id
    and the holder's ``updated_at``); ``same`` is what a stored charge of the request id must match
    to be this request's retry (dataset, loss, family, cache key, event, partition group).
    """

    tx: Tx
    now: float
    request: _Request
    since: dict[tuple[int, float], float]
    dataset_id: int
    budgets: list[BudgetRow]
    group: GroupCharge | None
    base: Reservation
    same: tuple[int, str, str | None, str | None, str | None, tuple[int | None, str | None]]
    #: The new spend of each budget (by id) this attempt debited (``_debit``): the figures it answers with.
    debited: dict[int, Pair] = field(default_factory=dict)

    def existing(self) -> Row | None:
        """The stored charge of this (analyst, request id), or ``None``.

        Locked: on PostgreSQL a concurrent commit of this row is waited for, not read stale.
        """
        rows = self.tx.execute(
            f"SELECT {CHARGE_COLS} FROM charges WHERE analyst = ? AND request_id = ?{{lock}}",
            (self.request.analyst, self.request.request_id),
        )
        return rows[0] if rows else None


class Committed(NamedTuple):
    """The outcome of ``commit_outcome``: the stored release, and whether this call stored it.

    ``charged`` is False when another completion of the same charge won (the caller's value is
    discarded and the caller was not the one that paid for the answer it returns).
    """

    stored: StoredRelease
    charged: bool


@dataclass(frozen=True)
class SpendPoint:
    """One spending charge: when it was debited (Unix seconds), by whom, the exact loss and its state."""

    at: float
    analyst: str
    loss: PrivacyLoss
    state: ChargeState


class _Refused(NamedTuple):
    error: LedgerStateError


class Ledger:
    """A persistent, atomic privacy-budget ledger over SQLite or PostgreSQL.

    The reserve -> commit | fail lifecycle and the reads are the ledger's own; the steward's
    operations (``Stewardship``), the dataset profiles (``Profiles``) and the API tokens (``Tokens``)
    are components that share the ledger's ``LedgerContext`` (backend, clock, id caches). Their
    methods are the ledger's public API: each ledger method below delegates to one of them, whose
    docstring has the details.
    """

    def __init__(
        self, backend: Backend, *, clock: Callable[[], float] = time.time, lease_s: float = DEFAULT_LEASE_S
    ) -> None:
        if isinstance(lease_s, bool) or not isinstance(lease_s, (int, float)) or not 0 < lease_s < float("inf"):
            raise UsageError(
                "the lease of a pending reservation is a positive number of seconds",
                lease_s,
                f"pass e.g. lease_s={DEFAULT_LEASE_S:g} (longer than the slowest release)",
            )
        self._context = LedgerContext(backend, clock)
        self._lease_s = float(lease_s)
        # Identifies this process's reservations (only the reserving process may refund one).
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{time.time_ns()}:{id(self)}"
        self._stewardship = Stewardship(self._context)
        self._profiles = Profiles(self._context)
        self._tokens = Tokens(self._context)
        self._collections = Collections(self._context)

    @classmethod
    def open(cls, url: str, *, clock: Callable[[], float] = time.time, lease_s: float = DEFAULT_LEASE_S) -> Ledger:
        """Open (and migrate) ``sqlite:///path.db`` or ``postgresql://...``.

        ``lease_s`` bounds how long an identical request waits for a pending one (single flight).
        """
        return cls(open_backend(url), clock=clock, lease_s=lease_s)

    @classmethod
    def open_existing(cls, url: str, *, lease_s: float = DEFAULT_LEASE_S) -> Ledger:
        """Open a ledger that must exist already (for verification): never creates an empty one.

        Raises:
            LedgerUnreadable: a missing, empty, truncated or corrupt file, or no ledger in the database.

        """
        return cls(_verify.open_existing_backend(url), lease_s=lease_s)

    @property
    def lease_s(self) -> float:
        """The lease of a pending reservation with a cache key (the wait bound of single flight)."""
        return self._lease_s

    def close(self) -> None:
        """Close the connection."""
        self._context.backend.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ steward (``Stewardship``)

    def add_analyst(self, name: str) -> None:
        """Allow ``name`` to charge (idempotent): ``Stewardship.add_analyst``."""
        self._stewardship.add_analyst(name)

    def register_dataset(
        self, name: str, *, budget: PrivacyLoss, fingerprint: str | None = None, accounting: Accounting | None = None
    ) -> str:
        """Register a dataset with its total budget; its ledger name: ``Stewardship.register_dataset``."""
        return self._stewardship.register_dataset(name, budget=budget, fingerprint=fingerprint, accounting=accounting)

    def set_budget(self, dataset: str, scope: Scope, cap: PrivacyLoss, *, accounting: Accounting | None = None) -> None:
        """Create or change the cap of a scope (sub-budgets subdivide): ``Stewardship.set_budget``."""
        self._stewardship.set_budget(dataset, scope, cap, accounting=accounting)

    def fingerprint_key(self) -> bytes:
        """The secret key for keyed snapshot fingerprints: ``Stewardship.fingerprint_key``."""
        return self._stewardship.fingerprint_key()

    def resolve_stale(self, *, older_than_s: float) -> int:
        """Mark stale reservations ABANDONED (they stay charged): ``Stewardship.resolve_stale``."""
        return self._stewardship.resolve_stale(older_than_s=older_than_s)

    # ------------------------------------------------------------------ profiles (``Profiles``)

    def save_profile(self, dataset: str, *, snapshot: str, fingerprint: str, profile: Mapping[str, Any]) -> None:
        """Store the public profile of a snapshot of ``dataset``: ``Profiles.save_profile``."""
        self._profiles.save_profile(dataset, snapshot=snapshot, fingerprint=fingerprint, profile=profile)

    def profile(self, dataset: str, snapshot: str | None = None) -> DatasetProfile:
        """The profile of ``snapshot`` (by default the latest) of ``dataset``: ``Profiles.profile``."""
        return self._profiles.profile(dataset, snapshot)

    def snapshots(self, dataset: str) -> list[str]:
        """The dataset's snapshot versions, oldest first: ``Profiles.snapshots``."""
        return self._profiles.snapshots(dataset)

    def dataset_names(self) -> list[str]:
        """Every registered dataset, by name: ``Profiles.dataset_names``."""
        return self._profiles.dataset_names()

    def dataset_for_fingerprint(self, fingerprint: str) -> tuple[str, str | None] | None:
        """The (dataset, snapshot) of a keyed fingerprint, or ``None``: ``Profiles.dataset_for_fingerprint``."""
        return self._profiles.dataset_for_fingerprint(fingerprint)

    # ------------------------------------------------------------------ API tokens (``Tokens``)

    def create_token(
        self, analyst: str, *, role: Role = "analyst", expires_at: float | None = None, ttl_s: float | None = None
    ) -> str:
        """A new API token for ``analyst``, returned this once: ``Tokens.create_token``."""
        return self._tokens.create_token(analyst, role=role, expires_at=expires_at, ttl_s=ttl_s)

    def verify_token(self, token: str) -> TokenIdentity | None:
        """Who ``token`` speaks for, or ``None`` for every refusal: ``Tokens.verify_token``."""
        return self._tokens.verify_token(token)

    def revoke_token(self, token_id: str) -> bool:
        """Revoke a token by its public id; False when none is active: ``Tokens.revoke_token``."""
        return self._tokens.revoke_token(token_id)

    def tokens(self, analyst: str | None = None) -> list[TokenInfo]:
        """Every token (of ``analyst`` when given), without secrets or hashes: ``Tokens.tokens``."""
        return self._tokens.tokens(analyst)

    # ------------------------------------------------------------------ local-DP collections (``Collections``)

    def register_collection(
        self, name: str, *, scheme: Mapping[str, Any], dictionary: Sequence[str] | None, max_reports_per_client: int
    ) -> None:
        """Register a local-DP collection: ``Collections.register_collection``."""
        self._collections.register_collection(
            name, scheme=scheme, dictionary=dictionary, max_reports_per_client=max_reports_per_client
        )

    def collection(self, name: str) -> CollectionInfo:
        """A collection's declaration and tallies: ``Collections.collection``."""
        return self._collections.collection(name)

    def collection_names(self) -> list[str]:
        """Every registered collection: ``Collections.collection_names``."""
        return self._collections.collection_names()

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
        """Store a batch of reports under per-client budgets, idempotently: ``Collections.ingest``."""
        return self._collections.ingest(
            name, submitter=submitter, batch_id=batch_id, body_sha256=body_sha256, clients=clients, summarize=summarize
        )

    def collection_summaries(self, name: str) -> tuple[tuple[int, int], list[dict[str, Any]]]:
        """A collection's stored batch summaries and their state: ``Collections.summaries``."""
        return self._collections.summaries(name)

    def store_estimate(
        self, name: str, *, analyst: str, request_id: str, cache_key: str, record: ReleaseRecord | None
    ) -> tuple[StoredRelease, bool] | None:
        """Store a collection's estimate as a zero-cost release: ``Collections.store_estimate``."""
        return self._collections.store_estimate(
            name, analyst=analyst, request_id=request_id, cache_key=cache_key, record=record
        )

    # ------------------------------------------------------------------ lifecycle

    def reserve(
        self,
        *,
        dataset: str,
        analyst: str,
        request_id: str,
        loss: PrivacyLoss,
        family: str | None = None,
        cache_key: str | None = None,
        event: PldEvent | None = None,
        partition: PartitionSpec | None = None,
    ) -> Reservation:
        """Atomically check and debit every scope the request falls in, before any data is read.

        Returns a ``Reservation``; when ``reservation.stored`` is set (a retry of a committed
        request, or a cache hit on ``cache_key``) the caller returns it and runs nothing; that
        answer is audited (``replay`` / ``cache_hit``) without a charge.

        ``event`` describes the release for PLD-accounted scopes (``LaplaceEvent(scale,
        sensitivity)`` or ``GaussianEvent(sigma, sensitivity)``); basic and zCDP scopes charge
        ``loss``, PLD scopes compose the events. The caller states both and must make them agree.

        ``partition`` (``PartitionSpec``) declares that the release reads only one part of a public
        partition of the privacy units: charges on different parts of the same rule compose in
        parallel (the sum of the C₀ largest part spends under add/remove, of the 2·C₀ largest under
        replace; see ``_partitions``). PLD-accounted scopes refuse it.

        Single flight: while another reservation with the same ``cache_key`` on the dataset is
        pending, this call waits (at most the lease ``lease_s`` for any one holder) and returns its
        stored release as a cache hit, or reserves itself when the holder failed; a holder past its
        lease is superseded (FAILED, spent, it can never commit). See the module docstring.

        Raises:
            BudgetExhausted: a scope cannot cover ``loss`` (nothing written).
            UnknownDataset, UnknownAnalyst, RequestIdConflict, InvalidPrivacyParameter,
            UnsupportedRequest: bad input, or a PLD scope and no ``event`` (nothing written).

        """
        loss = check_positive(loss)
        event = check_event(event)
        partition = check_partition(partition)
        event_json = None if event is None else event_to_json(event)
        event_text = None if event_json is None else canonical_json(event_json)
        request_id = _name(request_id, "request id")
        family = None if family is None else _name(family, "query family")
        cache_key = None if cache_key is None else _name(cache_key, "cache key")
        loss_text = canonical_json(loss_to_json(loss))
        request = _Request(
            dataset, analyst, request_id, loss, family, cache_key, event, partition, event_json, event_text, loss_text
        )
        since: dict[tuple[int, float], float] = {}
        while True:
            outcome = self._reserve_once(request, since)
            if isinstance(outcome, Reservation):
                return outcome
            start = since.setdefault((outcome.charge_id, outcome.updated_at), time.monotonic())
            self._await_holder(outcome, start)

    def _await_holder(self, wait: _Wait, start: float) -> None:
        """Poll (read-only, no locks held) until the holder is no longer pending or its lease ended."""
        delay = _POLL_FIRST_S
        while True:
            rows = self._context.backend.select(
                "SELECT state, flight_key, updated_at FROM charges WHERE id = ?", (wait.charge_id,)
            )
            if not rows or rows[0][1] is None or rows[0][0] != ChargeState.RESERVED.value:
                return
            if float(rows[0][2]) != wait.updated_at:  # resumed by a retry: a new lease, look again
                return
            if time.monotonic() - start >= self._lease_s or self._context.clock() - wait.updated_at >= self._lease_s:
                return
            time.sleep(delay)
            delay = min(2 * delay, _POLL_MAX_S)

    def _reserve_once(self, request: _Request, since: dict[tuple[int, float], float]) -> Reservation | _Wait:
        """One reserve transaction: a Reservation, or ``_Wait`` when another charge holds the cache key.

        The steps, in this order inside the transaction: ``_begin`` (the ids, the locked budgets, the
        partition group); for a request with a cache key ``_single_flight`` (its retry, a wait for the
        key's holder, or a cache hit); then, when nothing answered it, ``_charge`` (check the budgets,
        insert the charge, debit, audit).
        """
        now = self._context.clock()
        with self._context.backend.write() as tx:
            attempt = self._begin(tx, now, request, since)
            answer = None if request.cache_key is None else self._single_flight(attempt, request.cache_key)
            if isinstance(answer, _Wait):
                return answer
            reservation = answer if answer is not None else self._charge(attempt)
        return _replace(reservation, budgets=_figures(request.dataset, attempt))

    def _begin(self, tx: Tx, now: float, request: _Request, since: dict[tuple[int, float], float]) -> _Attempt:
        """Look up the dataset and the analyst, lock every budget the request falls in, resolve its group.

        The budgets are the total and the analyst, family and period scopes that apply at ``now``,
        locked in id order (the lock order of every write). Nothing is written.
        """
        dataset_id = self._context.dataset_id(tx, request.dataset)
        self._context.check_analyst(tx, request.analyst)
        budgets = [
            BudgetRow(row)
            for row in tx.execute(
                f"SELECT {BUDGET_COLS} FROM budgets WHERE dataset_id = ? AND (scope_kind = 'total'"
                " OR (scope_kind = 'analyst' AND scope_value = ?) OR (scope_kind = 'family' AND scope_value = ?)"
                " OR (scope_kind = 'period' AND period_start <= ? AND period_end > ?)) ORDER BY id{lock}",
                (dataset_id, request.analyst, request.family or "", int(now), int(now)),
            )
        ]
        group = _partitions.resolve(tx, dataset_id, request.partition)
        base = Reservation(
            None, request.dataset, request.analyst, request.request_id, request.loss, ChargeState.RESERVED
        )
        same = (dataset_id, request.loss_text, request.family, request.cache_key, request.event_text, group_key(group))
        return _Attempt(tx, now, request, since, dataset_id, budgets, group, base, same)

    def _single_flight(self, attempt: _Attempt, cache_key: str) -> Reservation | _Wait | None:
        """Answer a request with a cache key before charging it: as a retry, a wait for the key's holder, or a hit.

        A stored charge of the request id (not refunded) is answered as its retry, unless it is the
        key's fresh holder (the request runs elsewhere: wait). Another fresh holder is waited for;
        a holder past its lease is superseded first (``_supersede``). The holder is read before the
        cache (see ``commit``). ``None``: nothing answers the request, charge it.
        """
        row = attempt.existing()
        holder = flight_holder(attempt.tx, attempt.dataset_id, cache_key)  # before the cache read (see commit)
        if row is not None and ChargeState(row[2]) != ChargeState.REFUNDED:
            if holder is not None and int(holder[0]) == int(row[0]) and self._fresh(attempt, holder):
                return _Wait(int(holder[0]), float(holder[2]))  # this request is running elsewhere
            return self._retry(attempt, row)
        if holder is not None and not self._supersede(attempt, holder):
            return _Wait(int(holder[0]), float(holder[2]))
        return self._cache_hit(attempt, cache_key)

    def _fresh(self, attempt: _Attempt, holder: Row) -> bool:
        """The holder is pending inside its lease (by the ledger clock and by this wait)."""
        if holder[1] != ChargeState.RESERVED.value:
            return False  # ABANDONED: resolve_stale found it stale already
        updated = float(holder[2])
        start = attempt.since.get((int(holder[0]), updated))
        waited = 0.0 if start is None else time.monotonic() - start
        return attempt.now - updated < self._lease_s and waited < self._lease_s

    def _supersede(self, attempt: _Attempt, holder: Row) -> bool:
        """Take the cache key from a holder past its lease: it becomes FAILED (stays spent), audited ``fail``.

        False (nothing written) when the holder is still fresh, or changed meanwhile: wait for it.
        """
        if self._fresh(attempt, holder):
            return False
        if not supersede(attempt.tx, int(holder[0]), attempt.now):  # pragma: no cover - it changed meanwhile
            return False
        payload = {"charge": int(holder[0]), "refunded": False, "superseded": "lease expired"}
        _audit.append(attempt.tx, at=_iso(attempt.now), event="fail", payload=payload)
        return True

    def _cache_hit(self, attempt: _Attempt, cache_key: str) -> Reservation | None:
        """The key's stored release as the answer, audited ``cache_hit`` (no charge); ``None`` when it has none."""
        stored = cached_release(attempt.tx, attempt.dataset_id, cache_key)
        if stored is None:
            return None
        payload = answer_payload(attempt.base, stored.charge_id, stored.release_id)
        _audit.append(attempt.tx, at=_iso(attempt.now), event="cache_hit", payload=payload | {"cache_key": cache_key})
        return _replace(attempt.base, charge_id=stored.charge_id, state=ChargeState.COMMITTED, stored=stored)

    def _charge(self, attempt: _Attempt) -> Reservation:
        """Check the request against every locked budget, then write its charge (``_write_charge``).

        A refusal of a request without a cache key whose id is stored already answers it as a retry
        (a retry is answered even when a new charge would be refused); otherwise the refusal is raised,
        nothing written.
        """
        request = attempt.request
        try:
            plan = plan_debits(
                attempt.tx,
                attempt.budgets,
                request.loss,
                dataset_id=attempt.dataset_id,
                event=request.event,
                group=attempt.group,
            )
        except DPSenseError:  # a retry is answered even when a new charge would be refused
            if request.cache_key is None and (row := attempt.existing()) is not None:
                return self._retry(attempt, row)
            raise
        return self._write_charge(attempt, plan)

    def _write_charge(self, attempt: _Attempt, plan: Plan) -> Reservation:
        """Insert the new charge (holding its cache key), apply the debits, audit ``reserve``.

        A new partition group is stored first. When the insert conflicts (the request id exists,
        nothing was written) the stored charge answers it as a retry.
        """
        request, tx, now = attempt.request, attempt.tx, attempt.now
        group = attempt.group
        if request.partition is not None and group is not None:
            group = _partitions.store(tx, attempt.dataset_id, request.partition, group, now)
        charge_id = insert_charge(tx, self._charge_row(attempt, debits_json(plan), group))
        if charge_id is None:  # the request id exists: nothing was written, answer it as a retry
            row = attempt.existing()
            assert row is not None
            return self._retry(attempt, row)
        _debit(attempt, plan)
        payload = charge_payload(
            charge_id,
            attempt.base,
            request.family,
            request.event_json,
            payload_json(request.partition),
            cache_key=request.cache_key,
            charged_at=now,
        )
        _audit.append(tx, at=_iso(now), event="reserve", payload=payload)
        return _replace(attempt.base, charge_id=charge_id)

    def _charge_row(self, attempt: _Attempt, debits: str, group: GroupCharge | None) -> tuple[object, ...]:
        """The values of a new charge row (``insert_charge``); its last value, the flight key, is its cache key."""
        request, now = attempt.request, attempt.now
        return (
            attempt.dataset_id,
            request.analyst,
            request.request_id,
            request.loss_text,
            request.family,
            request.cache_key,
            debits,
            self._owner,
            now,
            now,
            request.event_text,
            now,
            None if group is None else group.partition_id,
            None if group is None else group.part,
            request.cache_key,
        )

    def _retry(self, attempt: _Attempt, row: Row) -> Reservation:
        """Answer a request whose id is stored as ``row``: replay, resume, refuse, or charge it again.

        The stored charge must be the same request (``_Attempt.same``). A committed one is replayed
        (audited ``replay``), an open one resumed (audited ``resume``; with a cache key it takes a fresh
        lease), a failed one refused; a refunded one is charged again on the locked budgets.
        """
        tx, base, now = attempt.tx, attempt.base, attempt.now
        charge_id, state = int(row[0]), ChargeState(row[2])
        stored_group = (None if row[9] is None else int(row[9]), row[10])
        if (int(row[1]), row[3], row[4], row[5], row[8], stored_group) != attempt.same:
            raise RequestIdConflict(
                "a request id is reused for a different request (dataset, loss, family, cache key, event or"
                " partition differ)",
                base.request_id,
                "use a new request id for a new request",
            )
        if state == ChargeState.COMMITTED:
            release = release_of_charge(tx, charge_id)
            payload = answer_payload(base, charge_id, release.release_id)
            _audit.append(tx, at=_iso(now), event="replay", payload=payload)
            return _replace(base, charge_id=charge_id, state=state, stored=release)
        if state in OPEN_STATES:
            payload = answer_payload(base, charge_id, None) | {"state": state.value}
            if row[5] is not None:  # the resumer holds the cache key now: a fresh lease
                tx.send("UPDATE charges SET owner = ?, updated_at = ? WHERE id = ?", (self._owner, now, charge_id))
            _audit.append(tx, at=_iso(now), event="resume", payload=payload)  # last: the head is locked briefly
            return _replace(base, charge_id=charge_id, state=state, resumed=True)
        if state == ChargeState.FAILED:
            raise LedgerStateError(
                "this request failed after reading data; its cost stays spent and it has no stored value",
                base.request_id,
                "send a new request with a new request id",
            )
        check_transition(state, ChargeState.RESERVED, request_id=base.request_id)
        group = None
        if row[9] is not None:
            group = GroupCharge(int(row[9]), row[10], _partitions.spans(tx, int(row[1]))[int(row[9])])
        event = attempt.request.event
        plan = plan_debits(tx, attempt.budgets, base.loss, dataset_id=int(row[1]), event=event, group=group)
        debits = _debit(attempt, plan)
        tx.execute(
            "UPDATE charges SET state = 'reserved', debits = ?, owner = ?, updated_at = ?, charged_at = ?,"
            " flight_key = ? WHERE id = ?",
            (debits, self._owner, now, now, row[5], charge_id),
        )
        event_json = None if event is None else event_to_json(event)
        payload = charge_payload(
            charge_id,
            base,
            row[4],
            event_json,
            payload_json(attempt.request.partition),
            cache_key=row[5],
            charged_at=now,
        )
        _audit.append(tx, at=_iso(now), event="reserve", payload=payload)
        return _replace(base, charge_id=charge_id)

    def commit(self, reservation: Reservation, record: ReleaseRecord) -> StoredRelease:
        """Store the release of a reserved charge; exactly one completion wins.

        When the charge is already committed (a concurrent retry won), the stored release is
        returned and ``record`` is discarded: a value never leaves twice with different noise.
        ``commit_outcome`` also says whether this call was the one that stored it.
        """
        return self.commit_outcome(reservation, record).stored

    def commit_outcome(self, reservation: Reservation, record: ReleaseRecord) -> Committed:
        """``commit``, telling the completion that stored the release (``charged``) from the others.

        Raises:
            LedgerStateError: the charge cannot be committed: it failed, was refunded, or was
                superseded after its lease (FAILED, it stays spent), or its cache key already has a
                stored release from another charge (this charge becomes FAILED, spent, no value).

        """
        if reservation.stored is not None:
            return Committed(reservation.stored, False)
        charge_id = charge_id_of(reservation)
        try:
            value_json = canonical_json(record.value)
            params_json = canonical_json(record.parameters)
        except (TypeError, ValueError):
            raise InvalidData(
                "a release value and its parameters must be finite JSON values",
                type(record.value).__name__,
                "pass numbers, strings, lists and dicts without NaN or infinities",
            ) from None
        now = self._context.clock()
        release = (
            value_json,
            record.mechanism,
            record.mechanism_version,
            params_json,
            record.privacy_unit,
            record.adjacency,
            record.code_version,
        )
        refused: _Refused | None = None
        with self._context.backend.write() as tx:
            head = tx.execute("SELECT dataset_id, cache_key, state FROM charges WHERE id = ?{lock}", (charge_id,))
            if head and head[0][1] is not None and ChargeState(head[0][2]) in OPEN_STATES:
                other = cached_release(tx, int(head[0][0]), head[0][1])
                if other is not None and other.charge_id != charge_id:  # one value per cache key, ever
                    tx.execute(
                        "UPDATE charges SET state = 'failed', flight_key = NULL, updated_at = ? WHERE id = ?",
                        (now, charge_id),
                    )
                    payload = {"charge": charge_id, "refunded": False, "superseded": "key has a release"}
                    _audit.append(tx, at=_iso(now), event="fail", payload=payload)
                    refused = _Refused(
                        LedgerStateError(
                            "single flight: this cache key already has a stored release from another charge;"
                            " this charge stays spent and its value is discarded",
                            reservation.request_id,
                            "send the request again with a new request id: the stored release is returned at no cost",
                        )
                    )
            done = None if refused is not None else store_release(tx, charge_id, now, release)
            if refused is None and done is None:  # not open: a concurrent retry committed it, or not allowed
                state = ChargeState(tx.execute("SELECT state FROM charges WHERE id = ?", (charge_id,))[0][0])
                if state == ChargeState.COMMITTED:
                    return Committed(release_of_charge(tx, charge_id), False)
                if state == ChargeState.FAILED and head and head[0][1] is not None:
                    raise LedgerStateError(
                        "single flight: this reservation failed or was superseded after its lease"
                        f" ({self._lease_s:g} s) while it held its cache key; it stays spent and cannot commit",
                        reservation.request_id,
                        "send the request again with a new request id (the key's stored release is free), or"
                        " open the ledger with a longer lease_s for releases this slow",
                    )
                check_transition(state, ChargeState.COMMITTED, request_id=reservation.request_id)
                raise LedgerStateError("the charge cannot be committed", reservation.request_id, "reserve again")
            if done is not None:
                release_id, cache_key = done
                payload = commit_payload(charge_id, release_id, cache_key, release)
                _audit.append(tx, at=_iso(now), event="commit", payload=payload, commit_of_release=int(release_id))
        if refused is not None:  # raised after the transaction: the FAILED state is kept
            raise refused.error
        assert done is not None
        stored = StoredRelease(
            int(release_id),
            charge_id,
            reservation.dataset,
            cache_key,
            json.loads(value_json),
            record.mechanism,
            record.mechanism_version,
            json.loads(params_json),
            record.privacy_unit,
            record.adjacency,
            record.code_version,
            now,
        )
        return Committed(stored, True)

    def fail(self, reservation: Reservation, *, data_accessed: bool) -> None:
        """End a reservation without a release.

        ``data_accessed=False`` refunds every debited scope, but only for the process that reserved
        and only from RESERVED (a resumed or abandoned reservation may have read data elsewhere).
        ``data_accessed=True`` keeps the charge spent (state FAILED).
        """
        charge_id = charge_id_of(reservation)
        now = self._context.clock()
        with self._context.backend.write() as tx:
            dataset_id = dataset_id_of(tx, reservation.dataset)
            budgets = {
                int(r[0]): BudgetRow(r)
                for r in tx.execute(
                    f"SELECT {BUDGET_COLS} FROM budgets WHERE dataset_id = ? ORDER BY id{{lock}}", (dataset_id,)
                )
            }
            row = tx.execute(f"SELECT {CHARGE_COLS} FROM charges WHERE id = ?{{lock}}", (charge_id,))[0]
            state = ChargeState(row[2])
            if data_accessed:
                check_transition(state, ChargeState.FAILED, request_id=reservation.request_id)
                tx.execute(
                    "UPDATE charges SET state = 'failed', flight_key = NULL, updated_at = ? WHERE id = ?",
                    (now, charge_id),
                )
                _audit.append(tx, at=_iso(now), event="fail", payload={"charge": charge_id, "refunded": False})
                return
            check_transition(state, ChargeState.REFUNDED, request_id=reservation.request_id)
            if row[7] != self._owner or reservation.resumed:
                raise LedgerStateError(
                    "only the process that reserved a charge may refund it",
                    reservation.request_id,
                    "call fail(..., data_accessed=True): the earlier attempt may have read data",
                )
            tx.execute(
                "UPDATE charges SET state = 'refunded', flight_key = NULL, updated_at = ? WHERE id = ?",
                (now, charge_id),
            )
            refund(tx, dataset_id, budgets, row)
            _audit.append(tx, at=_iso(now), event="fail", payload={"charge": charge_id, "refunded": True})

    # ------------------------------------------------------------------ reads

    def budget(self, dataset: str, scope: Scope | None = None) -> BudgetStatus:
        """Cap, spend and remainder of one scope (the total by default), exact."""
        scope = scope or Scope.total()
        with self._context.backend.read() as tx:
            dataset_id = dataset_id_of(tx, dataset)
            rows = tx.execute(
                f"SELECT {BUDGET_COLS} FROM budgets WHERE dataset_id = ? AND scope_kind = ? AND scope_value = ?",
                (dataset_id, scope.kind, scope.value),
            )
        if not rows:
            raise UsageError("the dataset has no budget for this scope", str(scope), "set one with set_budget")
        b = BudgetRow(rows[0])
        mode = b.mode
        return BudgetStatus(
            dataset, b.scope, mode, as_loss(b.cap, mode), as_loss(b.spent, mode), as_loss(remaining(b), mode)
        )

    def budget_scopes(self, dataset: str) -> list[Scope]:
        """Every budget scope of ``dataset`` the steward set (the total first), oldest first; no amounts."""
        with self._context.backend.read() as tx:
            dataset_id = dataset_id_of(tx, dataset)
            rows = tx.execute(
                "SELECT scope_kind, scope_value, period_start, period_end FROM budgets WHERE dataset_id = ? "
                "ORDER BY CASE WHEN scope_kind = 'total' THEN 0 ELSE 1 END, id",
                (dataset_id,),
            )
        scopes = [_scope_of(str(kind), str(value), start, end) for kind, value, start, end in rows]
        return [scope for scope in scopes if scope is not None]

    def cache_hits(self) -> dict[int, int]:
        """How many times each stored release was answered again from the ledger (its ``cache_hit`` entries)."""
        with self._context.backend.read() as tx:
            payloads = tx.execute("SELECT payload FROM audit_log WHERE event = 'cache_hit'")
        hits: dict[int, int] = {}
        for (payload,) in payloads:
            try:
                release = json.loads(payload).get("release")
            except (TypeError, ValueError, AttributeError):
                continue
            if isinstance(release, int):
                hits[release] = hits.get(release, 0) + 1
        return hits

    def charges(self, dataset: str) -> list[ChargeRecord]:
        """Every charge of a dataset, oldest first."""
        with self._context.backend.read() as tx:
            dataset_id = dataset_id_of(tx, dataset)
            rows = tx.execute(
                "SELECT id, analyst, request_id, state, loss, family, cache_key FROM charges WHERE dataset_id = ?"
                " ORDER BY id",
                (dataset_id,),
            )
        return [
            ChargeRecord(
                int(r[0]), dataset, r[1], r[2], ChargeState(r[3]), loss_from_json(json.loads(r[4])), r[5], r[6]
            )
            for r in rows
        ]

    def releases(self, dataset: str) -> list[StoredRelease]:
        """Every stored release of a dataset, oldest first."""
        with self._context.backend.read() as tx:
            dataset_id = dataset_id_of(tx, dataset)
            rows = tx.execute(
                f"SELECT {RELEASE_COLS} FROM releases r JOIN datasets d ON d.id = r.dataset_id"
                " WHERE r.dataset_id = ? ORDER BY r.id",
                (dataset_id,),
            )
        return [stored(r) for r in rows]

    def spend_timeline(self, dataset: str) -> list[SpendPoint]:
        """Every charge of ``dataset`` that spends, in debit order, with its debit time, analyst and exact loss.

        The spending states are reserved, committed, failed and abandoned; refunded charges spent
        nothing and are left out. The steward's dashboard plots cumulative spend from it.
        """
        states = sorted(s.value for s in SPENT_STATES)
        marks = ", ".join("?" for _ in states)
        with self._context.backend.read() as tx:
            dataset_id = dataset_id_of(tx, dataset)
            rows = tx.execute(
                "SELECT COALESCE(charged_at, created_at), analyst, loss, state FROM charges"
                f" WHERE dataset_id = ? AND state IN ({marks}) ORDER BY COALESCE(charged_at, created_at), id",
                (dataset_id, *states),
            )
        return [SpendPoint(float(r[0]), str(r[1]), loss_from_json(json.loads(r[2])), ChargeState(r[3])) for r in rows]

    def verify(self, *, expected_head: str | Anchor | None = None) -> AuditReport:
        """Verify the ledger: the audit chain, the anchor, and every table against the chain's replay.

        ``expected_head`` is a head recorded outside the ledger (``Anchor``, or its text ``SEQ:HASH``
        or ``HASH``): the chain must still carry it, so a rewritten or cut history is caught. The
        report lists every table row that differs from the state the chain implies (``_verify``).

        Raises:
            UsageError: ``expected_head`` is not ``SEQ:HASH`` or ``HASH``.
            LedgerUnreadable: the database cannot be read (corrupt pages, missing tables).

        """
        anchor = Anchor.parse(expected_head) if isinstance(expected_head, str) else expected_head
        try:
            with self._context.backend.read() as tx:
                return _verify.verify(tx, anchor=anchor)
        except _verify.read_errors() as exc:
            raise LedgerUnreadable(
                f"the ledger cannot be read to the end ({type(exc).__name__}: {exc})",
                "verify",
                "restore the ledger from a backup and verify it against your last checkpoint",
            ) from None

    def checkpoint(self) -> Anchor:
        """The current chain head as an anchor to keep outside the ledger (``verify(expected_head=...)``)."""
        with self._context.backend.read() as tx:
            seq, head = tx.execute("SELECT seq, hash FROM audit_head WHERE id = 1")[0]
        return Anchor(str(head), int(seq))

    # ------------------------------------------------------------------ helpers


def _debit(attempt: _Attempt, plan: Plan) -> str:
    """Write a plan's new spends (``apply_debits``) and keep them for the reservation's figures."""
    attempt.debited.update((b.id, new) for b, new in plan)
    return apply_debits(attempt.tx, plan)


def _figures(dataset: str, attempt: _Attempt) -> tuple[BudgetStatus, ...]:
    """Every budget the reserve transaction locked, as this request left it (after its own debit, if any).

    Read from the locked rows the transaction already holds: no other statement, no other transaction.
    """
    out = []
    for b in attempt.budgets:
        spent = attempt.debited.get(b.id, b.spent)
        left = remaining(b, spent)
        out.append(
            BudgetStatus(
                dataset, b.scope, b.mode, as_loss(b.cap, b.mode), as_loss(spent, b.mode), as_loss(left, b.mode)
            )
        )
    return tuple(out)


def _replace(base: Reservation, **changes: Any) -> Reservation:
    from dataclasses import replace

    return replace(base, **changes)


def _scope_of(kind: str, value: str, start: object, end: object) -> Scope | None:
    """The ``Scope`` of a ``budgets`` row (``None`` for a row no scope reads back)."""
    if kind == "total":
        return Scope.total()
    if kind == "analyst":
        return Scope.analyst(value)
    if kind == "family":
        return Scope.family(value)
    if kind == "period" and isinstance(start, int) and isinstance(end, int):
        return Scope.period(start, end)
    return None
