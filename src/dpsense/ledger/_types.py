"""Plain records the ledger takes and returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from dpsense.core.errors import InvalidBounds, UsageError
from dpsense.core.privacy_loss import PrivacyLoss
from dpsense.ledger._states import ChargeState

ScopeKind = Literal["total", "analyst", "family", "period"]


@dataclass(frozen=True)
class Scope:
    """A budget scope of a dataset: the total, or an analyst, query-family or time-window sub-budget."""

    kind: ScopeKind
    value: str = ""
    start: int | None = None
    end: int | None = None

    @classmethod
    def total(cls) -> Scope:
        """The dataset's total budget (always applies)."""
        return cls("total")

    @classmethod
    def analyst(cls, name: str) -> Scope:
        """The sub-budget of one analyst."""
        return cls("analyst", _name(name, "analyst"))

    @classmethod
    def family(cls, name: str) -> Scope:
        """The sub-budget of one query family (a label the caller attaches to requests)."""
        return cls("family", _name(name, "family"))

    @classmethod
    def period(cls, start: int, end: int) -> Scope:
        """The sub-budget of requests made in ``[start, end)`` (Unix seconds, the ledger's clock)."""
        if not (isinstance(start, int) and isinstance(end, int)) or start >= end:
            raise InvalidBounds(
                "a period needs integer Unix seconds with start < end", (start, end), "pass start < end"
            )
        if not -(2**63) <= start < end <= 2**63 - 1:  # a ledger column holds 64-bit integers
            raise InvalidBounds(
                "a period's Unix seconds must be 64-bit integers", (start, end), "pass seconds of a real date"
            )
        return cls("period", f"{start}:{end}", start, end)

    def __str__(self) -> str:
        if self.kind == "total":
            return "dataset total"
        return f"{self.kind} {self.value!r}"


def _name(value: str, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise UsageError(f"a {what} name must be a non-empty string", value, f"pass the {what}'s name")
    if "\x00" in value or (not value.isprintable() and any(ord(c) < 32 for c in value)):
        raise UsageError(f"a {what} name may not contain control characters", repr(value), "use printable text")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"a {what} name must be valid Unicode text", repr(value), "use printable text") from None
    return value


@dataclass(frozen=True)
class ReleaseRecord:
    """What the caller stores at commit: the released (noised) value and how it was made.

    Only values that are released to the analyst go here; never an unnoised value or a
    data-dependent noise scale (docs/design.md invariant 3).
    """

    value: Any
    mechanism: str
    mechanism_version: str
    parameters: dict[str, Any]
    privacy_unit: str
    adjacency: str
    code_version: str


@dataclass(frozen=True)
class StoredRelease:
    """A committed release as stored by the ledger."""

    release_id: int
    charge_id: int
    dataset: str
    cache_key: str | None
    value: Any
    mechanism: str
    mechanism_version: str
    parameters: dict[str, Any]
    privacy_unit: str
    adjacency: str
    code_version: str
    #: When the release was committed (Unix seconds, the ledger's clock); ``None`` where not known.
    created_at: float | None = None


@dataclass(frozen=True)
class Reservation:
    """The outcome of ``reserve``.

    ``stored`` is set when the request is answered from the ledger (a retry of a committed request,
    or a cache hit): the caller must return it and run nothing. Otherwise the caller runs the
    release and calls ``commit`` or ``fail``. ``resumed`` marks a retry of a request whose earlier
    attempt reserved but never committed; it was already charged, and it cannot be refunded.
    ``budgets`` holds every budget scope the reserve transaction locked (the total and the analyst,
    family and period scopes that apply, in id order), as this request left them: after its own
    debit, from the rows that transaction locked (a front end answers with them, no second read).
    """

    charge_id: int | None
    dataset: str
    analyst: str
    request_id: str
    loss: PrivacyLoss
    state: ChargeState
    stored: StoredRelease | None = None
    resumed: bool = False
    cache_hit: bool = field(default=False)
    budgets: tuple[BudgetStatus, ...] = ()

    @property
    def is_replay(self) -> bool:
        """True when the answer is already stored and nothing may run."""
        return self.stored is not None


@dataclass(frozen=True)
class BudgetStatus:
    """Cap, spend and remainder of one scope, as exact privacy-loss values in the scope's mode."""

    dataset: str
    scope: Scope
    mode: str
    cap: PrivacyLoss
    spent: PrivacyLoss
    remaining: PrivacyLoss


@dataclass(frozen=True)
class ChargeRecord:
    """One charge as the ledger holds it (for audits and checks; amounts exact)."""

    charge_id: int
    dataset: str
    analyst: str
    request_id: str
    state: ChargeState
    loss: PrivacyLoss
    family: str | None
    cache_key: str | None
