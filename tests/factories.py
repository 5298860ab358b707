"""Shared test factories: one spelling of the objects many test packages build.

``policy_fields`` is the one complete privacy-policy record of the tests (the eleven fields of
``dpsense.PrivacyPolicy``), as a dict for the front ends that read YAML or JSON; ``policy`` is the
same as a ``PrivacyPolicy``. Pass keyword arguments to change fields.
"""

from __future__ import annotations

from typing import Any

import dpsense as dp

_POLICY: dict[str, Any] = {
    "protected": "a person and all their events",
    "population": 1_000_000,
    "planned_releases": 10,
    "release_window": "2026-12-01/2027-11-30",
    "delta_rationale": "δ = 1e-8, well below 1/(10 x population)",
    "per_release_epsilon": 2,
    "attacker_knowledge": "all but one person's rows",
    "minimum_useful_accuracy": "counts within ±100",
    "approved_by": "test steward",
    "approved_on": "2026-11-29",
    "next_review": "2027-05-29",
}


def policy_fields(**changes: Any) -> dict[str, Any]:
    """The tests' privacy-policy record as a dict (population 10^6, per-release ε cap 2), with ``changes``."""
    unknown = set(changes) - set(_POLICY)
    if unknown:
        raise TypeError(f"not a privacy-policy field: {sorted(unknown)}")
    return {**_POLICY, **changes}


def policy(**changes: Any) -> dp.PrivacyPolicy:
    """``policy_fields(**changes)`` as a ``PrivacyPolicy``."""
    return dp.PrivacyPolicy(**policy_fields(**changes))
