"""The one error tree of dpsense.

Every error dpsense raises on purpose is a ``DPSenseError``::

    DPSenseError
    +-- UsageError                 the caller's input breaks a rule (judged without data)
    |   +-- InvalidPrivacyParameter    epsilon, delta, rho, alpha out of range
    |   +-- InvalidSensitivity         negative / NaN / infinite sensitivity
    |   +-- InvalidBounds              L > U, non-finite clipping bounds
    |   +-- InvalidData                empty input, non-numeric values
    |   +-- UnsupportedRequest         a combination dpsense refuses (names what to do)
    |   +-- BudgetExhausted            a ledger budget scope cannot cover a request
    |   +-- UnknownDataset             the ledger has no dataset of that name
    |   +-- UnknownAnalyst             the ledger has no analyst of that name
    |   +-- RegistrationConflict       identical data registered again with other declarations
    |   +-- SnapshotNotCurrent         a request for a snapshot other than the current one
    |   +-- RequestIdConflict          a request id reused for a different request
    |   +-- LedgerStateError           a lifecycle step not allowed from the charge's state
    +-- LedgerBusy                 the ledger's lock could not be taken in time (retry later)
    +-- ChargedFailure             a release failed after reading data: charged, no details
    +-- InternalError              a broken invariant: this is a bug, please report it

User errors state the rule, the value that broke it and the fix. They never contain a true
(unnoised) data value or a data-dependent noise scale: such errors would themselves be releases.
``InternalError`` says "this is a bug" and carries no data either.
"""

from __future__ import annotations


class DPSenseError(Exception):
    """Base class of every error dpsense raises deliberately."""


class UsageError(DPSenseError, ValueError):
    """The caller asked for something that breaks a stated rule.

    Built from three parts so that every message names the rule, the offending value and the fix.
    """

    def __init__(self, rule: str, value: object, fix: str) -> None:
        self.rule = rule
        self.value = value
        self.fix = fix
        super().__init__(f"{rule} (got {value!r}). Fix: {fix}")


class InvalidPrivacyParameter(UsageError):
    """An epsilon, delta, rho or Renyi order outside its allowed range."""


class InvalidSensitivity(UsageError):
    """A sensitivity that is negative, NaN or infinite."""


class InvalidBounds(UsageError):
    """Clipping bounds that are reversed or not finite."""


class InvalidData(UsageError):
    """Input that is empty or not numeric (judged on public shape, not on private values)."""


class UnsupportedRequest(UsageError):
    """A request dpsense refuses to answer in this form; the message names the alternative."""


class BudgetExhausted(UsageError):
    """A budget scope (total, analyst, query family or period) cannot cover a request.

    ``requested`` and ``remaining`` are exact privacy-loss values (``dpsense.core.privacy_loss``) in
    the scope's accounting mode; the ledger is unchanged when this is raised.
    """

    def __init__(self, scope: str, requested: object, remaining: object) -> None:
        self.scope = scope
        self.requested = requested
        self.remaining = remaining
        super().__init__(
            f"the {scope} budget cannot cover this request",
            f"requested {requested}, remaining {remaining}",
            "request at most the remaining amount, or ask the data steward to raise this budget",
        )


class UnknownDataset(UsageError):
    """The ledger has no dataset registered under that name."""

    def __init__(self, name: str) -> None:
        super().__init__(
            "the dataset must be registered in the ledger first", name, "register it with register_dataset"
        )


class UnknownAnalyst(UsageError):
    """The ledger has no analyst of that name."""

    def __init__(self, name: str) -> None:
        super().__init__("the analyst must be added to the ledger first", name, "ask the data steward to add_analyst")


class RegistrationConflict(UsageError):
    """The data is already registered (same keyed fingerprint) with other declarations; nothing was written.

    Identical data links to the earlier registration and keeps its declarations (adjacency, privacy
    unit, bounds, keys, policies, contribution bounds, privacy policy, budget), so registering it
    with other ones is refused instead of silently keeping the earlier ones. ``differences`` names
    each declaration that differs, as registered and as given.
    """

    def __init__(self, dataset: str, snapshot: str, differences: list[str]) -> None:
        self.dataset = dataset
        self.snapshot = snapshot
        self.differences = differences
        super().__init__(
            f"this data is already registered as dataset {dataset!r} (snapshot {snapshot!r}) with other "
            "declarations; registering the same data again links to that registration and keeps its declarations",
            differences,
            "register with the same declarations to link to it, or amend the registered ones "
            "(Session.amend_dataset; in the CLI: dpsense dataset amend), which records them as a new version of "
            "the snapshot on the same budget; registering the data again never changes a declaration",
        )


class SnapshotNotCurrent(UsageError):
    """A request named a snapshot other than the dataset's current one, and no policy allows that."""

    def __init__(self, dataset: str, snapshot: str, current: str) -> None:
        self.dataset = dataset
        self.snapshot = snapshot
        self.current = current
        super().__init__(
            f"the service answers from the current snapshot of dataset {dataset!r} only (the newest the steward "
            f"registered, now {current!r}); there is no policy that lets an analyst choose another one",
            snapshot,
            f"ask for snapshot {current!r} or leave snapshot out",
        )


class RequestIdConflict(UsageError):
    """A request id (scoped to its analyst) reused for a request with different parameters."""


class LedgerStateError(UsageError):
    """A lifecycle step (commit, fail, retry) not allowed from the charge's current state."""


class LedgerBusy(DPSenseError, RuntimeError):
    """The ledger's lock was not obtained within its timeout; nothing was charged. Retry later."""


class LedgerUnreadable(UsageError):
    """The ledger cannot be read: a missing, empty, truncated or corrupt file, or an unreachable database.

    ``dpsense verify-log`` answers it with its own exit code: a ledger that cannot be read is neither
    intact nor proven tampered.
    """


class ChargedFailure(DPSenseError, RuntimeError):
    """A release failed after it read the data. Its cost stays charged and the error says nothing more.

    An error that depends on private data is itself a release (docs/design.md invariant 6), so the reason is
    not shown: only the request id, which the steward can look up in the ledger.
    """

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        super().__init__(
            f"the release {request_id!r} failed after reading the data; its cost is charged (a failure that "
            "depends on the data is itself a release, so no reason is given). The request id stays spent; a new "
            "attempt needs a new request id and is charged again. Ask the steward to check the ledger entry."
        )


class InternalError(DPSenseError, RuntimeError):
    """A broken internal invariant. This is a bug in dpsense; please report it."""

    def __init__(self, what: str) -> None:
        super().__init__(f"internal invariant broken: {what}. This is a bug in dpsense; please report it.")
