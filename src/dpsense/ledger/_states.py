r"""The charge lifecycle as an explicit state machine.

::

    (new) --reserve--> RESERVED --commit--> COMMITTED          (release stored; value may leave)
                          |  \--fail(data_accessed=True)--> FAILED      (stays spent)
                          |  \--fail(data_accessed=False)--> REFUNDED   (only by the reserving process)
                          \--resolve_stale--> ABANDONED --commit (retry)--> COMMITTED
                                                   \--fail--> FAILED   (never refunded)
    REFUNDED --reserve (retry of the same request id)--> RESERVED   (charged again, once)

Rules:

* ``reserve`` debits every scope the request falls in (total, analyst, family, period) atomically,
  before any data is read.
* A failure *before* data access may refund, but only by the process that reserved (it alone knows
  that no data was touched). Once data was touched the reservation stays spent (an error that
  depends on the data is itself a release, docs/design.md invariant 6).
* A reservation left by a crashed process is never silently refunded: ``resolve_stale`` marks it
  ABANDONED and it stays charged.
* Single flight: a RESERVED charge with a cache key holds the key; an identical request waits for
  it. A holder still RESERVED after its lease, or ABANDONED, is superseded by the next identical
  request: RESERVED/ABANDONED -> FAILED (stays spent, can never commit), see ``_ledger``.
* A retry with the same (analyst, request id) never charges twice and never draws new noise for a
  value that left the process: COMMITTED returns the stored release; RESERVED or ABANDONED means no
  value was ever committed (values leave only after ``commit``), so the retry may complete it, and
  ``commit`` accepts exactly one completion.
"""

from __future__ import annotations

from enum import Enum

from dpsense.core.errors import LedgerStateError


class ChargeState(str, Enum):
    """Where a charge is in its lifecycle."""

    RESERVED = "reserved"
    COMMITTED = "committed"
    FAILED = "failed"
    REFUNDED = "refunded"
    ABANDONED = "abandoned"


#: States whose amount counts against the budget.
SPENT_STATES = frozenset({ChargeState.RESERVED, ChargeState.COMMITTED, ChargeState.FAILED, ChargeState.ABANDONED})
#: States a retry (or the reserving process) may still complete with ``commit``.
OPEN_STATES = frozenset({ChargeState.RESERVED, ChargeState.ABANDONED})

_ALLOWED: dict[ChargeState, frozenset[ChargeState]] = {
    ChargeState.RESERVED: frozenset(
        {ChargeState.COMMITTED, ChargeState.FAILED, ChargeState.REFUNDED, ChargeState.ABANDONED}
    ),
    ChargeState.ABANDONED: frozenset({ChargeState.COMMITTED, ChargeState.FAILED}),
    ChargeState.REFUNDED: frozenset({ChargeState.RESERVED}),
    ChargeState.COMMITTED: frozenset(),
    ChargeState.FAILED: frozenset(),
}


def check_transition(current: ChargeState, target: ChargeState, *, request_id: str) -> None:
    """Refuse a lifecycle step that the state machine does not allow."""
    if target not in _ALLOWED[current]:
        raise LedgerStateError(
            f"a {current.value} charge cannot become {target.value}",
            request_id,
            "retry with reserve() to get the stored release, or use a new request id for a new request",
        )
