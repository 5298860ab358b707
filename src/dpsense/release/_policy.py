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

They apply wherever a budget is created or changed, and to every release:

* registration: ``PrivacyPolicy.check`` (the record is complete, and both rules hold for the budget);
  a new snapshot of a registered dataset also checks its policy against the budget the ledger holds
  (``_datasets.register``);
* ``Session.set_budget``: ``check_budget_policy`` checks the new cap against the policy of every
  registered snapshot of the dataset: the δ rule for every scope (a sub-budget is a budget too), the
  per-release ε cap against the total (a sub-budget below the cap only limits its scope);
* ``Session.release``: ``check_release_policy`` refuses a request above the per-release ε cap or with
  a δ above the δ rule before the ledger is touched (no budget that obeys the rule could cover it).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Protocol

from dpsense.core.checks import integer_in
from dpsense.core.errors import InvalidPrivacyParameter, UsageError
from dpsense.core.numbers import NumberLike, ratio_text
from dpsense.core.privacy_loss import ApproxDP, PrivacyLoss, PureDP, check_delta, check_epsilon

if TYPE_CHECKING:
    from dpsense.ledger import DatasetProfile, Scope

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
        doc["per_release_epsilon"] = ratio_text(cap)
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

    @property
    def delta_limit(self) -> Fraction:
        """The largest δ the δ rule allows for this population: ``1 / (10 · population)``."""
        return Fraction(1, DELTA_POPULATION_FACTOR * self.population)

    def check(self, budget: PureDP | ApproxDP) -> None:
        """Refuse a policy that is incomplete or inconsistent with ``budget`` (no data is read)."""
        self.check_record()
        self.check_budget(budget)

    def check_record(self) -> None:
        """Refuse an incomplete record (every field written down, dates ordered)."""
        for name in ("protected", "release_window", "delta_rationale", "attacker_knowledge",
                     "minimum_useful_accuracy", "approved_by"):  # fmt: skip
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise UsageError(f"the privacy policy needs {name}", value, f"write it down: {name}='...'")
        for name in ("population", "planned_releases"):
            value = getattr(self, name)
            if not integer_in(value, 1):
                raise UsageError(f"the privacy policy's {name} must be an integer >= 1", value, f"pass {name}=1000")
        for name in ("approved_on", "next_review"):
            _iso_date(getattr(self, name), name)
        if _iso_date(self.next_review, "next_review") < _iso_date(self.approved_on, "approved_on"):
            raise UsageError("next_review must not be before approved_on", self.next_review, "pick a later date")

    def check_budget(self, budget: PrivacyLoss, *, scope: Scope | None = None, setting: bool = False) -> None:
        """Refuse a budget of ``scope`` (the total by default) breaking the δ rule or (the total) the ε cap.

        ``setting`` words the fix for ``set_budget`` (change the budget) rather than for registration
        (change the policy). A budget in another unit than (ε, δ) (zCDP ρ) is checked by the ledger only.
        """
        if not isinstance(budget, PureDP | ApproxDP):
            return
        cap = self.epsilon_cap
        if (scope is None or scope.kind == "total") and cap > budget.epsilon:
            fix = (
                f"set the total epsilon to at least {float(cap):g} (the policy's per_release_epsilon), or register "
                "a snapshot whose policy has a lower per_release_epsilon"
                if setting
                else f"lower per_release_epsilon to at most {float(budget.epsilon):g}"
            )
            raise InvalidPrivacyParameter(
                "the per-release ε cap exceeds the dataset's total ε (policy rule: per_release_epsilon <= total ε)",
                float(cap),
                fix,
            )
        delta = budget.delta if isinstance(budget, ApproxDP) else Fraction(0)
        limit = self.delta_limit
        if delta > limit:
            where = f" (the {scope or 'dataset total'} budget)" if setting else ""
            raise InvalidPrivacyParameter(
                f"δ must be well below 1/population: at most 1/({DELTA_POPULATION_FACTOR} x population){where}",
                float(delta),
                f"use delta <= {float(limit):.3g} for a population of {self.population}",
            )


class PolicySource(Protocol):
    """What ``check_budget_policy`` reads from the ledger (``dpsense.ledger.Ledger`` has both)."""

    def snapshots(self, dataset: str) -> list[str]: ...

    def profile(self, dataset: str, snapshot: str | None = None) -> DatasetProfile: ...


def recorded_policies(ledger: PolicySource, dataset: str) -> list[PrivacyPolicy]:
    """The privacy policy recorded with each registered snapshot of ``dataset`` (oldest first, distinct)."""
    policies: list[PrivacyPolicy] = []
    for snapshot in ledger.snapshots(dataset):
        doc = ledger.profile(dataset, snapshot).profile.get("policy")
        if isinstance(doc, dict):
            policy = PrivacyPolicy.from_json(doc)
            if policy not in policies:
                policies.append(policy)
    return policies


def check_budget_policy(ledger: PolicySource, dataset: str, scope: Scope, budget: Budget) -> None:
    """Refuse ``set_budget(dataset, scope, budget)`` when it breaks a recorded policy (nothing is written).

    Every snapshot's policy applies (a dataset keeps one budget across snapshots): the δ rule to every
    scope, the per-release ε cap to the total. Raises ``InvalidPrivacyParameter`` naming the rule and
    the fix; an unknown dataset raises ``UnknownDataset``.
    """
    loss = budget.as_loss()
    for policy in recorded_policies(ledger, dataset):
        policy.check_budget(loss, scope=scope, setting=True)


def check_release_policy(policy: dict[str, Any] | None, requested: PureDP | ApproxDP) -> None:
    """Refuse a release above the per-release ε cap or with δ above the δ rule (before the ledger).

    ``policy`` is the snapshot profile's policy record (``Profile.policy``); ``None`` checks nothing.
    """
    if not policy:
        return
    if "per_release_epsilon" in policy:
        cap = Fraction(policy["per_release_epsilon"])
        if requested.epsilon > cap:
            raise InvalidPrivacyParameter(
                "the release asks for more ε than the dataset's per-release cap (policy rule: per_release_epsilon)",
                float(requested.epsilon),
                f"ask for epsilon <= {float(cap):g}, or split the query into smaller releases",
            )
    population = policy.get("population")
    delta = requested.delta if isinstance(requested, ApproxDP) else Fraction(0)
    if isinstance(population, int) and not isinstance(population, bool) and population >= 1:
        limit = Fraction(1, DELTA_POPULATION_FACTOR * population)
        if delta > limit:
            raise InvalidPrivacyParameter(
                f"the release asks for a δ above the policy's δ rule: at most 1/({DELTA_POPULATION_FACTOR} x "
                "population), so no budget that obeys the rule can cover it",
                float(delta),
                f"ask for delta <= {float(limit):.3g} (population {population}), or delta=0 with a pure-DP mechanism",
            )


def _iso_date(value: object, what: str) -> dt.date:
    if not isinstance(value, str):
        raise UsageError(f"{what} must be an ISO date string", value, f"pass {what}='2027-06-30'")
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise UsageError(f"{what} must be an ISO date (YYYY-MM-DD)", value, f"pass {what}='2027-06-30'") from None
