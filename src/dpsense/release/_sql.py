"""``SqlRelease``: a release asked in SQL, with the SQL's aliases and arithmetic applied for free.

The released aggregates are exactly those of the canonical query (stored and charged once per
canonical form); the SELECT list only renames and combines them (post-processing, Dwork-Roth Prop 2.1).
An error column ``<alias>_error95`` is kept where it transforms exactly: a bare aggregate, or an
aggregate times or divided by a constant, plus or minus a constant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpsense.core.privacy_loss import PrivacyLoss
from dpsense.ledger import StoredRelease
from dpsense.release._release import BIAS_SUFFIX, ERROR_SUFFIX, NOISE_SUFFIX, Release

if TYPE_CHECKING:  # the SQL front end (sqlglot) and pandas load only when used
    import pandas as pd

    from dpsense.query.sql import Expr, SqlOutput


@dataclass(frozen=True)
class SqlRelease:
    """A SQL answer: ``table`` in the SQL's column names, backed by one stored ``Release``."""

    release: Release
    outputs: tuple[SqlOutput, ...]

    @property
    def cached(self) -> bool:
        """True when the canonical query was answered from the ledger at no cost."""
        return self.release.cached

    @property
    def charged(self) -> PrivacyLoss | None:
        """What this call charged (``None`` for a stored answer)."""
        return self.release.charged

    @property
    def record(self) -> StoredRelease:
        """The stored release behind the answer."""
        return self.release.record

    def rows(self) -> tuple[list[str], list[list[Any]]]:
        """The SQL table's column names and rows as plain values, without pandas (a CLI prints these)."""
        names, columns = self._columns()
        rows = [[_plain(column[i]) for column in columns] for i in range(len(self.release.record.value["rows"]))]
        return names, rows

    @property
    def table(self) -> pd.DataFrame:
        """One column per SELECT item (by alias), with ``_error95`` columns where they carry over exactly."""
        import pandas as pd

        names, columns = self._columns()
        return pd.DataFrame(dict(zip(names, columns, strict=True)))

    def _columns(self) -> tuple[list[str], list[Any]]:
        """Each SELECT item (and its error column where it carries over) as a numpy array, by alias."""
        base_names, base_rows = self.release.rows()
        base = {name: _array([row[j] for row in base_rows]) for j, name in enumerate(base_names)}
        names: list[str] = []
        columns: list[Any] = []
        with np.errstate(divide="ignore", invalid="ignore"):  # x/0 is inf, 0/0 NaN: as the noisy values say
            for out in self.outputs:
                names.append(out.alias)
                columns.append(_broadcast(_evaluate(out.expr, lambda leaf: base[leaf[1]]), len(base_rows)))
                error = _error(out.expr, base)
                if error is not None:
                    names.append(out.alias + ERROR_SUFFIX)
                    columns.append(error)
                bias = base.get(f"{out.expr[1]}{BIAS_SUFFIX}") if out.expr[0] == "agg" else None
                if bias is not None:  # a bare adaptive mean or sum keeps its clipping-bias bound
                    names.append(out.alias + BIAS_SUFFIX)
                    columns.append(bias)
                flags = base.get(f"{out.expr[1]}{NOISE_SUFFIX}") if out.expr[0] == "agg" else None
                if flags is not None:  # a bare aggregate keeps its noise-dominated flags
                    names.append(out.alias + NOISE_SUFFIX)
                    columns.append(flags)
        return names, columns

    def explain(self) -> str:
        """The release's explain report, then how each SQL column is computed from it (free)."""
        lines = [self.release.explain(), "SQL columns (post-processing of the released values, no privacy cost):"]
        lines.extend(f"- {out.alias!r} = {_show(out.expr)}" for out in self.outputs)
        return "\n".join(lines)


def _error(expr: Expr, base: Mapping[str, Any]) -> Any:
    kind = expr[0]
    if kind == "agg":
        column = expr[1] + ERROR_SUFFIX
        return base.get(column)
    if kind == "neg":
        return _error(expr[1], base)
    if kind in ("mul", "div", "add", "sub"):
        left, right = expr[1], expr[2]
        if kind in ("add", "sub"):
            if right[0] == "num":
                return _error(left, base)
            if left[0] == "num":
                return _error(right, base)
            return None
        if right[0] == "num" and right[1] != 0:
            inner = _error(left, base)
            factor: Fraction = right[1] if kind == "mul" else 1 / right[1]
            return None if inner is None else inner * abs(float(factor))
        if kind == "mul" and left[0] == "num":
            inner = _error(right, base)
            return None if inner is None else inner * abs(float(left[1]))
    return None


def _array(values: list[Any]) -> Any:
    """A column as a numpy array: float where every value is a number or missing, else the values as they are."""
    if values and all(isinstance(v, bool) for v in values):
        return np.asarray(values, dtype=bool)
    if all(v is None or (isinstance(v, int | float) and not isinstance(v, bool)) for v in values):
        if all(isinstance(v, int) for v in values):
            return np.asarray(values, dtype=np.int64) if values else np.asarray(values, dtype=np.float64)
        return np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)
    return np.asarray(values, dtype=object)


def _broadcast(value: Any, n: int) -> Any:
    """A constant SELECT item (``SELECT 1``) as a column of ``n`` rows; an array as it is."""
    return value if isinstance(value, np.ndarray) else np.full(n, value)


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value it holds."""
    return value.item() if isinstance(value, np.generic) else value


def _show(expr: Expr) -> str:
    kind = expr[0]
    if kind in ("agg", "key"):
        return str(expr[1])
    if kind == "num":
        return str(expr[1])
    if kind == "neg":
        return f"-({_show(expr[1])})"
    if kind == "sqrt":
        return f"sqrt({_show(expr[1])})"
    symbol = {"add": "+", "sub": "-", "mul": "*", "div": "/"}[kind]
    return f"({_show(expr[1])} {symbol} {_show(expr[2])})"


def _evaluate(expr: Expr, leaf: Any) -> Any:
    from dpsense.query.sql import evaluate  # a SqlRelease exists only once SQL was parsed: sqlglot is loaded

    return evaluate(expr, leaf)
