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
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from collections.abc import Callable
from typing import Any

from dpsense.accounting.pld import PldEvent
from dpsense.core.errors import (
    DPSenseError,
    InvalidData,
    LedgerStateError,
    RequestIdConflict,
    UnknownAnalyst,
    UsageError,
)
from dpsense.core.privacy_loss import PrivacyLoss
from dpsense.ledger import _audit, _partitions
from dpsense.ledger._amounts import (
    as_loss,
    canonical_json,
    check_positive,
    loss_from_json,
    loss_to_json,
)
from dpsense.ledger._audit import AuditReport
from dpsense.ledger._backends import Backend, Row, Tx, open_backend
from dpsense.ledger._events import check_event, event_to_json
from dpsense.ledger._partitions import GroupCharge, PartitionSpec, check_partition, group_key, payload_json
from dpsense.ledger._profiles import ProfileOps
from dpsense.ledger._rows import (
    BUDGET_COLS,
    CHARGE_COLS,
    RELEASE_COLS,
    BudgetRow,
    apply_debits,
    cached_release,
    charge_id_of,
    charge_payload,
    debits_json,
    plan_debits,
    release_of_charge,
    remaining,
    stored,
)
from dpsense.ledger._rows import dataset_id as dataset_id_of
from dpsense.ledger._service import ServiceOps
from dpsense.ledger._states import OPEN_STATES, ChargeState, check_transition
from dpsense.ledger._steward import StewardOps, _iso
from dpsense.ledger._types import (
    BudgetStatus,
    ChargeRecord,
    ReleaseRecord,
    Reservation,
    Scope,
    StoredRelease,
    _name,
)
from dpsense.ledger._writes import insert_charge, refund, store_release


class Ledger(StewardOps, ProfileOps, ServiceOps):
    """A persistent, atomic privacy-budget ledger over SQLite or PostgreSQL."""

    def __init__(self, backend: Backend, *, clock: Callable[[], float] = time.time) -> None:
        self._backend = backend
        self._clock = clock
        # Identifies this process's reservations (only the reserving process may refund one).
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{time.time_ns()}:{id(self)}"
        # Datasets and analysts are never deleted and ids never change: known ones skip a lookup.
        self._dataset_ids: dict[str, int] = {}
        self._analysts: set[str] = set()

    @classmethod
    def open(cls, url: str, *, clock: Callable[[], float] = time.time) -> Ledger:
        """Open (and migrate) ``sqlite:///path.db`` or ``postgresql://...``."""
        return cls(open_backend(url), clock=clock)

    def close(self) -> None:
        """Close the connection."""
        self._backend.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        now = self._clock()
        with self._backend.write() as tx:
            dataset_id = self._dataset_ids.get(dataset) or self._dataset_ids.setdefault(
                dataset, dataset_id_of(tx, dataset)
            )
            if analyst not in self._analysts:
                if not tx.execute("SELECT 1 FROM analysts WHERE name = ?", (analyst,)):
                    raise UnknownAnalyst(analyst)
                self._analysts.add(analyst)
            budgets = [
                BudgetRow(row)
                for row in tx.execute(
                    f"SELECT {BUDGET_COLS} FROM budgets WHERE dataset_id = ? AND (scope_kind = 'total'"
                    " OR (scope_kind = 'analyst' AND scope_value = ?) OR (scope_kind = 'family' AND scope_value = ?)"
                    " OR (scope_kind = 'period' AND period_start <= ? AND period_end > ?)) ORDER BY id{lock}",
                    (dataset_id, analyst, family or "", int(now), int(now)),
                )
            ]
            group = _partitions.resolve(tx, dataset_id, partition)
            base = Reservation(None, dataset, analyst, request_id, loss, ChargeState.RESERVED)
            same = (dataset_id, loss_text, family, cache_key, event_text, group_key(group))

            def existing() -> Row | None:
                rows = tx.execute(
                    f"SELECT {CHARGE_COLS} FROM charges WHERE analyst = ? AND request_id = ?", (analyst, request_id)
                )
                return rows[0] if rows else None

            if cache_key is not None:
                if (row := existing()) is not None:
                    return self._retry(tx, row, base, same, budgets, event, now, partition)
                stored = cached_release(tx, dataset_id, cache_key)
                if stored is not None:
                    payload = _answer_payload(base, stored.charge_id, stored.release_id)
                    _audit.append(tx, at=_iso(now), event="cache_hit", payload=payload | {"cache_key": cache_key})
                    return _replace(base, charge_id=stored.charge_id, state=ChargeState.COMMITTED, stored=stored)
            try:
                plan = plan_debits(tx, budgets, loss, dataset_id=dataset_id, event=event, group=group)
            except DPSenseError:  # a retry is answered even when a new charge would be refused
                if cache_key is None and (row := existing()) is not None:
                    return self._retry(tx, row, base, same, budgets, event, now, partition)
                raise
            if partition is not None and group is not None:
                group = _partitions.store(tx, dataset_id, partition, group, now)
            debits = debits_json(plan)
            charge_id = insert_charge(
                tx,
                (
                    dataset_id,
                    analyst,
                    request_id,
                    loss_text,
                    family,
                    cache_key,
                    debits,
                    self._owner,
                    now,
                    now,
                    event_text,
                    now,
                    None if group is None else group.partition_id,
                    None if group is None else group.part,
                ),
            )
            if charge_id is None:  # the request id exists: nothing was written, answer it as a retry
                row = existing()
                assert row is not None
                return self._retry(tx, row, base, same, budgets, event, now, partition)
            apply_debits(tx, plan)
            payload = charge_payload(charge_id, base, family, event_json, payload_json(partition))
            _audit.append(tx, at=_iso(now), event="reserve", payload=payload)
        return _replace(base, charge_id=charge_id)

    def _retry(
        self,
        tx: Tx,
        row: Row,
        base: Reservation,
        same: tuple[int, str, str | None, str | None, str | None, tuple[int | None, str | None]],
        budgets: list[BudgetRow],
        event: PldEvent | None,
        now: float,
        partition: PartitionSpec | None,
    ) -> Reservation:
        charge_id, state = int(row[0]), ChargeState(row[2])
        stored_group = (None if row[9] is None else int(row[9]), row[10])
        if (int(row[1]), row[3], row[4], row[5], row[8], stored_group) != same:
            raise RequestIdConflict(
                "a request id is reused for a different request (dataset, loss, family, cache key, event or"
                " partition differ)",
                base.request_id,
                "use a new request id for a new request",
            )
        if state == ChargeState.COMMITTED:
            release = release_of_charge(tx, charge_id)
            payload = _answer_payload(base, charge_id, release.release_id)
            _audit.append(tx, at=_iso(now), event="replay", payload=payload)
            return _replace(base, charge_id=charge_id, state=state, stored=release)
        if state in OPEN_STATES:
            payload = _answer_payload(base, charge_id, None) | {"state": state.value}
            _audit.append(tx, at=_iso(now), event="resume", payload=payload)
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
        plan = plan_debits(tx, budgets, base.loss, dataset_id=int(row[1]), event=event, group=group)
        debits = apply_debits(tx, plan)
        tx.execute(
            "UPDATE charges SET state = 'reserved', debits = ?, owner = ?, updated_at = ?, charged_at = ? WHERE id = ?",
            (debits, self._owner, now, now, charge_id),
        )
        event_json = None if event is None else event_to_json(event)
        payload = charge_payload(charge_id, base, row[4], event_json, payload_json(partition))
        _audit.append(tx, at=_iso(now), event="reserve", payload=payload)
        return _replace(base, charge_id=charge_id)

    def commit(self, reservation: Reservation, record: ReleaseRecord) -> StoredRelease:
        """Store the release of a reserved charge; exactly one completion wins.

        When the charge is already committed (a concurrent retry won), the stored release is
        returned and ``record`` is discarded: a value never leaves twice with different noise.
        """
        if reservation.stored is not None:
            return reservation.stored
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
        now = self._clock()
        release = (
            value_json,
            record.mechanism,
            record.mechanism_version,
            params_json,
            record.privacy_unit,
            record.adjacency,
            record.code_version,
        )
        with self._backend.write() as tx:
            done = store_release(tx, charge_id, now, release)
            if done is None:  # not open: a concurrent retry committed it, or the step is not allowed
                state = ChargeState(tx.execute("SELECT state FROM charges WHERE id = ?", (charge_id,))[0][0])
                if state == ChargeState.COMMITTED:
                    return release_of_charge(tx, charge_id)
                check_transition(state, ChargeState.COMMITTED, request_id=reservation.request_id)
                raise LedgerStateError("the charge cannot be committed", reservation.request_id, "reserve again")
            release_id, cache_key = done
            payload = {
                "charge": charge_id,
                "release": int(release_id),
                "value_sha256": hashlib.sha256(value_json.encode("utf-8")).hexdigest(),
                "mechanism": record.mechanism,
                "mechanism_version": record.mechanism_version,
                "code_version": record.code_version,
            }
            _audit.append(tx, at=_iso(now), event="commit", payload=payload)
        return StoredRelease(
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
        )

    def fail(self, reservation: Reservation, *, data_accessed: bool) -> None:
        """End a reservation without a release.

        ``data_accessed=False`` refunds every debited scope, but only for the process that reserved
        and only from RESERVED (a resumed or abandoned reservation may have read data elsewhere).
        ``data_accessed=True`` keeps the charge spent (state FAILED).
        """
        charge_id = charge_id_of(reservation)
        now = self._clock()
        with self._backend.write() as tx:
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
                tx.execute("UPDATE charges SET state = 'failed', updated_at = ? WHERE id = ?", (now, charge_id))
                _audit.append(tx, at=_iso(now), event="fail", payload={"charge": charge_id, "refunded": False})
                return
            check_transition(state, ChargeState.REFUNDED, request_id=reservation.request_id)
            if row[7] != self._owner or reservation.resumed:
                raise LedgerStateError(
                    "only the process that reserved a charge may refund it",
                    reservation.request_id,
                    "call fail(..., data_accessed=True): the earlier attempt may have read data",
                )
            tx.execute("UPDATE charges SET state = 'refunded', updated_at = ? WHERE id = ?", (now, charge_id))
            refund(tx, dataset_id, budgets, row)
            _audit.append(tx, at=_iso(now), event="fail", payload={"charge": charge_id, "refunded": True})

    # ------------------------------------------------------------------ reads

    def budget(self, dataset: str, scope: Scope | None = None) -> BudgetStatus:
        """Cap, spend and remainder of one scope (the total by default), exact."""
        scope = scope or Scope.total()
        with self._backend.read() as tx:
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

    def charges(self, dataset: str) -> list[ChargeRecord]:
        """Every charge of a dataset, oldest first."""
        with self._backend.read() as tx:
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
        with self._backend.read() as tx:
            dataset_id = dataset_id_of(tx, dataset)
            rows = tx.execute(
                f"SELECT {RELEASE_COLS} FROM releases r JOIN datasets d ON d.id = r.dataset_id"
                " WHERE r.dataset_id = ? ORDER BY r.id",
                (dataset_id,),
            )
        return [stored(r) for r in rows]

    def verify(self, *, expected_head: str | None = None) -> AuditReport:
        """Walk the audit hash chain; the report names the first broken link."""
        with self._backend.read() as tx:
            return _audit.verify(tx, expected_head=expected_head)

    # ------------------------------------------------------------------ helpers


def _answer_payload(base: Reservation, charge_id: int, release_id: int | None) -> dict[str, Any]:
    """Audit payload of an answer given without a new charge: who asked, which release (no values)."""
    return {
        "dataset": base.dataset,
        "analyst": base.analyst,
        "request_id": base.request_id,
        "charge": charge_id,
        "release": release_id,
    }


def _replace(base: Reservation, **changes: Any) -> Reservation:
    from dataclasses import replace

    return replace(base, **changes)
