"""Column names in SQL resolved against the dataset's public schema (SQL identifier rules)."""

from __future__ import annotations

from sqlglot import exp

from dpsense.query._schema import Schema
from dpsense.query.sql._refuse import invalid


class Resolver:
    """Resolve ``table.column`` / ``column`` references: quoted names exactly, unquoted ones case-insensitively."""

    def __init__(self, schema: Schema, table: str, alias: str | None) -> None:
        self._names = [c.name for c in schema.columns]
        self._qualifiers = {table.lower()} | ({alias.lower()} if alias else set())
        self.unit = schema.unit_column

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._find(name, quoted=False) is not None

    def column(self, node: exp.Column) -> str:
        """The schema's name for the column ``node``, or a UsageError listing the known ones."""
        qualifier = node.table
        if qualifier and qualifier.lower() not in self._qualifiers:
            raise invalid("the column is qualified by a table the query does not read", qualifier, "use the FROM name")
        identifier = node.this
        if not isinstance(identifier, exp.Identifier):
            raise invalid("a column reference must be a plain name", node.sql(dialect="duckdb"), "name a column")
        found = self._find(identifier.this, quoted=bool(identifier.args.get("quoted")))
        if found is None:
            raise invalid(
                "the query names a column the dataset does not have",
                identifier.this,
                f"use one of: {', '.join(self._names)}",
            )
        return found

    def _find(self, name: str, *, quoted: bool) -> str | None:
        if name in self._names:
            return name
        if quoted:
            return None
        matches = [n for n in self._names if n.lower() == name.lower()]
        return matches[0] if len(matches) == 1 else None
