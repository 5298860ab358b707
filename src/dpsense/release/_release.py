"""``Release``: what an analyst gets back — noisy values, public accuracy, the explain report, the record.

Everything in a ``Release`` is a released (noised) value or a public fact: the stored record is exactly
what the ledger committed, so a cached answer and a fresh one look the same (``cached`` tells them apart).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from dpsense.core.privacy_loss import PrivacyLoss
from dpsense.ledger import StoredRelease
from dpsense.query._aggregates import AggregateKind, public_range
from dpsense.release._executor import Executed

if TYPE_CHECKING:  # pandas loads when a table is first asked for (it costs a CLI's start)
    import pandas as pd

#: Suffix of the accuracy column of each statistic (|error| bound at 95 %, where public).
ERROR_SUFFIX = "_error95"
#: The column flagging values whose error bound covers the whole range their public bounds allow.
NOISE_SUFFIX = "_noise_dominated"
#: Suffix of the bias column of a statistic with a public bias bound beside its noise (the adaptive clip).
BIAS_SUFFIX = "_bias95"


def release_value(executed: Executed) -> dict[str, Any]:
    """The JSON value the ledger stores: one row per group, noisy values and public error bounds."""
    group = executed.group_column
    groups = [] if group is None else [group] if isinstance(group, str) else list(group)
    columns: list[str] = list(groups)
    for out in executed.outputs:
        columns.extend([out.name, out.name + ERROR_SUFFIX])
        if out.bias is not None:
            columns.append(out.name + BIAS_SUFFIX)
    n_rows = len(executed.outputs[0].values) if executed.outputs else 0
    columns_data: list[list[Any]] = []  # column-wise, then zipped into rows (one pass per column)
    if groups:
        keys = list(executed.keys or [])[:n_rows]
        keys += [None] * (n_rows - len(keys))
        if len(groups) == 1:
            columns_data.append([_json_key(k) for k in keys])
        else:  # several columns: the key is a tuple of their values, one column each
            for j in range(len(groups)):
                columns_data.append([_json_key(k[j]) if isinstance(k, tuple) else None for k in keys])
    for out in executed.outputs:
        columns_data.append([_json_number(v) for v in out.values])
        columns_data.append([_json_number(e) for e in out.error])
        if out.bias is not None:
            columns_data.append([_json_number(b) for b in out.bias])
    rows: list[list[Any]] = [list(row) for row in zip(*columns_data, strict=True)] if columns_data else []
    notes = {
        out.name: {"accuracy": out.accuracy_note, "post_processing": out.post_processing} for out in executed.outputs
    }
    return {"columns": columns, "rows": rows, "notes": notes}


def _json_key(value: Any) -> Any:
    if isinstance(value, Fraction):
        return int(value) if value.denominator == 1 else float(value)
    return value


def _json_number(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return float(value)


@dataclass(frozen=True)
class Release:
    """One answered request.

    Attributes:
        record: the release as the ledger stores it (value, mechanism, parameters, policy, versions).
        cached: True when the answer came from the ledger (a retry, or the same request asked before):
            it cost nothing now, and its noise is the stored draw.
        charged: the privacy loss this call charged (``None`` for a cached answer).

    """

    record: StoredRelease
    cached: bool
    charged: PrivacyLoss | None
    #: (the analyst's output name, the stored label) in the order asked (``query._meaning``), after the
    #: group columns of a grouping by several columns as (column, column) in the order asked; empty: as stored.
    names: tuple[tuple[str, str], ...] = ()

    def _shown(self) -> list[tuple[str, int]]:
        """(column name shown, index of the stored column): group keys, then each asked output's columns.

        A stored column belongs to the label it equals or extends by ``_`` (``<label>_error95``,
        ``<label>_low``); it is shown under the analyst's name with the same suffix. Renaming is
        post-processing: the values are the stored ones.
        """
        stored = list(self.record.value["columns"])
        if not self.names:
            return [(c, i) for i, c in enumerate(stored)]
        labels = sorted({label for _, label in self.names}, key=len, reverse=True)
        owned: dict[str, list[tuple[str, int]]] = {}
        shown: list[tuple[str, int]] = []
        for i, column in enumerate(stored):
            owner = next((lab for lab in labels if column == lab or column.startswith(lab + "_")), None)
            if owner is None:
                shown.append((column, i))
            else:
                owned.setdefault(owner, []).append((column[len(owner) :], i))
        for name, label in self.names:
            shown.extend((name + suffix, i) for suffix, i in owned.get(label, []))
        return shown

    def rows(self) -> tuple[list[str], list[list[Any]]]:
        """The table's column names and rows as plain Python values, without pandas (a CLI prints these).

        The columns of ``table``, in the same order: error columns that are empty in every row are
        left out, and after the error column of each statistic with a public range (a mean, trimmed mean
        or variance), a ``<name>_noise_dominated`` column: True in a row whose interval ``value ± error``
        holds the whole range its public bounds allow (that value says nothing the bounds did not;
        ``query._aggregates.public_range``), False elsewhere. The column is there whatever the noise
        drew, so every release of one question has the same columns.
        """
        shown = self._shown()
        rows = [[row[i] for _, i in shown] for row in self.record.value["rows"]]
        keep = [
            j
            for j, (name, _) in enumerate(shown)
            if not (name.endswith(ERROR_SUFFIX) and all(_missing(row[j]) for row in rows))
        ]
        columns = [shown[j][0] for j in keep]
        rows = [[row[j] for j in keep] for row in rows]
        for name, (low, high) in self._ranges():
            error = name + ERROR_SUFFIX
            if error not in columns or name not in columns:
                continue
            i, j = columns.index(name), columns.index(error)
            flags = [
                not _missing(row[j]) and not _missing(row[i]) and row[i] - row[j] <= low and row[i] + row[j] >= high
                for row in rows
            ]
            columns.insert(j + 1, name + NOISE_SUFFIX)  # in every release of the question, flagged or not
            for row, flag in zip(rows, flags, strict=True):
                row.insert(j + 1, flag)
        return columns, rows

    def _ranges(self) -> list[tuple[str, tuple[float, float]]]:
        """(shown name, its public range) of each asked statistic that has one."""
        stored = self.record.parameters.get("query", {}).get("aggregates", [])
        widths: dict[str, tuple[float, float]] = {}
        for agg in stored:
            if not agg.get("bounds"):
                continue
            try:
                kind = AggregateKind(agg["kind"])
            except ValueError:
                continue
            low, high = (Fraction(b) for b in agg["bounds"][0])
            found = public_range(kind, (low, high))
            if found is not None:
                widths[agg["name"]] = (float(found[0]), float(found[1]))
        names = self.names or tuple((label, label) for label in widths)
        return [(name, widths[label]) for name, label in names if label in widths]

    @property
    def table(self) -> pd.DataFrame:
        """The noisy values, one row per group, with an ``<name>_error95`` column per statistic.

        An error column holds a bound that the value's |error| stays below with probability 0.95
        where one follows from public facts, and is empty (NaN) where none does (quantiles, smooth
        sensitivity); ``<name>_noise_dominated`` marks values whose bound covers their whole public
        range (``rows``). A mean or sum released with the adaptive clip also has ``<name>_bias95``: a
        bound on its clipping bias at 0.95, beside the noise bound of ``<name>_error95`` (both hold
        together with probability >= 0.90). See ``explain()`` for how each was made.
        """
        import pandas as pd

        columns, rows = self.rows()
        return pd.DataFrame(rows, columns=columns)

    @property
    def values(self) -> dict[str, Any]:
        """The noisy values as ``{column: list}`` (group keys included)."""
        rows = self.record.value["rows"]
        return {c: [row[i] for row in rows] for c, i in self._shown()}

    def explain(self) -> str:
        """Which mechanism, which theorem, which sensitivity, what it cost, and what was post-processed."""
        params = self.record.parameters
        lines = [params["explain"]]
        renamed = [f"{name!r} = {label}" for name, label in self.names if name != label]
        if renamed:
            lines.append(f"Output names (free post-processing of the stored release): {'; '.join(renamed)}.")
        for name, note in sorted(self.record.value.get("notes", {}).items()):
            lines.append(f"Accuracy of {name!r}: {note['accuracy']}.")
            if note["post_processing"]:
                lines.append(
                    f"Post-processing of {name!r} (free, no privacy cost): {'; '.join(note['post_processing'])}."
                )
        lines.append(
            "Cached: this answer was stored earlier and cost nothing now (same data snapshot, same canonical "
            "query, same mechanism version)."
            if self.cached
            else f"Charged now: {self.charged}."
        )
        lines.append(f"Release id {self.record.release_id}; code version {self.record.code_version}.")
        return "\n".join(lines)


def _missing(value: object) -> bool:
    """None or NaN: an empty cell (pandas' ``isna`` on a stored value)."""
    return value is None or (isinstance(value, float) and math.isnan(value))
