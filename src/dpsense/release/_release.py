"""``Release``: what an analyst gets back — noisy values, public accuracy, the explain report, the record.

Everything in a ``Release`` is a released (noised) value or a public fact: the stored record is exactly
what the ledger committed, so a cached answer and a fresh one look the same (``cached`` tells them apart).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pandas as pd

from dpsense.core.privacy_loss import PrivacyLoss
from dpsense.ledger import StoredRelease
from dpsense.release._executor import Executed

#: Suffix of the accuracy column of each statistic (|error| bound at 95 %, where public).
ERROR_SUFFIX = "_error95"


def release_value(executed: Executed) -> dict[str, Any]:
    """The JSON value the ledger stores: one row per group, noisy values and public error bounds."""
    columns: list[str] = []
    if executed.group_column is not None:
        columns.append(executed.group_column)
    for out in executed.outputs:
        columns.extend([out.name, out.name + ERROR_SUFFIX])
    n_rows = len(executed.outputs[0].values) if executed.outputs else 0
    rows: list[list[Any]] = []
    for i in range(n_rows):
        row: list[Any] = []
        if executed.group_column is not None:
            keys = executed.keys or []
            row.append(_json_key(keys[i]) if i < len(keys) else None)
        for out in executed.outputs:
            row.extend([_json_number(out.values[i]), _json_number(out.error[i])])
        rows.append(row)
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

    @property
    def table(self) -> pd.DataFrame:
        """The noisy values, one row per group, with an ``<name>_error95`` column per statistic.

        An error column holds a bound that the value's |error| stays below with probability 0.95
        where one follows from public facts, and is empty (NaN) where none does (quantiles, smooth
        sensitivity). See ``explain()`` for how each was made.
        """
        value = self.record.value
        frame = pd.DataFrame(value["rows"], columns=value["columns"])
        empty = [c for c in frame.columns if c.endswith(ERROR_SUFFIX) and frame[c].isna().all()]
        return frame.drop(columns=empty)

    @property
    def values(self) -> dict[str, Any]:
        """The noisy values as ``{column: list}`` (group keys included)."""
        value = self.record.value
        return {c: [row[i] for row in value["rows"]] for i, c in enumerate(value["columns"])}

    def explain(self) -> str:
        """Which mechanism, which theorem, which sensitivity, what it cost, and what was post-processed."""
        params = self.record.parameters
        lines = [params["explain"]]
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
