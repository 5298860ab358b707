"""WHERE clauses -> a canonical list of public comparisons ``column op literal``.

Rules (each keeps the meaning under SQL's three-valued logic, where a NULL fails every comparison,
and the engine's rule that NaN fails every filter):

* conjunctions are flattened and parentheses dropped (``a AND (b AND c)``);
* a literal on the left is moved right with the comparison mirrored (``3 < x`` is ``x > 3``);
* ``NOT`` of a comparison is the complementary comparison (``NOT x < 3`` is ``x >= 3``);
* ``x BETWEEN a AND b`` is ``x >= a AND x <= b``;
* ``x = a OR x = b OR x IN (c)`` on one column is ``x IN (a, b, c)``;
* several lower (upper) bounds on one numeric column keep the tightest (``x > 3 AND x >= 5`` is
  ``x >= 5``; at equal values the strict one wins);
* repeated conjuncts and the order of conjuncts and of IN lists are removed by the IR's normal form.

Anything else (OR across columns, IS NULL, NOT IN, column-to-column comparisons) is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from sqlglot import exp

from dpsense.query.sql._expr import literal_value
from dpsense.query.sql._names import Resolver
from dpsense.query.sql._refuse import invalid, unsupported

_OPS: dict[type[exp.Expression], str] = {
    exp.EQ: "==",
    exp.NEQ: "!=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
}
_MIRROR = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NEGATE = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


@dataclass(frozen=True)
class Conjunct:
    """One public comparison; ``value`` is a tuple for ``in``."""

    column: str
    op: str
    value: Any


def normalise_filters(node: exp.Expression | None, names: Resolver) -> list[Conjunct]:
    """The canonical conjuncts of a WHERE condition (``node`` None: no filter)."""
    if node is None:
        return []
    atoms = [atom for part in _conjuncts(node) for atom in _atoms(part, names)]
    return _tighten(atoms)


def _conjuncts(node: exp.Expression) -> list[exp.Expression]:
    """The parts of an AND chain, left to right (iterative: a long chain is one flat list)."""
    parts: list[exp.Expression] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, exp.Paren):
            stack.append(item.this)
        elif isinstance(item, exp.And):
            stack.extend([item.expression, item.this])
        else:
            parts.append(item)
    return parts


def _atoms(node: exp.Expression, names: Resolver) -> list[Conjunct]:
    if isinstance(node, exp.Paren):
        return [a for part in _conjuncts(node.this) for a in _atoms(part, names)]
    if isinstance(node, exp.Or):
        return [_disjunction(node, names)]
    if isinstance(node, exp.Not):
        inner = node.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if type(inner) in _OPS:
            atom = _comparison(inner, names)
            return [Conjunct(atom.column, _NEGATE[atom.op], atom.value)]
        if isinstance(inner, exp.Not):
            return [a for part in _conjuncts(inner.this) for a in _atoms(part, names)]
        raise unsupported(
            f"NOT {type(inner).__name__.upper()}", "negate single comparisons only (NOT IN: list kept values)"
        )
    if type(node) in _OPS:
        return [_comparison(node, names)]
    if isinstance(node, exp.Between):
        column = _column(node.this, names)
        return [
            Conjunct(column, ">=", literal_value(node.args["low"])),
            Conjunct(column, "<=", literal_value(node.args["high"])),
        ]
    if isinstance(node, exp.In):
        return [_in(node, names)]
    if isinstance(node, exp.Is):
        raise unsupported("IS NULL / IS NOT NULL", "missing values are handled by the data policy at registration")
    raise unsupported(
        f"condition {type(node).__name__.upper()}",
        "use comparisons of a column with literals (=, !=, <, <=, >, >=, BETWEEN, IN) joined by AND",
    )


def _column(node: exp.Expression, names: Resolver) -> str:
    while isinstance(node, exp.Paren):
        node = node.this
    if not isinstance(node, exp.Column):
        raise unsupported("a condition on an expression", "compare a column with a literal")
    return names.column(node)


def _comparison(node: exp.Expression, names: Resolver) -> Conjunct:
    op = _OPS[type(node)]
    left, right = node.this, node.expression
    if isinstance(left, exp.Column) and isinstance(right, exp.Column):
        raise unsupported("a comparison of two columns", "compare a column with a literal")
    if isinstance(right, exp.Column) and not isinstance(left, exp.Column):
        left, right, op = right, left, _MIRROR[op]
    return Conjunct(_column(left, names), op, literal_value(right))


def _in(node: exp.In, names: Resolver) -> Conjunct:
    if node.args.get("query") is not None:
        raise unsupported("IN (subquery)", "list the values: IN ('a', 'b')")
    values = tuple(literal_value(v) for v in node.expressions)
    if not values:
        raise invalid("IN needs at least one value", "IN ()", "list the values")
    return Conjunct(_column(node.this, names), "in", values)


def _disjunction(node: exp.Expression, names: Resolver) -> Conjunct:
    parts: list[exp.Expression] = []
    stack = [node]
    while stack:
        item = stack.pop()
        while isinstance(item, exp.Paren):
            item = item.this
        if isinstance(item, exp.Or):
            stack.extend([item.this, item.expression])
        else:
            parts.append(item)
    column: str | None = None
    values: list[Any] = []
    for part in parts:
        if isinstance(part, exp.EQ):
            atom = _comparison(part, names)
            found, more = atom.column, [atom.value]
        elif isinstance(part, exp.In):
            atom = _in(part, names)
            found, more = atom.column, list(atom.value)
        else:
            raise unsupported("OR of conditions other than equalities", "use IN on one column, or separate releases")
        if column is not None and found != column:
            raise unsupported("OR across columns", "use IN on one column, or separate releases")
        column = found
        values.extend(more)
    assert column is not None
    return Conjunct(column, "in", tuple(values))


def _tighten(atoms: list[Conjunct]) -> list[Conjunct]:
    """Keep the tightest lower and upper bound per numeric column; other atoms as they are."""
    lower: dict[str, tuple[Fraction, bool]] = {}
    upper: dict[str, tuple[Fraction, bool]] = {}
    rest: list[Conjunct] = []
    for atom in atoms:
        if atom.op in (">", ">=") and isinstance(atom.value, Fraction):
            strict = atom.op == ">"
            old = lower.get(atom.column)
            if old is None or atom.value > old[0] or (atom.value == old[0] and strict):
                lower[atom.column] = (atom.value, strict)
        elif atom.op in ("<", "<=") and isinstance(atom.value, Fraction):
            strict = atom.op == "<"
            old = upper.get(atom.column)
            if old is None or atom.value < old[0] or (atom.value == old[0] and strict):
                upper[atom.column] = (atom.value, strict)
        else:
            rest.append(atom)
    rest.extend(Conjunct(c, ">" if s else ">=", v) for c, (v, s) in lower.items())
    rest.extend(Conjunct(c, "<" if s else "<=", v) for c, (v, s) in upper.items())
    return rest
