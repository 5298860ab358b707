"""SELECT items as small expression trees over released aggregates (free post-processing).

``("agg", name)`` is a released aggregate, ``("key", column)`` a group key, ``("num", q)`` an exact
literal; ``("add" | "sub" | "mul" | "div", a, b)``, ``("neg", a)`` and ``("sqrt", a)`` (STDDEV as the
root of a released variance) combine them. Evaluating a tree
on released values is post-processing (Dwork-Roth Prop 2.1): it costs nothing and never reads data.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

import numpy as np
from sqlglot import exp

from dpsense.query._values import check_number
from dpsense.query.sql._names import Resolver
from dpsense.query.sql._refuse import invalid, unsupported

Expr = tuple[Any, ...]

_BINARY: dict[type[exp.Expression], str] = {exp.Add: "add", exp.Sub: "sub", exp.Mul: "mul", exp.Div: "div"}


def to_expr(
    node: exp.Expression,
    aggregate_of: Callable[[exp.Expression], str | None],
    names: Resolver,
    group_columns: list[str],
) -> Expr:
    """The tree of one SELECT item; bare columns must be grouped, everything else built from aggregates."""
    if isinstance(node, exp.Paren):
        return to_expr(node.this, aggregate_of, names, group_columns)
    if isinstance(node, exp.Column):
        column = names.column(node)
        if column not in group_columns:
            raise invalid(
                "a selected column must be in GROUP BY (row values are never released)",
                column,
                f"add GROUP BY {column} (with public keys) or aggregate it",
            )
        return ("key", column)
    if isinstance(node, exp.Literal | exp.Neg) and _is_number(node):
        return ("num", literal_number(node))
    for kind, op in _BINARY.items():
        if type(node) is kind:
            left = to_expr(node.this, aggregate_of, names, group_columns)
            right = to_expr(node.expression, aggregate_of, names, group_columns)
            if "key" in (left[0], right[0]):
                raise unsupported("arithmetic on a group key", "select the key column on its own")
            return (op, left, right)
    if isinstance(node, exp.Neg):
        return ("neg", to_expr(node.this, aggregate_of, names, group_columns))
    name = aggregate_of(node)
    if name is None:
        raise unsupported(f"expression {type(node).__name__}", "select aggregates, group keys and arithmetic on them")
    if isinstance(node, exp.Stddev | exp.StddevPop | exp.StddevSamp):
        return ("sqrt", ("agg", name))  # the standard deviation is the root of the released variance
    return ("agg", name)


def _is_number(node: exp.Expression) -> bool:
    if isinstance(node, exp.Neg):
        return _is_number(node.this)
    return isinstance(node, exp.Literal) and not node.is_string


def literal_number(node: Any) -> Fraction:
    """An exact numeric literal (``-`` allowed), or a UsageError."""
    if isinstance(node, exp.Paren):
        return literal_number(node.this)
    if isinstance(node, exp.Neg):
        return -literal_number(node.this)
    if isinstance(node, exp.Literal) and not node.is_string:
        check_number(str(node.this), what="a numeric literal")
        try:
            return Fraction(Decimal(str(node.this)))
        except (InvalidOperation, ValueError):
            pass
    shown = node.sql(dialect="duckdb") if isinstance(node, exp.Expression) else node
    raise invalid("expected a numeric literal", shown, "write a number, e.g. 0.9")


def literal_value(node: exp.Expression) -> str | bool | Fraction:
    """A literal compared with a column: a string, a boolean or an exact number."""
    if isinstance(node, exp.Paren):
        return literal_value(node.this)
    if isinstance(node, exp.Literal) and node.is_string:
        return str(node.this)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        raise unsupported("a comparison with NULL", "missing values are handled by the data policy at registration")
    return literal_number(node)


def evaluate(expr: Expr, values: Callable[[Expr], Any]) -> Any:
    """Evaluate a tree; ``values`` maps ``("agg", name)`` / ``("key", column)`` leaves to released values."""
    kind = expr[0]
    if kind in ("agg", "key"):
        return values(expr)
    if kind == "num":
        return float(expr[1])
    if kind == "neg":
        return -evaluate(expr[1], values)
    if kind == "sqrt":
        return np.sqrt(np.maximum(evaluate(expr[1], values), 0))
    left, right = evaluate(expr[1], values), evaluate(expr[2], values)
    if kind == "add":
        return left + right
    if kind == "sub":
        return left - right
    if kind == "mul":
        return left * right
    return left / right
