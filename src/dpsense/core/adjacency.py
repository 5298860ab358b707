"""Adjacency and privacy-unit declarations.

Every sensitivity and every guarantee in dpsense is stated for one declared adjacency at the level of
one declared privacy unit (a person, a device, an event):

* ``ADD_REMOVE`` ("unbounded DP"): neighbouring datasets differ by all rows of one unit being added
  or removed; the number of units is private.
* ``REPLACE`` ("bounded DP"): neighbouring datasets have the same, public, number of units and differ
  in all rows of one unit.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from dpsense.core.checks import integer_in
from dpsense.core.errors import UsageError


class Adjacency(str, Enum):
    """Which neighbouring datasets the guarantee compares."""

    ADD_REMOVE = "add_remove"
    REPLACE = "replace"

    @classmethod
    def parse(cls, value: Adjacency | str) -> Adjacency:
        """Accept an ``Adjacency`` or its name, refusing anything else with the list of choices."""
        if isinstance(value, Adjacency):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            raise UsageError(
                "adjacency must be 'add_remove' or 'replace'", value, "declare adjacency='add_remove' or 'replace'"
            ) from None


@dataclass(frozen=True)
class PrivacyUnit:
    """The protected unit: the column naming it and how many rows one unit may own.

    Attributes:
        column: the identifier column (``"person_id"``); ``None`` means every row is its own unit.
        max_rows: the enforced per-unit contribution bound C over the whole release window.

    """

    column: str | None = None
    max_rows: int = 1

    def __post_init__(self) -> None:
        if not integer_in(self.max_rows, 1):
            raise UsageError(
                "max_rows per privacy unit must be an integer >= 1",
                self.max_rows,
                "declare how many rows one unit may contribute, e.g. max_rows=30",
            )

    @property
    def is_row_level(self) -> bool:
        """True when each row is its own unit (event-level protection)."""
        return self.column is None
