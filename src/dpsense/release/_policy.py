"""The privacy policy a steward records with a dataset, and the budget it sets.

The seed notes ask every deployment to write down who is protected, under which adjacency, how many
releases are planned over which window, why δ is what it is relative to the population, the per-
release ε cap, what the attacker is assumed to know, the minimum useful accuracy, who approved the
parameters and when they are reviewed next. ``PrivacyPolicy`` holds exactly that; every release
record carries it.

Rules enforced here, before any data is read:

* δ of the budget is "well below 1/population": ``δ <= 1 / (DELTA_POPULATION_FACTOR * population)``.
  A δ near 1/n admits mechanisms that publish one person's record outright with probability δ, which
  for n people is expected to happen to someone (Dwork-Roth section 2.3).
* the per-release ε cap is positive and at most the budget's ε.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

from dpsense.core.errors import InvalidPrivacyParameter, UsageError
from dpsense.core.numbers import NumberLike
from dpsense.core.privacy_loss import ApproxDP, PureDP, check_delta, check_epsilon

#: δ must be at most 1 / (10 · population): "well below 1/population".
DELTA_POPULATION_FACTOR = 10


@dataclass(frozen=True)
class Budget:
    """A dataset's total privacy budget: (ε, δ), with δ = 0 for pure ε-DP (basic composition)."""

    epsilon: NumberLike
    delta: NumberLike = 0

    def as_loss(self) -> PureDP | ApproxDP:
        """The budget as an exact privacy loss."""
        eps = check_epsilon(self.epsilon)
        delta = check_delta(self.delta)
        return ApproxDP(eps, delta) if delta > 0 else PureDP(eps)


@dataclass(frozen=True)
class PrivacyPolicy:
    """The steward's written privacy policy for one dataset (public; stored with every release).

    Attributes:
        protected: who is protected, in words (e.g. "a patient: all their events").
        population: a public upper bound on the number of privacy units in the population.
        planned_releases: how many releases are planned over ``release_window``.
        release_window: the period the budget covers (e.g. "2026-12-01/2027-11-30").
        delta_rationale: why δ is what it is relative to the population.
        per_release_epsilon: the largest ε one release may spend.
        attacker_knowledge: what the attacker is assumed to know.
        minimum_useful_accuracy: the accuracy below which a release is not worth its cost.
        approved_by: who approved the parameters.
        approved_on, next_review: ISO dates (YYYY-MM-DD).

    """

    protected: str
    population: int
    planned_releases: int
    release_window: str
    delta_rationale: str
    per_release_epsilon: NumberLike
    attacker_knowledge: str
    minimum_useful_accuracy: str
    approved_by: str
    approved_on: str
    next_review: str

    def to_json(self) -> dict[str, Any]:
        """The policy as plain JSON (ε cap as an exact ``"n/d"`` string)."""
        doc = asdict(self)
        cap = check_epsilon(self.per_release_epsilon)
        doc["per_release_epsilon"] = f"{cap.numerator}/{cap.denominator}"
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> PrivacyPolicy:
        """The inverse of ``to_json``."""
        values = dict(doc)
        values["per_release_epsilon"] = Fraction(values["per_release_epsilon"])
        return cls(**values)

    @property
    def epsilon_cap(self) -> Fraction:
        """The per-release ε cap, exact."""
        return check_epsilon(self.per_release_epsilon)

    def check(self, budget: PureDP | ApproxDP) -> None:
        """Refuse a policy that is incomplete or inconsistent with ``budget`` (no data is read)."""
        for name in ("protected", "release_window", "delta_rationale", "attacker_knowledge",
                     "minimum_useful_accuracy", "approved_by"):  # fmt: skip
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise UsageError(f"the privacy policy needs {name}", value, f"write it down: {name}='...'")
        for name in ("population", "planned_releases"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"the privacy policy's {name} must be an integer >= 1", value, f"pass {name}=1000")
        for name in ("approved_on", "next_review"):
            _iso_date(getattr(self, name), name)
        if _iso_date(self.next_review, "next_review") < _iso_date(self.approved_on, "approved_on"):
            raise UsageError("next_review must not be before approved_on", self.next_review, "pick a later date")
        cap = self.epsilon_cap
        if cap > budget.epsilon:
            raise InvalidPrivacyParameter(
                "the per-release ε cap exceeds the dataset's total ε",
                float(cap),
                f"lower per_release_epsilon to at most {float(budget.epsilon):g}",
            )
        delta = budget.delta if isinstance(budget, ApproxDP) else Fraction(0)
        limit = Fraction(1, DELTA_POPULATION_FACTOR * self.population)
        if delta > limit:
            raise InvalidPrivacyParameter(
                f"δ must be well below 1/population: at most 1/({DELTA_POPULATION_FACTOR} x population)",
                float(delta),
                f"use delta <= {float(limit):.3g} for a population of {self.population}",
            )


def _iso_date(value: object, what: str) -> dt.date:
    if not isinstance(value, str):
        raise UsageError(f"{what} must be an ISO date string", value, f"pass {what}='2027-06-30'")
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise UsageError(f"{what} must be an ISO date (YYYY-MM-DD)", value, f"pass {what}='2027-06-30'") from None
