"""Release, budget and dataset documents as the service sends them (released or public values only).

A release document holds the noisy table (the SQL's own column names for a SQL release), the explain
report, whether it was a stored answer, and what it charged. It never carries who asked first: a
stored answer to another analyst's identical query is returned without that analyst's name.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from dpsense.core.privacy_loss import ZCDP, ApproxDP, PrivacyLoss, PureDP
from dpsense.ledger import BudgetStatus, StoredRelease
from dpsense.release import Release, SqlRelease


def loss_doc(loss: PrivacyLoss | None) -> dict[str, Any] | None:
    """An exact privacy loss: ``"n/d"`` strings (exact) and floats (for display)."""
    if loss is None:
        return None
    if isinstance(loss, PureDP):
        return {"kind": "pure", "epsilon": _q(loss.epsilon), "delta": "0", "approx": [float(loss.epsilon), 0.0]}
    if isinstance(loss, ApproxDP):
        approx = [float(loss.epsilon), float(loss.delta)]
        return {"kind": "approx", "epsilon": _q(loss.epsilon), "delta": _q(loss.delta), "approx": approx}
    if isinstance(loss, ZCDP):
        return {"kind": "zcdp", "rho": _q(loss.rho), "approx": [float(loss.rho)]}
    return {"kind": type(loss).__name__, "approx": []}


def budget_doc(status: BudgetStatus) -> dict[str, Any]:
    """Cap, spend and remainder of one budget scope."""
    return {
        "dataset": status.dataset,
        "scope": str(status.scope),
        "mode": status.mode,
        "cap": loss_doc(status.cap),
        "spent": loss_doc(status.spent),
        "remaining": loss_doc(status.remaining),
    }


def release_doc(result: Release | SqlRelease) -> dict[str, Any]:
    """What an analyst gets back for a release (fresh or stored)."""
    record = result.record
    columns, rows = table_rows(result.table)
    return {
        "release_id": record.release_id,
        "dataset": record.dataset,
        "snapshot": record.parameters.get("snapshot"),
        "cached": result.cached,
        "charged": loss_doc(result.charged),
        "mechanism": record.mechanism,
        "columns": columns,
        "rows": rows,
        "explain": result.explain(),
    }


def stored_doc(record: StoredRelease, *, with_analyst: bool) -> dict[str, Any]:
    """A stored release in a listing: its values as stored, the query and the explain report."""
    params = record.parameters
    value = record.value if isinstance(record.value, dict) else {}
    doc: dict[str, Any] = {
        "release_id": record.release_id,
        "dataset": record.dataset,
        "snapshot": params.get("snapshot"),
        "mechanism": record.mechanism,
        "columns": list(value.get("columns", [])),
        "rows": [[_cell(v) for v in row] for row in value.get("rows", [])],
        "query": params.get("query"),
        "explain": str(params.get("explain", "")),
    }
    if with_analyst:
        doc["analyst"] = params.get("analyst")
    return doc


def dataset_doc(name: str, snapshot: str, profile: dict[str, Any]) -> dict[str, Any]:
    """The public schema of a dataset: declared kinds, bounds and keys, unit, adjacency, policy.

    The server-side source path is left out (analysts never name or see data locations).
    """
    return {
        "name": name,
        "snapshot": snapshot,
        "privacy_unit": profile.get("unit"),
        "adjacency": profile.get("adjacency"),
        "columns": profile.get("columns", {}),
        "max_rows_per_unit": profile.get("max_rows_per_unit"),
        "max_groups_per_unit": profile.get("max_groups_per_unit", {}),
        "budget": profile.get("budget"),
        "policy": profile.get("policy"),
    }


def table_rows(frame: pd.DataFrame) -> tuple[list[str], list[list[Any]]]:
    """Column names and JSON-able rows (NaN and infinities as null)."""
    columns = [str(c) for c in frame.columns]
    rows = [[_cell(v) for v in row] for row in frame.itertuples(index=False, name=None)]
    return columns, rows


def _cell(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Fraction):
        return float(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _q(value: Fraction) -> str:
    return f"{value.numerator}/{value.denominator}" if value.denominator != 1 else str(value.numerator)
