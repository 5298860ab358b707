"""Write steps of the lifecycle, each in as few statements as the backend allows.

Every function runs inside the caller's write transaction (which already holds the budget locks
where needed) and never commits. PostgreSQL folds dependent steps into one statement (``INSERT ...
ON CONFLICT DO NOTHING RETURNING``, data-modifying CTEs) to save round trips while the budget and
audit locks are held; SQLite runs the same steps as separate statements in the same transaction
(in-process, they cost no round trip). Both store the same rows.
"""

from __future__ import annotations

import json
from fractions import Fraction

from dpsense.ledger._amounts import Pair, frac_text, in_mode, loss_from_json, parse_frac
from dpsense.ledger._backends import Row, Tx
from dpsense.ledger._partitions import add, scoped_cost, spans
from dpsense.ledger._rows import BudgetRow, group_spends, pld_spent

_INSERT_CHARGE = (
    "INSERT INTO charges (dataset_id, analyst, request_id, state, loss, family, cache_key, debits, owner,"
    " created_at, updated_at, event, charged_at, partition_id, part, flight_key)"
    " VALUES (?, ?, ?, 'reserved', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (analyst, request_id) DO NOTHING RETURNING id"
)

_RELEASE_COLUMNS = (
    "charge_id, dataset_id, cache_key, value_json, mechanism, mechanism_version, parameters_json, privacy_unit,"
    " adjacency, code_version, created_at"
)
#: Completes an open (reserved or abandoned) charge and stores its release; no row when not open.
_PG_COMMIT = (
    "WITH c AS (UPDATE charges SET state = 'committed', flight_key = NULL, updated_at = ? WHERE id = ?"
    " AND state IN ('reserved', 'abandoned') RETURNING id, dataset_id, cache_key)"
    f" INSERT INTO releases ({_RELEASE_COLUMNS})"
    " SELECT id, dataset_id, cache_key, ?, ?, ?, ?, ?, ?, ?, ? FROM c RETURNING id, cache_key"
)


def insert_charge(tx: Tx, values: tuple[object, ...]) -> int | None:
    """Insert a new reserved charge; None when (analyst, request id) exists already (nothing written).

    The last value is the flight key (the cache key, or None): the new charge holds its cache key
    until it is committed or failed (``charges_flight`` is unique, so one holder per key).
    """
    rows = tx.execute(_INSERT_CHARGE, values)
    return int(rows[0][0]) if rows else None


def store_release(tx: Tx, charge_id: int, now: float, release: tuple[object, ...]) -> tuple[int, str | None] | None:
    """Mark an open charge committed and store its release: (release id, cache key), or None if not open.

    ``release`` is (value JSON, mechanism, mechanism version, parameters JSON, privacy unit,
    adjacency, code version). The charge row is locked by the UPDATE, so one completion wins.
    """
    if tx.dialect == "postgresql":
        rows = tx.execute(_PG_COMMIT, (now, charge_id, *release, now))
        return (int(rows[0][0]), rows[0][1]) if rows else None
    rows = tx.execute(
        "UPDATE charges SET state = 'committed', flight_key = NULL, updated_at = ?"
        " WHERE id = ? AND state IN ('reserved', 'abandoned')"
        " RETURNING dataset_id, cache_key",
        (now, charge_id),
    )
    if not rows:
        return None
    release_id = tx.execute(
        f"INSERT INTO releases ({_RELEASE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (charge_id, rows[0][0], rows[0][1], *release, now),
    )[0][0]
    return int(release_id), rows[0][1]


def refund(tx: Tx, dataset_id: int, budgets: dict[int, BudgetRow], row: Row) -> None:
    """Give back a charge's debits; its state is already REFUNDED (so no longer counted).

    Sums subtract the stored debit. PLD scopes recompute the composition without the charge; scopes
    where the charge belongs to a partition group recompute the group's cost without it (what the
    charge added at reserve time is not what it adds now: later charges on other parts may have
    raised the group's cost meanwhile).
    """
    partition_id, part = row[9], row[10]
    span_of = spans(tx, dataset_id) if partition_id is not None else {}
    for budget_id, a, b in json.loads(row[6]):
        budget = budgets[int(budget_id)]
        new: Pair
        if budget.mode == "pld":  # composition is not a sum: recompute without this charge
            eps = pld_spent(tx, dataset_id, budget, budget.cap[1])
            new = (eps, budget.cap[1]) if eps > 0 else (Fraction(0), Fraction(0))
        elif partition_id is not None:
            amount = in_mode(loss_from_json(json.loads(row[3])), budget.mode)
            without = group_spends(tx, dataset_id, budget, int(partition_id))
            new = scoped_cost(budget.spent, add(without, part, amount), without, span_of[int(partition_id)])
        else:
            new = (budget.spent[0] - parse_frac(a), budget.spent[1] - parse_frac(b))
        tx.send(
            "UPDATE budgets SET spent_a = ?, spent_b = ? WHERE id = ?",
            (frac_text(new[0]), frac_text(new[1]), budget.id),
        )


#: The pending holder of a (dataset, cache key): id, state, updated_at (the lease's start), owner.
_HOLDER = "SELECT id, state, updated_at, owner FROM charges WHERE dataset_id = ? AND flight_key = ?"


def flight_holder(tx: Tx, dataset_id: int, cache_key: str) -> Row | None:
    """The charge holding ``cache_key`` (reserved or abandoned, never committed), or None."""
    rows = tx.execute(_HOLDER, (dataset_id, cache_key))
    return rows[0] if rows else None


def supersede(tx: Tx, charge_id: int, now: float) -> bool:
    """End a stale holder: FAILED (stays spent, can never commit), its flight key released.

    False when it is no longer the holder (it committed or failed meanwhile): the caller looks again.
    """
    rows = tx.execute(
        "UPDATE charges SET state = 'failed', flight_key = NULL, updated_at = ?"
        " WHERE id = ? AND flight_key IS NOT NULL AND state IN ('reserved', 'abandoned') RETURNING id",
        (now, charge_id),
    )
    return bool(rows)
