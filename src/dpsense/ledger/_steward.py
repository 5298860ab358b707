"""The data steward's side of the ledger: analysts, datasets, budgets and sub-budgets, secrets.

``Stewardship`` is a component of ``Ledger`` (``dpsense.ledger._ledger``), which delegates its
steward methods here: the lifecycle (reserve, commit, fail) lives there; this module holds the
operations a steward runs to set the ledger up and maintain it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from fractions import Fraction
from typing import Literal

from dpsense.core.errors import (
    InvalidPrivacyParameter,
    UsageError,
)
from dpsense.core.privacy_loss import ApproxDP, PrivacyLoss
from dpsense.ledger import _audit, _partitions, _secrets
from dpsense.ledger._amounts import (
    Mode,
    Pair,
    as_loss,
    canonical_json,
    check_positive,
    frac_text,
    in_mode,
    loss_from_json,
    loss_to_json,
    mode_of,
)
from dpsense.ledger._backends import Tx
from dpsense.ledger._context import LedgerContext
from dpsense.ledger._events import composed_epsilon
from dpsense.ledger._rows import (
    BUDGET_COLS,
    BudgetRow,
    in_scope,
    pld_spent,
)
from dpsense.ledger._rows import dataset_id as dataset_id_of
from dpsense.ledger._states import ChargeState
from dpsense.ledger._types import (
    Scope,
    _name,
)

#: The accounting a budget may ask for instead of its cap's own (basic (ε, δ) or zCDP): PLD composition.
Accounting = Literal["pld"]


class Stewardship:
    """The steward's operations on one ledger (its ``LedgerContext``): every write audited."""

    def __init__(self, context: LedgerContext) -> None:
        self._context = context

    def add_analyst(self, name: str) -> None:
        """Allow ``name`` to charge (idempotent)."""
        name = _name(name, "analyst")
        now = self._context.clock()
        with self._context.backend.write() as tx:
            if tx.execute("SELECT 1 FROM analysts WHERE name = ?", (name,)):
                return
            tx.execute("INSERT INTO analysts (name, created_at) VALUES (?, ?)", (name, now))
            _audit.append(tx, at=_iso(now), event="add_analyst", payload={"analyst": name})

    def register_dataset(
        self,
        name: str,
        *,
        budget: PrivacyLoss,
        fingerprint: str | None = None,
        accounting: Accounting | None = None,
    ) -> str:
        """Register a dataset with its total budget; returns the dataset's ledger name.

        Re-registering a snapshot with the same keyed fingerprint returns the existing dataset (and
        its budget, unchanged), whatever name is passed (docs/design.md invariant 8). ``accounting="pld"``
        accounts an (ε, δ) budget by composing release events with the PLD accountant (every charge
        must then pass ``event=``); by default the cap's type picks basic (ε, δ) or zCDP.
        """
        name = _name(name, "dataset")
        check_positive(budget)
        mode, cap = _mode_and_cap(budget, accounting)
        now = self._context.clock()
        with self._context.backend.write() as tx:
            if fingerprint is not None:
                rows = tx.execute("SELECT name FROM datasets WHERE fingerprint = ?", (fingerprint,))
                if rows:
                    return str(rows[0][0])
            rows = tx.execute("SELECT fingerprint FROM datasets WHERE name = ?", (name,))
            if rows:
                raise UsageError(
                    "a dataset of that name is registered with a different snapshot",
                    name,
                    "register the new snapshot under a new name, or pass the same fingerprint",
                )
            dataset_id = tx.execute(
                "INSERT INTO datasets (name, fingerprint, created_at) VALUES (?, ?, ?) RETURNING id",
                (name, fingerprint, now),
            )[0][0]
            self._insert_budget(tx, int(dataset_id), Scope.total(), mode, cap, (Fraction(0), Fraction(0)))
            payload = {"dataset": name, "fingerprint": fingerprint, "budget": loss_to_json(budget), "mode": mode}
            _audit.append(tx, at=_iso(now), event="register_dataset", payload=payload)
        return name

    def set_budget(self, dataset: str, scope: Scope, cap: PrivacyLoss, *, accounting: Accounting | None = None) -> None:
        """Create or change the cap of a scope (sub-budgets subdivide; the total always applies).

        A new sub-budget starts with what is already spent in its scope: every reserved, committed,
        failed or abandoned charge of its analyst, family or period counts (so it may start
        exhausted when its cap is below that). Lowering an existing cap below what is spent, or a
        change of accounting mode after spending, is refused. ``accounting="pld"`` as in
        ``register_dataset``.
        """
        check_positive(cap)
        mode, pair = _mode_and_cap(cap, accounting)
        now = self._context.clock()
        with self._context.backend.write() as tx:
            dataset_id = dataset_id_of(tx, dataset)
            rows = tx.execute(
                f"SELECT {BUDGET_COLS} FROM budgets"
                " WHERE dataset_id = ? AND scope_kind = ? AND scope_value = ?{lock}",
                (dataset_id, scope.kind, scope.value),
            )
            spent: Pair = (Fraction(0), Fraction(0))
            if not rows:
                spent = self._create_sub_budget(tx, dataset_id, scope, mode, pair)
            else:
                old = BudgetRow(rows[0])
                spent = old.spent
                if old.mode != mode and old.spent != (Fraction(0), Fraction(0)):
                    raise UsageError(
                        "a budget's accounting mode cannot change after spending", str(cap), "keep the mode"
                    )
                if mode == "pld" and old.mode == mode:  # the composed ε depends on δ: recompute at the new δ
                    eps = pld_spent(tx, dataset_id, old, pair[1])
                    spent = (eps, pair[1]) if eps > 0 else (Fraction(0), Fraction(0))
                if old.mode == mode and not (spent[0] <= pair[0] and (mode == "pld" or spent[1] <= pair[1])):
                    shown = as_loss(spent, mode)
                    raise UsageError(f"the {scope} cap cannot go below what is spent ({shown})", str(cap), "raise it")
                tx.execute(
                    "UPDATE budgets SET mode = ?, cap_a = ?, cap_b = ?, spent_a = ?, spent_b = ? WHERE id = ?",
                    (mode, frac_text(pair[0]), frac_text(pair[1]), frac_text(spent[0]), frac_text(spent[1]), old.id),
                )
            payload = {
                "dataset": dataset,
                "scope": str(scope),
                "scope_kind": scope.kind,
                "scope_value": scope.value,
                "cap": loss_to_json(cap),
                "mode": mode,
                "spent": [frac_text(spent[0]), frac_text(spent[1])],
            }
            _audit.append(tx, at=_iso(now), event="set_budget", payload=payload)

    def fingerprint_key(self) -> bytes:
        """The secret key for keyed snapshot fingerprints (CSPRNG, created once, never logged)."""
        now = self._context.clock()
        with self._context.backend.write() as tx:
            key, created = _secrets.get_or_create(tx, _secrets.FINGERPRINT_KEY, now=now)
            if created:
                _audit.append(tx, at=_iso(now), event="secret_created", payload={"name": _secrets.FINGERPRINT_KEY})
        return key

    def resolve_stale(self, *, older_than_s: float) -> int:
        """Mark reservations untouched for ``older_than_s`` seconds ABANDONED: they stay charged.

        Returns how many were marked. A retry with the same request id may still complete one.
        """
        now = self._context.clock()
        with self._context.backend.write() as tx:
            rows = tx.execute(
                "UPDATE charges SET state = 'abandoned', updated_at = ? WHERE state = 'reserved' AND updated_at < ?"
                " RETURNING id",
                (now, now - older_than_s),
            )
            for charge_id in sorted(int(r[0]) for r in rows):  # the appends last: the head is locked briefly
                _audit.append(tx, at=_iso(now), event="abandon", payload={"charge": charge_id})
        return len(rows)

    def _create_sub_budget(self, tx: Tx, dataset_id: int, scope: Scope, mode: Mode, cap: Pair) -> Pair:
        """Insert a new scope counting the charges already in it; returns what it starts with spent.

        Reserved charges in the scope get the new budget added to their debits, so that a refund
        by their reserving process gives it back too. Charges in a partition group count with the
        group's parallel cost (``_partitions``); PLD scopes count them sequentially (a safe bound).
        """
        charges = in_scope(tx, dataset_id, scope, cols="id, state, loss, debits, partition_id, part, event")
        spent: Pair = (Fraction(0), Fraction(0))
        amounts: dict[int, Pair] = {}
        if mode == "pld":  # partitioned charges count sequentially here (an upper bound)
            eps = composed_epsilon(str(scope), charges, cap[1])
            spent = (eps, cap[1]) if eps > 0 else spent
            amounts = {int(c[0]): (Fraction(0), Fraction(0)) for c in charges}
        else:
            amounts = {int(c[0]): in_mode(loss_from_json(json.loads(c[2])), mode) for c in charges}
            listed = [(amounts[int(c[0])], None if c[4] is None else int(c[4]), c[5]) for c in charges]
            spent = _partitions.composed(listed, _partitions.spans(tx, dataset_id))
        budget_id = self._insert_budget(tx, dataset_id, scope, mode, cap, spent)
        for c in charges:
            if c[1] == ChargeState.RESERVED.value:
                a, b = amounts[int(c[0])]
                debits = [*json.loads(c[3]), [budget_id, frac_text(a), frac_text(b)]]
                tx.execute("UPDATE charges SET debits = ? WHERE id = ?", (canonical_json(debits), int(c[0])))
        return spent

    def _insert_budget(self, tx: Tx, dataset_id: int, scope: Scope, mode: Mode, cap: Pair, spent: Pair) -> int:
        return int(
            tx.execute(
                "INSERT INTO budgets (dataset_id, scope_kind, scope_value, period_start, period_end, mode, cap_a,"
                " cap_b, spent_a, spent_b) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    dataset_id,
                    scope.kind,
                    scope.value,
                    scope.start,
                    scope.end,
                    mode,
                    frac_text(cap[0]),
                    frac_text(cap[1]),
                    frac_text(spent[0]),
                    frac_text(spent[1]),
                ),
            )[0][0]
        )


def _mode_and_cap(cap: PrivacyLoss, accounting: Accounting | None) -> tuple[Mode, Pair]:
    """The accounting mode and exact cap of a budget; PLD needs an (ε, δ) cap with δ > 0."""
    if accounting is None:
        mode = mode_of(cap)
        return mode, in_mode(cap, mode)
    if accounting != "pld":
        raise UsageError("unknown accounting mode", accounting, 'pass accounting="pld" or leave it unset')
    if not isinstance(cap, ApproxDP) or cap.delta <= 0:
        raise InvalidPrivacyParameter(
            "a PLD-accounted budget needs an (ε, δ) cap with δ > 0 (ε is measured at that δ)",
            str(cap),
            "pass budget=ApproxDP(epsilon, delta) with delta > 0",
        )
    return "pld", (cap.epsilon, cap.delta)


def _iso(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).isoformat()
