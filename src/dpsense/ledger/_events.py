"""Release events for PLD-accounted budgets: stored as exact JSON, composed with the PLD accountant.

A charge may carry the description of its release as a ``LaplaceEvent(scale, sensitivity)`` or
``GaussianEvent(sigma, sensitivity)`` (``dpsense.accounting.pld``). A budget in mode ``pld`` has an
(ε, δ) cap; its spend is ``pld_epsilon(events in its scope, delta=cap δ).epsilon`` (pessimistic
PLD, rounded up), recomputed from the stored events inside the same locking transaction as every
debit, so the check "composed ε at the cap's δ <= cap ε" sees every concurrent charge. A charge
without an event cannot be counted by a PLD budget and is refused.
"""

from __future__ import annotations

import json
from fractions import Fraction

from dpsense.accounting.pld import GaussianEvent, LaplaceEvent, PldEvent, pld_epsilon
from dpsense.core.errors import InternalError, InvalidPrivacyParameter, UnsupportedRequest
from dpsense.ledger._backends import Row


def check_event(event: object) -> PldEvent | None:
    """Refuse anything that is not a PLD event (or None)."""
    if event is None or isinstance(event, (LaplaceEvent, GaussianEvent)):
        return event
    raise InvalidPrivacyParameter(
        "a release event must be a LaplaceEvent or a GaussianEvent",
        repr(event),
        "pass event=LaplaceEvent(scale, sensitivity) or event=GaussianEvent(sigma, sensitivity)",
    )


def event_to_json(event: PldEvent) -> dict[str, object]:
    """JSON form of an event (floats round-trip exactly through repr)."""
    if isinstance(event, LaplaceEvent):
        return {"kind": "laplace", "scale": event.scale, "sensitivity": event.sensitivity}
    return {"kind": "gaussian", "sigma": event.sigma, "sensitivity": event.sensitivity}


def event_from_json(data: dict[str, float | str]) -> PldEvent:
    """Inverse of ``event_to_json``."""
    if data["kind"] == "laplace":
        return LaplaceEvent(float(data["scale"]), float(data["sensitivity"]))
    if data["kind"] == "gaussian":
        return GaussianEvent(float(data["sigma"]), float(data["sensitivity"]))
    raise InternalError(f"unknown stored event kind {data['kind']!r}")


def missing_event(scope: str, what: str) -> UnsupportedRequest:
    """The refusal for a charge a PLD budget cannot count."""
    return UnsupportedRequest(
        f"the {scope} budget is accounted with PLD and needs every charge's release event",
        what,
        "pass event=LaplaceEvent(scale, sensitivity) or GaussianEvent(sigma, sensitivity) to reserve(),"
        " or account this budget in basic (ε, δ)",
    )


def composed_epsilon(scope: str, rows: list[Row], delta: Fraction, extra: PldEvent | None = None) -> Fraction:
    """ε at ``delta`` of the events of ``rows`` (charge id, ..., event JSON last) plus ``extra``."""
    events: list[PldEvent] = []
    for row in rows:
        if row[-1] is None:
            raise missing_event(scope, f"charge {int(row[0])} has no event")
        events.append(event_from_json(json.loads(row[-1])))
    if extra is not None:
        events.append(extra)
    if not events:
        return Fraction(0)
    return pld_epsilon(events, delta=delta).epsilon
