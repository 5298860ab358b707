"""Row-level steps shared by the ledger's transactions: decode budgets, debit, read releases.

Every function runs inside the caller's write or read transaction and never commits.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from dpsense.accounting.pld import PldEvent
from dpsense.core.errors import BudgetExhausted, LedgerStateError, UnknownDataset
from dpsense.core.privacy_loss import PrivacyLoss
from dpsense.ledger._amounts import Mode, Pair, as_loss, canonical_json, frac_text, in_mode, loss_to_json, parse_frac
from dpsense.ledger._backends import Row, Tx
from dpsense.ledger._events import composed_epsilon, missing_event
from dpsense.ledger._partitions import GroupCharge, add, part_spends, refuse_pld, scoped_cost
from dpsense.ledger._types import Reservation, Scope, StoredRelease

BUDGET_COLS = "id, scope_kind, scope_value, period_start, period_end, mode, cap_a, cap_b, spent_a, spent_b"
RELEASE_COLS = (
    "r.id, r.charge_id, d.name, r.cache_key, r.value_json, r.mechanism, r.mechanism_version, "
    "r.parameters_json, r.privacy_unit, r.adjacency, r.code_version, r.created_at"
)
CHARGE_COLS = "id, dataset_id, state, loss, family, cache_key, debits, owner, event, partition_id, part"
#: Charge states whose amount counts against a budget (``_states.SPENT_STATES``), as SQL.
SPENT_SQL = "('reserved', 'committed', 'failed', 'abandoned')"


class BudgetRow:
    """One locked budget row, decoded."""

    def __init__(self, row: Row) -> None:
        self.id = int(row[0])
        kind, value, start, end = row[1], row[2], row[3], row[4]
        self.scope = Scope(kind, value, None if start is None else int(start), None if end is None else int(end))
        self.mode: Mode = row[5]
        self.cap: Pair = (parse_frac(row[6]), parse_frac(row[7]))
        self.spent: Pair = (parse_frac(row[8]), parse_frac(row[9]))


def remaining(b: BudgetRow, spent: Pair | None = None) -> Pair:
    """What is left of a scope (never below zero: a sub-budget created late may start overspent).

    ``spent`` replaces the row's spend (a debit planned in the same transaction). For a PLD budget
    this is the ε headroom at the cap's δ (not additive: composition is not a sum).
    """
    used = b.spent if spent is None else spent
    if b.mode == "pld":
        return max(Fraction(0), b.cap[0] - used[0]), b.cap[1]
    return max(Fraction(0), b.cap[0] - used[0]), max(Fraction(0), b.cap[1] - used[1])


def in_scope(
    tx: Tx, dataset_id: int, scope: Scope, *, cols: str = "id, state, loss, event", partition_id: int | None = None
) -> list[Row]:
    """Every charge of the dataset that counts (spent states) and falls in ``scope`` (and group)."""
    sql = f"SELECT {cols} FROM charges WHERE dataset_id = ? AND state IN {SPENT_SQL}"
    params: list[object] = [dataset_id]
    if partition_id is not None:
        sql += " AND partition_id = ?"
        params.append(partition_id)
    if scope.kind in ("analyst", "family"):
        sql += f" AND {scope.kind} = ?"
        params.append(scope.value)
    elif scope.kind == "period":
        sql += " AND charged_at >= ? AND charged_at < ?"
        params += [scope.start, scope.end]
    return tx.execute(sql + " ORDER BY id", params)


def pld_spent(tx: Tx, dataset_id: int, b: BudgetRow, delta: Fraction, extra: PldEvent | None = None) -> Fraction:
    """The composed ε at ``delta`` of every counted charge in a PLD budget's scope (plus ``extra``)."""
    return composed_epsilon(str(b.scope), in_scope(tx, dataset_id, b.scope, cols="id, event"), delta, extra)


Plan = list[tuple[BudgetRow, Pair]]


def plan_debits(
    tx: Tx,
    budgets: list[BudgetRow],
    loss: PrivacyLoss,
    *,
    dataset_id: int,
    event: PldEvent | None,
    group: GroupCharge | None = None,
) -> Plan:
    """Check every locked scope and return each one's new spend; writes nothing.

    Basic and zCDP scopes add the loss exactly, or, for a charge in a partition ``group``, replace
    the group's composed cost in the scope by its cost with this charge added (``_partitions``). A
    PLD scope recomputes the composition of the events already charged in its scope plus ``event``
    (inside this locking transaction) and refuses when the composed ε at the cap's δ would exceed
    the cap's ε; it refuses partitioned charges.
    """
    plan: Plan = []
    for b in budgets:
        if b.mode == "pld":
            if group is not None:
                raise refuse_pld(b.scope)
            if event is None:
                raise missing_event(str(b.scope), "this request has no event")
            eps = pld_spent(tx, dataset_id, b, b.cap[1], event)
            if eps > b.cap[0]:
                requested = as_loss((eps - min(eps, b.spent[0]), Fraction(0)), "pld")
                raise BudgetExhausted(str(b.scope), requested, as_loss(remaining(b), "pld"))
            plan.append((b, (eps, b.cap[1])))
            continue
        amount = in_mode(loss, b.mode)
        if group is None:
            new = (b.spent[0] + amount[0], b.spent[1] + amount[1])
        else:
            old = group_spends(tx, dataset_id, b, group.partition_id)
            new = scoped_cost(b.spent, old, add(old, group.part, amount), group.span)
        if not (new[0] <= b.cap[0] and new[1] <= b.cap[1]):
            cost = (new[0] - b.spent[0], new[1] - b.spent[1])
            raise BudgetExhausted(str(b.scope), as_loss(cost, b.mode), as_loss(remaining(b), b.mode))
        plan.append((b, new))
    return plan


def debits_json(plan: Plan) -> str:
    """A plan's debits (budget id, amounts added) as JSON, stored on the charge for refunds."""
    return canonical_json([[b.id, frac_text(new[0] - b.spent[0]), frac_text(new[1] - b.spent[1])] for b, new in plan])


def apply_debits(tx: Tx, plan: Plan) -> str:
    """Write a plan's new spends (one statement); returns ``debits_json(plan)``."""
    changed = [(b, new) for b, new in plan if new != b.spent]
    if len(changed) == 1:
        b, new = changed[0]
        tx.send(
            "UPDATE budgets SET spent_a = ?, spent_b = ? WHERE id = ?", (frac_text(new[0]), frac_text(new[1]), b.id)
        )
    elif changed:
        cases = " ".join("WHEN ? THEN ?" for _ in changed)
        params: list[object] = [x for b, new in changed for x in (b.id, frac_text(new[0]))]
        params += [x for b, new in changed for x in (b.id, frac_text(new[1]))]
        params += [b.id for b, _ in changed]
        marks = ", ".join("?" for _ in changed)
        tx.send(
            f"UPDATE budgets SET spent_a = CASE id {cases} END, spent_b = CASE id {cases} END WHERE id IN ({marks})",
            params,
        )
    return debits_json(plan)


def group_spends(tx: Tx, dataset_id: int, b: BudgetRow, partition_id: int | None) -> dict[str, Pair]:
    """Per-part spends, in ``b``'s mode, of one partition group's counted charges in ``b``'s scope."""
    if partition_id is None:
        return {}
    return part_spends(in_scope(tx, dataset_id, b.scope, cols="part, loss", partition_id=partition_id), b.mode)


def dataset_id(tx: Tx, name: str) -> int:
    rows = tx.execute("SELECT id FROM datasets WHERE name = ?", (name,))
    if not rows:
        raise UnknownDataset(name)
    return int(rows[0][0])


def stored(r: Row) -> StoredRelease:
    return StoredRelease(
        int(r[0]),
        int(r[1]),
        r[2],
        r[3],
        json.loads(r[4]),
        r[5],
        r[6],
        json.loads(r[7]),
        r[8],
        r[9],
        r[10],
        None if r[11] is None else float(r[11]),
    )


def checked_release(tx: Tx, r: Row) -> StoredRelease:
    """A stored release row (``RELEASE_COLS`` and ``r.commit_seq``) that matches its commit audit entry.

    The entry records the SHA-256 of the value and of the whole row; a row edited after its commit is
    refused instead of served (a retry or a cache hit would otherwise hand out a forged answer). Rows
    stored before schema version 8 carry no ``commit_seq`` and are served as stored (``verify`` checks
    them against the chain).

    Raises:
        LedgerStateError: the row differs from its commit entry (nothing is written).

    """
    if r[12] is not None:
        entry = tx.execute("SELECT event, payload FROM audit_log WHERE seq = ?", (int(r[12]),))
        payload: dict[str, Any] = json.loads(entry[0][1]) if entry and entry[0][0] == "commit" else {}
        digest = hashlib.sha256(str(r[4]).encode("utf-8")).hexdigest()
        row_digest = release_row_digest(r[3], tuple(r[4:11]))
        if (payload.get("release"), payload.get("value_sha256"), payload.get("row_sha256")) != (
            int(r[0]),
            digest,
            row_digest,
        ):
            raise LedgerStateError(
                "a stored release differs from the digests its commit audit entry records: the ledger was edited",
                f"release {int(r[0])}",
                "nothing was served or charged; the steward should run `dpsense verify-log` and restore the ledger",
            )
    return stored(r)


def release_of_charge(tx: Tx, charge_id: int) -> StoredRelease:
    """The stored release of a committed charge, checked against its commit entry (``checked_release``)."""
    rows = tx.execute(
        f"SELECT {RELEASE_COLS}, r.commit_seq FROM releases r JOIN datasets d ON d.id = r.dataset_id"
        " WHERE r.charge_id = ?",
        (charge_id,),
    )
    return checked_release(tx, rows[0])


def cached_release(tx: Tx, dataset_id: int, cache_key: str) -> StoredRelease | None:
    """The stored release of a cache key, checked against its commit entry (``checked_release``)."""
    rows = tx.execute(
        f"SELECT {RELEASE_COLS}, r.commit_seq FROM releases r JOIN datasets d ON d.id = r.dataset_id"
        " WHERE r.dataset_id = ? AND r.cache_key = ? ORDER BY r.id LIMIT 1",
        (dataset_id, cache_key),
    )
    return checked_release(tx, rows[0]) if rows else None


def release_row_digest(cache_key: str | None, release: Sequence[object]) -> str:
    """SHA-256 of a stored release row as the commit entry records it (``_verify`` recomputes it).

    ``release`` is (value JSON, mechanism, mechanism version, parameters JSON, privacy unit, adjacency,
    code version), the texts stored in ``releases``.
    """
    return hashlib.sha256(canonical_json([cache_key, *release]).encode("utf-8")).hexdigest()


def commit_payload(charge_id: int, release_id: int, cache_key: str | None, release: Sequence[str]) -> dict[str, Any]:
    """The audit payload of a commit: the digests ``_verify`` checks the stored release row against.

    ``release`` is the stored texts (value JSON, mechanism, mechanism version, parameters JSON,
    privacy unit, adjacency, code version).
    """
    return {
        "charge": charge_id,
        "release": int(release_id),
        "value_sha256": hashlib.sha256(release[0].encode("utf-8")).hexdigest(),
        "row_sha256": release_row_digest(cache_key, release),
        "mechanism": release[1],
        "mechanism_version": release[2],
        "code_version": release[6],
    }


def answer_payload(base: Reservation, charge_id: int, release_id: int | None) -> dict[str, Any]:
    """Audit payload of an answer given without a new charge: who asked, which release (no values)."""
    return {
        "dataset": base.dataset,
        "analyst": base.analyst,
        "request_id": base.request_id,
        "charge": charge_id,
        "release": release_id,
    }


def charge_id_of(reservation: Reservation) -> int:
    if reservation.charge_id is None:
        raise LedgerStateError("this reservation has no charge", reservation.request_id, "call reserve() first")
    return reservation.charge_id


def charge_payload(
    charge_id: int,
    base: Reservation,
    family: str | None,
    event: dict[str, object] | None = None,
    partition: dict[str, object] | None = None,
    *,
    cache_key: str | None,
    charged_at: float,
) -> dict[str, Any]:
    """The audit payload of a debit: everything ``_verify`` needs to recompute the charge's row and spends.

    ``charged_at`` is the exact debit time (the charge row's ``charged_at``, which places it in period
    scopes); ``cache_key`` is the key the charge may store a release under.
    """
    payload: dict[str, Any] = {
        "charge": charge_id,
        "dataset": base.dataset,
        "analyst": base.analyst,
        "request_id": base.request_id,
        "loss": loss_to_json(base.loss),
        "family": family,
        "cache_key": cache_key,
        "charged_at": charged_at,
    }
    if event is not None:
        payload["event"] = event
    if partition is not None:
        payload["partition"] = partition
    return payload
