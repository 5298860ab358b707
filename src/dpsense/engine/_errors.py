"""Engine errors: two judged from the public schema, one that depends on the data.

``UnknownTable`` and ``UnknownColumn`` are ``UsageError`` subclasses judged from the public schema,
never from data; ``CollectLimitExceeded`` depends on the data and is charged.
"""

from __future__ import annotations

from dpsense.core.errors import DPSenseError, UsageError


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


class CollectLimitExceeded(DPSenseError, RuntimeError):
    """A collected view holds more rows than the caller's public bound ``max_rows``.

    Not a ``UsageError``: whether a view exceeds the bound depends on the data, so this failure is
    only known after reading and is itself a (one-bit) release. The release layer treats it like
    every error after data access: the request is charged and reported as ``ChargedFailure``. The
    message holds the public bound only, never the number of rows found.
    """

    def __init__(self, max_rows: int) -> None:
        self.max_rows = max_rows
        super().__init__(
            f"the view holds more rows than the public bound max_rows={max_rows}; this failure is charged. "
            "Fix: derive a larger public bound (e.g. units x max_rows_per_unit), or bound fewer rows per unit"
        )
