"""Engine errors: both are ``UsageError`` subclasses judged from the public schema, never from data."""

from __future__ import annotations

from dpsense.core.errors import UsageError


class UnknownTable(UsageError):
    """The engine has no registered table (or live temporary view) of that name."""

    def __init__(self, name: str, fix: str = "register it first with engine.register(name, source)") -> None:
        super().__init__("the engine has no table or view of this name", name, fix)


class UnknownColumn(UsageError):
    """A column name that the table's public schema does not contain."""

    def __init__(self, column: str, table: str, available: tuple[str, ...]) -> None:
        super().__init__(
            f"table {table!r} has no column of this name",
            column,
            f"use one of its columns: {', '.join(available)}",
        )
