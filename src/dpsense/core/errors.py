"""The one error tree of dpsense.

Every error dpsense raises on purpose is a ``DPSenseError``::

    DPSenseError
    +-- UsageError                 the caller's input breaks a rule (judged without data)
    |   +-- InvalidPrivacyParameter    epsilon, delta, rho, alpha out of range
    |   +-- InvalidSensitivity         negative / NaN / infinite sensitivity
    |   +-- InvalidBounds              L > U, non-finite clipping bounds
    |   +-- InvalidData                empty input, non-numeric values
    |   +-- UnsupportedRequest         a combination dpsense refuses (names what to do)
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


class InternalError(DPSenseError, RuntimeError):
    """A broken internal invariant. This is a bug in dpsense; please report it."""

    def __init__(self, what: str) -> None:
        super().__init__(f"internal invariant broken: {what}. This is a bug in dpsense; please report it.")
