"""SQL text -> the builder's ``Query`` plus the free post-processing of its outputs.

The DP subset: one ``SELECT`` of aggregates over one registered dataset, ``WHERE`` on public
predicates, ``GROUP BY`` columns with public keys, and arithmetic on aggregate results. Everything is
parsed with sqlglot (DuckDB dialect) and mapped onto the same frozen IR the Python builder makes, so a
SQL question and its rewrites share one canonical form (``_canonical`` explains the rules).

Output names in the IR are derived from the aggregate's meaning (``mean(hours)``, ``count``), never
from the analyst's aliases: aliases and arithmetic on results are post-processing, applied to the
released table (``SqlOutput``), so renaming or rescaling a result never costs a second charge.

Size limits come before the parser (``check_size``): at most ``MAX_SQL_CHARS`` characters,
``MAX_SQL_TOKENS`` tokens, ``MAX_SQL_OPERATORS`` operators (AND, OR, NOT, arithmetic, comparisons,
casts) and ``MAX_SQL_NESTING`` levels of parentheses, so that no parser or walker can recurse past
Python's limit (a 1000-term ``AND`` chain is refused with the rule, never a ``RecursionError``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import sqlglot
from sqlglot import TokenType, exp
from sqlglot.dialects.dialect import Dialect

from dpsense.core.numbers import ratio_text
from dpsense.query._aggregates import Aggregate, count, count_units, mean, median, quantile, sum, variance
from dpsense.query._builder import Query
from dpsense.query._schema import Schema
from dpsense.query.sql._canonical import Conjunct, normalise_filters
from dpsense.query.sql._expr import Expr, to_expr
from dpsense.query.sql._names import Resolver
from dpsense.query.sql._refuse import CLAUSE_FIXES, invalid, unsupported

_SUPPORTED = (
    "COUNT(*), COUNT(DISTINCT <privacy unit>), SUM, AVG, MEDIAN, PERCENTILE_CONT/DISC, QUANTILE, MIN, MAX, "
    "VARIANCE/STDDEV"
)
#: The longest SQL text read.
MAX_SQL_CHARS = 20_000
#: The most tokens (words, literals, symbols) in one query.
MAX_SQL_TOKENS = 5_000
#: The most operators in one query: AND, OR, NOT, + - * / %, ||, comparisons, ::, IS.
MAX_SQL_OPERATORS = 256
#: The deepest nesting of parentheses (function calls included).
MAX_SQL_NESTING = 32
#: The deepest expression tree the walkers accept (a backstop; the limits above keep trees shallower).
_MAX_TREE_DEPTH = MAX_SQL_OPERATORS + 4 * MAX_SQL_NESTING + 16
_OPERATORS = frozenset(
    {
        TokenType.AND, TokenType.OR, TokenType.NOT, TokenType.PLUS, TokenType.DASH, TokenType.STAR,
        TokenType.SLASH, TokenType.MOD, TokenType.DPIPE, TokenType.PIPE, TokenType.AMP, TokenType.CARET,
        TokenType.TILDE, TokenType.EQ, TokenType.NEQ, TokenType.LT, TokenType.LTE, TokenType.GT, TokenType.GTE,
        TokenType.DCOLON, TokenType.IS, TokenType.ARROW, TokenType.DARROW, TokenType.LIKE, TokenType.ILIKE,
        TokenType.BETWEEN, TokenType.IN, TokenType.COLLATE, TokenType.DOT,
    }
)  # fmt: skip
_OPEN = frozenset({TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE})
_CLOSE = frozenset({TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE})
_ALLOWED_CLAUSES = frozenset({"expressions", "from", "from_", "where", "group"})


@dataclass(frozen=True)
class SqlOutput:
    """One column of the SQL result: its alias and how it is computed from the released values."""

    alias: str
    expr: Expr


@dataclass(frozen=True)
class SqlQuery:
    """A parsed SQL question: the builder query (what is released) and the outputs (free post-processing)."""

    dataset: str
    query: Query
    outputs: tuple[SqlOutput, ...]


def parse_sql(text: str, *, schema_for: Callable[[str, bool], tuple[str, Schema]]) -> SqlQuery:
    """Parse ``text`` into a ``SqlQuery`` against the schema of the dataset it names.

    ``schema_for(name, quoted)`` maps the FROM name as written to the dataset's registered name and
    public schema (unquoted names are case-insensitive in SQL; the caller decides how to match).

    Raises:
        UsageError: unparsable SQL, unknown columns, wrong literal types (nothing is charged).
        UnsupportedRequest: a construct outside the DP subset; the message names it and the alternative.

    """
    try:
        return _parse(text, schema_for)
    except RecursionError:  # a backstop: check_size keeps every tree far below the recursion limit
        raise invalid(
            f"a SQL query nests at most {MAX_SQL_NESTING} levels and has at most {MAX_SQL_OPERATORS} operators",
            "nested too deeply",
            "split the query or simplify its expressions",
        ) from None


def check_size(text: str) -> None:
    """Refuse SQL over the size limits (module docstring) before it is parsed; linear in the text."""
    if len(text) > MAX_SQL_CHARS:
        raise invalid(f"a SQL query is at most {MAX_SQL_CHARS} characters", len(text), "shorten the query")
    try:
        tokens = Dialect.get_or_raise("duckdb").tokenize(text)
    except Exception as exc:  # sqlglot raises TokenError and others: all mean "not parsable"
        raise invalid(
            "the SQL could not be parsed", _first_line(str(exc)), "check the syntax (DuckDB dialect)"
        ) from None
    if len(tokens) > MAX_SQL_TOKENS:
        raise invalid(f"a SQL query has at most {MAX_SQL_TOKENS} tokens", len(tokens), "shorten the query")
    operators = depth = deepest = 0
    for token in tokens:
        kind = token.token_type
        if kind in _OPERATORS:
            operators += 1
        elif kind in _OPEN:
            depth += 1
            deepest = max(deepest, depth)
        elif kind in _CLOSE:
            depth -= 1
    if operators > MAX_SQL_OPERATORS:
        raise invalid(
            f"a SQL query has at most {MAX_SQL_OPERATORS} operators (AND, OR, NOT, arithmetic, comparisons)",
            operators,
            "use IN (...) for lists of values, or split the question into several releases",
        )
    if deepest > MAX_SQL_NESTING:
        raise invalid(
            f"a SQL query nests parentheses at most {MAX_SQL_NESTING} levels deep",
            deepest,
            "remove redundant parentheses",
        )


def _parse(text: str, schema_for: Callable[[str, bool], tuple[str, Schema]]) -> SqlQuery:
    select = _single_select(text)
    for key, value in select.args.items():
        if value and key not in _ALLOWED_CLAUSES:
            construct, fix = CLAUSE_FIXES.get(key.rstrip("_"), (key.rstrip("_").upper(), "remove it"))
            raise unsupported(construct, fix)
    table = _table(select)
    _refuse_nested(select)
    dataset, schema = schema_for(table.name, table.quoted)
    names = Resolver(schema, table.name, table.alias or None)
    items = _select_items(select)
    group_columns = _group_columns(select, items, names)
    aggregates: dict[str, Aggregate] = {}
    outputs = []
    for alias, node in items:
        expr = to_expr(node, lambda f: _aggregate(f, names, aggregates), names, group_columns)
        outputs.append(SqlOutput(alias, expr))
    if not aggregates:
        raise invalid("a DP query selects at least one aggregate", "no aggregate", "add e.g. COUNT(*)")
    query = Query(dataset)
    where = select.args.get("where")
    for conjunct in normalise_filters(where.this if where is not None else None, names):
        query = _apply(query, conjunct)
    for column in group_columns:
        query = query.group_by(column)
    return SqlQuery(dataset, query.agg(**aggregates), tuple(outputs))


# -- statement shape ---------------------------------------------------------------------------------


def _single_select(text: object) -> exp.Select:
    if not isinstance(text, str) or not text.strip():
        raise invalid("a SQL query must be a non-empty string", text, "pass e.g. 'SELECT COUNT(*) FROM events'")
    check_size(text)
    try:
        statements = [s for s in sqlglot.parse(text, read="duckdb") if s is not None]
    except RecursionError:
        raise  # parse_sql answers it with the nesting rule
    except Exception as exc:  # sqlglot raises ParseError, TokenError and others: all mean "not parsable"
        raise invalid(
            "the SQL could not be parsed", _first_line(str(exc)), "check the syntax (DuckDB dialect)"
        ) from None
    for statement in statements:
        _check_depth(statement)
    if len(statements) != 1:
        raise unsupported("several statements", "send one SELECT per request")
    statement = statements[0]
    if not isinstance(statement, exp.Select):
        raise unsupported(type(statement).__name__.upper(), "only a single SELECT of aggregates is supported")
    return statement


def _check_depth(tree: Any) -> None:
    """Refuse a tree deeper than the walkers accept (iterative, so it cannot recurse itself)."""
    stack: list[tuple[Any, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > _MAX_TREE_DEPTH:
            raise invalid(
                f"a SQL query nests at most {MAX_SQL_NESTING} levels and has at most {MAX_SQL_OPERATORS} operators",
                "nested too deeply",
                "split the query or simplify its expressions",
            )
        stack.extend((child, depth + 1) for child in node.iter_expressions())


def _refuse_nested(select: exp.Select) -> None:
    for node in select.walk():
        if node is select:
            continue
        if isinstance(node, exp.Window):
            raise unsupported("window function (OVER)", "use GROUP BY with public keys")
        if isinstance(node, exp.Select | exp.Subquery | exp.Union):
            raise unsupported("subquery", "subqueries over private data are refused; query the dataset directly")
        if isinstance(node, exp.Join):
            raise unsupported("JOIN", CLAUSE_FIXES["joins"][1])


@dataclass(frozen=True)
class _Table:
    name: str
    alias: str
    quoted: bool


def _table(select: exp.Select) -> _Table:
    source = select.args.get("from_") or select.args.get("from")
    if source is None:
        raise invalid("a DP query reads one dataset", "no FROM", "add FROM <dataset>")
    table = source.this
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
        raise unsupported("FROM something other than a dataset name", "FROM <registered dataset>")
    if table.args.get("db") or table.args.get("catalog"):
        raise unsupported("a qualified table name", "FROM <registered dataset> without schema or catalog")
    extra = sorted(k for k, v in table.args.items() if v and k not in ("this", "alias"))
    if extra:
        raise unsupported(f"table modifier {extra[0].upper()}", "FROM <registered dataset> [AS alias]")
    return _Table(table.name, table.alias, bool(table.this.args.get("quoted")))


def _select_items(select: exp.Select) -> list[tuple[str, exp.Expression]]:
    items = []
    for node in select.expressions:
        if isinstance(node, exp.Star):
            raise unsupported("SELECT *", "name the aggregates, e.g. SELECT COUNT(*), AVG(hours)")
        if isinstance(node, exp.Alias):
            items.append((node.alias, node.this))
        else:
            items.append((node.sql(dialect="duckdb"), node))
    aliases = [a for a, _ in items]
    if len(set(aliases)) != len(aliases):
        raise invalid("output names must be distinct", aliases, "give each SELECT item its own alias")
    return items


def _group_columns(select: exp.Select, items: list[tuple[str, exp.Expression]], names: Resolver) -> list[str]:
    group = select.args.get("group")
    if group is None:
        return []
    if group.args.get("rollup") or group.args.get("cube") or group.args.get("grouping_sets"):
        raise unsupported("ROLLUP / CUBE / GROUPING SETS", "release one grouping at a time")
    by_alias = {alias: node for alias, node in items}
    columns: list[str] = []
    for node in group.expressions:
        target = node
        if isinstance(node, exp.Literal) and not node.is_string:
            position = int(node.this) if node.this.isdigit() else 0
            if not 1 <= position <= len(items):
                raise invalid("GROUP BY position out of range", node.this, f"use 1..{len(items)}")
            target = items[position - 1][1]
        elif isinstance(node, exp.Column) and not node.table and node.name in by_alias and node.name not in names:
            target = by_alias[node.name]
        if not isinstance(target, exp.Column):
            raise unsupported("GROUP BY an expression", "group by a column with public keys")
        column = names.column(target)
        if column not in columns:
            columns.append(column)
    return columns


# -- aggregates --------------------------------------------------------------------------------------


def _aggregate(node: exp.Expression, names: Resolver, found: dict[str, Aggregate]) -> str | None:
    """The IR name of the aggregate ``node`` (registered in ``found``), or None when it is no aggregate."""
    made = _make_aggregate(node, names)
    if made is None:
        return None
    name, aggregate = made
    found[name] = aggregate
    return name


def _make_aggregate(node: exp.Expression, names: Resolver) -> tuple[str, Aggregate] | None:
    if isinstance(node, exp.Count):
        return _count(node, names)
    simple: dict[type[exp.Expression], tuple[str, Callable[[str], Aggregate]]] = {
        exp.Sum: ("sum", sum),
        exp.Avg: ("mean", mean),
        exp.Median: ("median", median),
        exp.Variance: ("variance", variance),
        exp.VariancePop: ("variance", variance),
        exp.Stddev: ("variance", variance),
        exp.StddevPop: ("variance", variance),
        exp.StddevSamp: ("variance", variance),
    }
    for kind, (label, make) in simple.items():
        if type(node) is kind:
            column = _column_argument(node, names)
            return f"{label}({column})", make(column)
    if isinstance(node, exp.Min | exp.Max):
        column = _column_argument(node, names)
        return _quantile(column, Fraction(0) if isinstance(node, exp.Min) else Fraction(1))
    if isinstance(node, exp.WithinGroup):
        return _within_group(node, names)
    if isinstance(node, exp.PercentileCont | exp.PercentileDisc):
        column = names.column(_require_column(node.this))
        return _quantile(column, _fraction(node.args.get("expression")))
    if isinstance(node, exp.Quantile):
        column = names.column(_require_column(node.this))
        return _quantile(column, _fraction(node.args.get("quantile")))
    if isinstance(node, exp.AggFunc | exp.Anonymous | exp.Func) and not isinstance(node, _ARITHMETIC):
        name = node.sql_name() if not isinstance(node, exp.Anonymous) else str(node.this).upper()
        raise unsupported(f"function {name}", f"use one of: {_SUPPORTED}")
    return None


_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg, exp.Paren)


def _count(node: exp.Count, names: Resolver) -> tuple[str, Aggregate]:
    argument = node.this
    if argument is None or isinstance(argument, exp.Star):
        return "count", count()
    if isinstance(argument, exp.Literal) and not argument.is_string:
        return "count", count()  # COUNT(1): every row
    if isinstance(argument, exp.Distinct):
        inner = argument.expressions
        if len(inner) == 1 and isinstance(inner[0], exp.Column) and names.column(inner[0]) == names.unit:
            return "count_units", count_units()
        raise unsupported(
            "COUNT(DISTINCT <column other than the privacy unit>)",
            f"COUNT(DISTINCT {names.unit}) counts units; for distinct values GROUP BY the column with public keys",
        )
    raise unsupported("COUNT(<column>)", "use COUNT(*) (rows) or COUNT(DISTINCT <privacy unit>)")


def _within_group(node: exp.WithinGroup, names: Resolver) -> tuple[str, Aggregate]:
    function = node.this
    order = node.expression
    if not isinstance(function, exp.PercentileCont | exp.PercentileDisc) or not isinstance(order, exp.Order):
        raise unsupported("WITHIN GROUP other than PERCENTILE_CONT / PERCENTILE_DISC", f"use one of: {_SUPPORTED}")
    if len(order.expressions) != 1:
        raise unsupported("ordering by several columns", "order by one column")
    ordered = order.expressions[0]
    column = names.column(_require_column(ordered.this))
    q = _fraction(function.this)
    return _quantile(column, 1 - q if ordered.args.get("desc") else q)


def _quantile(column: str, q: Fraction) -> tuple[str, Aggregate]:
    if not 0 <= q <= 1:
        raise invalid("a quantile lies in [0, 1]", float(q), "pass e.g. 0.9")
    if q == Fraction(1, 2):  # PERCENTILE_CONT(0.5) is the median: one canonical form, one release
        return f"median({column})", median(column)
    return f"quantile({column},{ratio_text(q)})", quantile(column, q)


def _column_argument(node: exp.Expression, names: Resolver) -> str:
    if node.args.get("expressions"):
        raise invalid("the aggregate takes one column", node.sql(dialect="duckdb"), "pass one column")
    return names.column(_require_column(node.this))


def _require_column(node: Any) -> exp.Column:
    if isinstance(node, exp.Distinct):
        raise unsupported("DISTINCT inside an aggregate", "only COUNT(DISTINCT <privacy unit>) is supported")
    if not isinstance(node, exp.Column):
        raise unsupported(
            "an expression inside an aggregate",
            "aggregate a column; arithmetic on the result (e.g. AVG(hours) * 60) is supported",
        )
    return node


def _fraction(node: Any) -> Fraction:
    from dpsense.query.sql._expr import literal_number

    if node is None:
        raise invalid("a quantile needs its fraction q", None, "pass e.g. PERCENTILE_CONT(0.9)")
    return literal_number(node)


def _apply(query: Query, conjunct: Conjunct) -> Query:
    return query.filter(conjunct.column, conjunct.op, conjunct.value)


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "syntax error"
    return line[:200]
