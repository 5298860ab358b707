"""How the CLI reports refusals: one red line on stderr and an exit code, never a traceback.

Exit codes:
    0  success
    1  the ledger is tampered (``verify-log``, ``checkpoint``), a stored snapshot fails its check
       (``dataset verify``) or an audit failed
    2  bad input or any other refusal (``DPSenseError``, a malformed YAML file, a bad option)
    3  a budget cannot cover the request (``BudgetExhausted``): nothing was charged
    4  the release failed after reading the data (``ChargedFailure``): it is charged
    5  the ledger cannot be read (``LedgerUnreadable``: missing, empty, truncated or corrupt); a
       SQLite ledger file that does not exist, unless the command was given ``--create``
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpsense.core.errors import BudgetExhausted, ChargedFailure, DPSenseError, LedgerUnreadable, UsageError

if TYPE_CHECKING:
    from rich.console import Console

EXIT_TAMPERED = 1
EXIT_REFUSED = 2
EXIT_BUDGET = 3
EXIT_CHARGED = 4
EXIT_UNREADABLE = 5


class SpecError(UsageError):
    """A file or option the CLI reads breaks its format; the message names the field and the fix."""

    def __init__(self, field: str, problem: str, value: object, fix: str) -> None:
        self.field = field
        super().__init__(f"{field}: {problem}" if field else problem, value, fix)


def exit_code(error: DPSenseError) -> int:
    """The exit code of a refusal."""
    if isinstance(error, BudgetExhausted):
        return EXIT_BUDGET
    if isinstance(error, ChargedFailure):
        return EXIT_CHARGED
    if isinstance(error, LedgerUnreadable):
        return EXIT_UNREADABLE
    return EXIT_REFUSED


def print_error(console: Console, message: str) -> None:
    """One red line on ``console`` (stderr): the message with its line breaks folded."""
    from dpsense.interface.wording import for_interface

    line = for_interface(" ".join(message.split()), "cli")
    console.print(f"error: {line}", style="red", markup=False, highlight=False, soft_wrap=True)
