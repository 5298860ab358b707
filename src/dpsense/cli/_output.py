"""Rendering for the CLI: exact numbers as decimals, JSON and CSV documents, rich tables.

Machine-readable output (``--json`` / ``--csv``) is exactly one document on stdout; JSON documents are
the service's (``dpsense.interface.documents``: a privacy loss as exact ``"n/d"`` strings with float
approximations), CSV and everything meant for a person (tables, progress, errors) are rendered here.
There budgets, exact fractions, print as exact decimals when the decimal expansion ends (it does for
every ε and δ written in decimal), else to 12 significant digits followed by an ellipsis.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from rich.table import Table

from dpsense.core.privacy_loss import ZCDP, ApproxDP, PrivacyLoss, PureDP
from dpsense.interface.documents import cell, loss_document, question_text, stored_document

if TYPE_CHECKING:
    from dpsense.ledger import AuditReport, BudgetStatus, ChargeRecord, StoredRelease
    from dpsense.release import Release, SqlRelease
    from dpsense.release._profile import Profile

_ERROR_SUFFIX = "_error95"


def decimal_text(value: Fraction | int) -> str:
    """An exact number as a plain decimal (``3/8`` -> ``0.375``); non-terminating ones end in ``…``."""
    frac = Fraction(value)
    twos = fives = 0
    rest = frac.denominator
    while rest % 2 == 0:
        rest, twos = rest // 2, twos + 1
    while rest % 5 == 0:
        rest, fives = rest // 5, fives + 1
    if rest != 1:
        return f"{float(frac):.12g}…"
    places = max(twos, fives)
    scaled = abs(frac.numerator) * 10**places // frac.denominator  # exact: the denominator divides 10**places
    digits = str(scaled).rjust(places + 1, "0")
    whole, fraction = digits[: len(digits) - places], digits[len(digits) - places :]
    text = f"{whole}.{fraction}".rstrip("0").rstrip(".") if places else whole
    return f"-{text}" if frac < 0 else text


def loss_parts(loss: PrivacyLoss) -> dict[str, Fraction]:
    """A privacy loss as its named parameters: ``{"epsilon", "delta"}`` or ``{"rho"}``."""
    if isinstance(loss, PureDP):
        return {"epsilon": loss.epsilon, "delta": Fraction(0)}
    if isinstance(loss, ApproxDP):
        return {"epsilon": loss.epsilon, "delta": loss.delta}
    if isinstance(loss, ZCDP):
        return {"rho": loss.rho}
    raise TypeError(f"not a privacy loss: {loss!r}")


def loss_text(loss: PrivacyLoss) -> str:
    """``ε=1.5, δ=0`` (exact decimals)."""
    names = {"epsilon": "ε", "delta": "δ", "rho": "ρ"}
    return ", ".join(f"{names[k]}={decimal_text(v)}" for k, v in loss_parts(loss).items())


def dumps(document: object) -> str:
    """One JSON document (UTF-8 text, stable key order, no NaN: missing values are null)."""
    return json.dumps(_finite(document), ensure_ascii=False, sort_keys=True, indent=2)


def _finite(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def csv_text(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """One CSV document: a header line, then one line per row (empty cells for missing values)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in row])
    return buffer.getvalue()


# -- releases ------------------------------------------------------------------------------------


def release_rows(release: Release | SqlRelease) -> tuple[list[str], list[list[Any]]]:
    """The release's public table as (columns, rows): noisy values and the public error bounds."""
    columns, rows = release.rows()  # not release.table: pandas would cost the CLI half a second
    return columns, [[cell(v) for v in row] for row in rows]


def release_csv(release: Release | SqlRelease) -> str:
    """The release's table as CSV."""
    columns, rows = release_rows(release)
    return csv_text(columns, rows)


def release_table(release: Release | SqlRelease) -> Table:
    """The release's table for a person: whole-number columns as integers, others to 2 decimals, errors as ±."""
    columns, rows = release_rows(release)
    table = Table(title=f"release {release.record.release_id} of {release.record.dataset!r}")
    for i, name in enumerate(columns):
        numeric = any(isinstance(row[i], int | float) and not isinstance(row[i], bool) for row in rows)
        table.add_column(name, justify="right" if numeric else "left")
    whole = [all(_is_whole(row[i]) for row in rows) for i in range(len(columns))]
    for row in rows:
        table.add_row(*(_cell(name, value, w) for name, value, w in zip(columns, row, whole, strict=True)))
    return table


def _is_whole(value: object) -> bool:
    return value is None or isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _cell(name: str, value: object, whole: bool) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if whole:
        text = f"{value:,.0f}"
    elif 0 < abs(value) < 1:  # three significant digits: a bound of 0.004 must not print as ±0.00
        text = f"{value:.3g}"
    else:
        text = f"{value:,.2f}"
    return f"±{text}" if name.endswith(_ERROR_SUFFIX) else text


def budget_line(release: Release | SqlRelease, status: BudgetStatus) -> str:
    """One line: what this release cost and where the budget stands."""
    charged = release.charged
    state = "cached: no new charge" if release.cached or charged is None else f"charged {loss_text(charged)}"
    return (
        f"{state}; budget spent {loss_text(status.spent)}, remaining {loss_text(status.remaining)} "
        f"of {loss_text(status.cap)}"
    )


# -- budgets and history -------------------------------------------------------------------------


def budget_csv(status: BudgetStatus) -> str:
    """A budget status as a one-row CSV (exact decimals)."""
    parts = {name: loss_parts(getattr(status, name)) for name in ("cap", "spent", "remaining")}
    header = ["dataset", "scope", "mode"] + [f"{p}_{k}" for p in parts for k in parts["cap"]]
    cells = [decimal_text(parts[p][k]) for p in parts for k in parts["cap"]]
    return csv_text(header, [[status.dataset, str(status.scope), status.mode, *cells]])


def budget_table(status: BudgetStatus) -> Table:
    """A budget status for a person."""
    table = Table(title=f"budget of {status.dataset!r} ({status.scope})")
    for name in ("", "cap", "spent", "remaining"):
        table.add_column(name, justify="right")
    parts = {name: loss_parts(getattr(status, name)) for name in ("cap", "spent", "remaining")}
    for key in parts["cap"]:
        table.add_row(key, *(decimal_text(parts[name][key]) for name in ("cap", "spent", "remaining")))
    return table


HISTORY_COLUMNS = (
    "release_id",
    "time",
    "analyst",
    "snapshot",
    "question",
    "epsilon",
    "delta",
    "mechanism",
    "charge_id",
)


def history_rows(releases: Sequence[StoredRelease], charges: Sequence[ChargeRecord]) -> list[dict[str, Any]]:
    """One record per stored release: when, who, which snapshot, what was asked, what it cost, how.

    ``question`` is the stored canonical query as one line (``documents.question_text``): the
    statistics by meaning, the grouping and the filters; ``time`` the commit time in UTC.
    """
    cost = {c.charge_id: loss_parts(c.loss) for c in charges}
    rows = []
    for release in releases:
        loss = {k: decimal_text(v) for k, v in cost.get(release.charge_id, {}).items()}
        rows.append(
            {
                "release_id": release.release_id,
                "time": _utc(release.created_at),
                "analyst": release.parameters.get("analyst"),
                "snapshot": release.parameters.get("snapshot"),
                "question": question_text(release.parameters.get("query")),
                "epsilon": loss.get("epsilon"),
                "delta": loss.get("delta"),
                "mechanism": release.mechanism,
                "charge_id": release.charge_id,
            }
        )
    return rows


def _utc(seconds: float | None) -> str | None:
    """Unix seconds as ``2026-12-02 21:30:05Z``; None stays None."""
    return None if seconds is None else utc_text(seconds)


def utc_text(seconds: float) -> str:
    """Unix seconds as ``2026-12-02 21:30:05Z`` (UTC)."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _record_cell(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return "" if value is None else str(value)


def record_table(title: str, rows: Sequence[dict[str, Any]]) -> Table:
    """Records (dicts with the same keys, in order) as a table; lists joined by commas."""
    table = Table(title=title)
    for name in rows[0] if rows else ():
        table.add_column(name)
    for row in rows:
        table.add_row(
            *(", ".join(map(str, v)) if isinstance(v, list) else "" if v is None else str(v) for v in row.values())
        )
    return table


def history_document(
    dataset: str, releases: Sequence[StoredRelease], charges: Sequence[ChargeRecord]
) -> dict[str, Any]:
    """The history as JSON: each stored release as the service lists it, with its charge."""
    cost = {c.charge_id: c.loss for c in charges}
    listed = [
        stored_document(r, with_analyst=True)
        | {"charge_id": r.charge_id, "charged": loss_document(cost.get(r.charge_id))}
        for r in releases
    ]
    return {"dataset": dataset, "releases": listed}


def history_csv(rows: Sequence[dict[str, Any]]) -> str:
    """The history as CSV."""
    return csv_text(HISTORY_COLUMNS, ([row[c] for c in HISTORY_COLUMNS] for row in rows))


def history_table(dataset: str, rows: Sequence[dict[str, Any]]) -> Table:
    """The history for a person."""
    table = Table(title=f"releases of {dataset!r}")
    for name in HISTORY_COLUMNS:
        table.add_column(name)
    for row in rows:
        table.add_row(*("" if row[c] is None else str(row[c]) for c in HISTORY_COLUMNS))
    return table


def profile_table(name: str, snapshot: str, profile: Profile) -> Table:
    """A registered snapshot's public profile: every declaration, so a steward sees what releases use.

    The title holds the privacy unit, the adjacency and the rows per unit (C); per column its kind,
    bounds (with its typical range and recording step), keys, data policy and the declared cap on its
    groups per unit.
    """
    rows = "no row bound" if profile.max_rows_per_unit is None else f"at most {profile.max_rows_per_unit} rows per unit"
    table = Table(
        title=f"public profile of {name!r} snapshot {snapshot!r} (privacy unit {profile.unit!r}, "
        f"{profile.adjacency.value}, {rows})"
    )
    for heading in ("column", "kind", "bounds", "keys", "policy", "groups per unit"):
        table.add_column(heading)
    for column, facts in sorted(profile.columns.items()):
        bounds = "" if facts.bounds is None else f"[{decimal_text(facts.bounds[0])}, {decimal_text(facts.bounds[1])}]"
        if facts.typical is not None:
            bounds += f" typical [{decimal_text(facts.typical[0])}, {decimal_text(facts.typical[1])}]"
        if facts.step is not None:
            bounds += f" step {facts.step.text()}"
        keys = "" if facts.keys is None else ", ".join(map(str, facts.keys))
        cap = profile.max_groups_per_unit.get(column)
        table.add_row(column, facts.kind.value, bounds, keys, facts.policy, "" if cap is None else f"at most {cap}")
    return table


def audit_document(report: AuditReport) -> dict[str, Any]:
    """The audit-chain check as JSON."""
    return {
        "ok": report.ok,
        "entries": report.entries,
        "head_hash": report.head_hash,
        "first_broken_seq": report.first_broken_seq,
        "reason": report.reason,
        "problems": list(report.problems),
        "tables_checked": report.tables_checked,
    }
