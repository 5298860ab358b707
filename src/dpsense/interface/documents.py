"""The JSON documents both front ends send: ``dpsense ... --json`` and the HTTP API (released or public values only).

One renderer, one shape (the service's published schema, ``dpsense.service._models``):

* a privacy loss is its one JSON form, the one the ledger stores and hashes
  (``dpsense.core.privacy_loss.loss_to_json``: ``{"kind": "pure", "epsilon"}``, ``{"kind": "approx",
  "epsilon", "delta"}`` or ``{"kind": "zcdp", "rho"}``, exact ``"n/d"`` strings such as ``"3/10"`` and
  ``"6/1"``), plus ``approx``, the floats for display.
* a release holds the noisy table (``columns`` and ``rows``, a row a list; the SQL's own column names
  for a SQL release), the explain report, whether it was a stored answer and what it charged. It never
  carries who asked first: a stored answer to another analyst's identical query is returned without
  that analyst's name.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpsense.core.privacy_loss import ZCDP, PrivacyLoss, loss_to_json

if TYPE_CHECKING:
    from dpsense.ledger import BudgetStatus, CollectionInfo, StoredRelease
    from dpsense.release import Release, SqlRelease


def loss_document(loss: PrivacyLoss | None) -> dict[str, Any] | None:
    """A privacy loss in its one JSON form (``core.privacy_loss.loss_to_json``) plus ``approx`` floats for display."""
    if loss is None:
        return None
    approx = [float(loss.rho)] if isinstance(loss, ZCDP) else [float(loss.epsilon), float(getattr(loss, "delta", 0))]
    return {**loss_to_json(loss), "approx": approx}


def budget_document(status: BudgetStatus) -> dict[str, Any]:
    """Cap, spend and remainder of one budget scope."""
    return {
        "dataset": status.dataset,
        "scope": str(status.scope),
        "mode": status.mode,
        "cap": loss_document(status.cap),
        "spent": loss_document(status.spent),
        "remaining": loss_document(status.remaining),
    }


def release_document(result: Release | SqlRelease) -> dict[str, Any]:
    """What an analyst gets back for a release (fresh or stored)."""
    record = result.record
    columns, plain = result.rows()  # the table's columns and values without building a DataFrame
    rows = [[cell(v) for v in row] for row in plain]
    return {
        "release_id": record.release_id,
        "dataset": record.dataset,
        "snapshot": record.parameters.get("snapshot"),
        "cached": result.cached,
        "charged": loss_document(result.charged),
        "mechanism": record.mechanism,
        "columns": columns,
        "rows": rows,
        "explain": result.explain(),
    }


def stored_document(record: StoredRelease, *, with_analyst: bool) -> dict[str, Any]:
    """A stored release in a listing: its values as stored, the query and the explain report."""
    params = record.parameters
    value = record.value if isinstance(record.value, dict) else {}
    doc: dict[str, Any] = {
        "release_id": record.release_id,
        "dataset": record.dataset,
        "snapshot": params.get("snapshot"),
        "mechanism": record.mechanism,
        "columns": list(value.get("columns", [])),
        "rows": [[cell(v) for v in row] for row in value.get("rows", [])],
        "query": params.get("query"),
        "question": question_text(params.get("query")),
        "created_at": record.created_at,
        "explain": str(params.get("explain", "")),
    }
    if with_analyst:
        doc["analyst"] = params.get("analyst")
    return doc


def question_text(query: Any) -> str:
    """A stored canonical query as one readable line: ``count(), mean(hours) by region where age >= 65``.

    Statistics by their labels (``query._meaning``: the options that differ from the defaults
    included), then the grouping and the filters with their public literals; every part is public.
    An unreadable document gives ``""``.
    """
    if not isinstance(query, dict):
        return ""
    text = ", ".join(str(a.get("name", "?")) for a in query.get("aggregates", []))
    groups = [str(g.get("column")) for g in query.get("group_by", [])]
    if groups:
        text += " by " + ", ".join(groups)
    filters = [f"{f.get('column')} {f.get('op')} {_literal(f.get('value'))}" for f in query.get("filters", [])]
    if filters:
        text += " where " + " and ".join(filters)
    return text


def _literal(value: Any) -> str:
    """A tagged literal of the canonical query (``["n", "13/2"]``, ``["s", "north"]``, or a list of them)."""
    if isinstance(value, list) and value and all(isinstance(v, list) for v in value):
        return "(" + ", ".join(_literal(v) for v in value) + ")"
    if isinstance(value, list) and len(value) == 2:
        tag, raw = value
        if tag == "n":
            number = Fraction(str(raw))
            return str(number.numerator) if number.denominator == 1 else f"{float(number):g}"
        if tag == "s":
            return repr(raw)
        return str(raw).lower()
    return str(value)


def dataset_document(name: str, snapshot: str, profile: dict[str, Any]) -> dict[str, Any]:
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


def cell(value: Any) -> Any:
    """One JSON-able value: numpy scalars as Python's, non-finite floats as null, fractions as floats."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Fraction):
        return float(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def collection_document(info: CollectionInfo) -> dict[str, Any]:
    """A local-DP collection's public declaration, its devices' guarantee and its tallies (no report content)."""
    from dpsense.release._collections import parse_scheme

    return {
        "name": info.name,
        "scheme": info.scheme,
        "guarantee": parse_scheme(info.scheme).guarantee(),
        "dictionary_size": None if info.dictionary is None else len(info.dictionary),
        "max_reports_per_client": info.max_reports_per_client,
        "reports": info.reports,
        "clients": info.clients,
        "batches": info.batches,
    }
