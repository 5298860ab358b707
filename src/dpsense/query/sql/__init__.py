"""The SQL front end: a DP subset of SQL parsed with sqlglot into the builder's frozen IR.

``parse_sql(text, schema_for=...)`` returns a ``SqlQuery``: the ``Query`` that is released (its IR's
canonical form decides the charge and the stored release) and the ``SqlOutput`` list that renames and
rescales the released values for free. Rewrites of one question (aliases, order of SELECT items and
GROUP BY columns, commuted or repeated predicates, BETWEEN, COUNT(1), case and whitespace) share one
canonical form; questions that differ in meaning do not. Unsupported SQL is refused with an error that
names the construct and the alternative, before anything is charged.
"""

from dpsense.query.sql._expr import Expr, evaluate
from dpsense.query.sql._parse import SqlOutput, SqlQuery, parse_sql

__all__ = ["Expr", "SqlOutput", "SqlQuery", "evaluate", "parse_sql"]
