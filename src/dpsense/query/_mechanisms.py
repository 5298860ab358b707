"""The mechanisms a plan can name: one typed enum, one table of public facts about each.

A ``Mechanism`` is a ``str`` enum whose value is the name the analyst writes and the plan serialises
(``"laplace"``, ``"em_quantile"``, ...), so plans, cache keys and stored releases keep their bytes.
Its ``info`` holds what the planner and the executor need to know without string tests: the family,
whether it spends δ, the theorem it rests on, how a unit's record changes are counted (``RecordCost``)
and the noise of a smooth-sensitivity release. The planner is L3 and never imports a mechanism's
code; ``release/`` maps each member to the ``dpsense.mechanisms`` function that runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from dpsense.core.errors import UsageError


class Family(str, Enum):
    """How a mechanism calibrates its noise (docs/math/index.md names a page per family)."""

    #: Additive noise scaled to a global sensitivity the planner computes (Laplace, Gaussian, geometric).
    GLOBAL = "global"
    #: Noise scaled to a global sensitivity of a log2 histogram, thresholded (approximate bounds).
    BOUNDS = "bounds"
    #: The exponential mechanism over the rank utility (quantiles).
    EXPONENTIAL = "exponential"
    #: Inverse sensitivity (Asi-Duchi): the exponential mechanism over the distance to the output.
    INVERSE_SENSITIVITY = "inverse_sensitivity"
    #: Smooth sensitivity with admissible (Cauchy) noise.
    SMOOTH = "smooth"
    #: Propose-Test-Release: a distance-to-instability test, then a release or a refusal.
    PTR = "ptr"
    #: Private partition selection of a grouping's keys.
    SELECTION = "selection"
    #: A name for several steps' mechanisms: the statistic's ``part_choice`` picks each step's (never a step's own).
    COMBINED = "combined"


class RecordCost(str, Enum):
    """How a data-dependent mechanism counts the record changes one call's ε covers (public facts)."""

    #: EM / inverse-sensitivity order statistics on the private n: a record added, removed or
    #: replaced is one change (the rank utility moves by at most 1), the call covers one change.
    ORDER = "order"
    #: Mechanisms whose call covers one change where a record replaced in place is two: those on
    #: values resized to a public n^ (inverse-sensitivity trimmed mean, Propose-Test-Release: an added
    #: or removed record is one resized replacement) and the edge-level triangle counts (an edge
    #: replaced is one edge removed and one added).
    ONE_CHANGE = "one_change"
    #: Smooth sensitivity on values resized to n^: one call covers one replacement under add/remove
    #: and two under replace (``max_records_per_unit=2``), so that a unit replaced in place costs C calls.
    SMOOTH = "smooth"


_INVERSE = "inverse sensitivity mechanism, Asi-Duchi 2020"
_SMOOTH = "smooth sensitivity with Cauchy noise, Nissim-Raskhodnikova-Smith 2007"
#: The theorem text is part of every serialised plan and cache key: it keeps the citation it was first
#: written with ("docs/math.md section 5", now docs/math/ptr.md) so that stored plans stay byte-identical.
_PTR = "Propose-Test-Release with a distance-to-instability test, Dwork-Lei 2009 (docs/math.md section 5)"


@dataclass(frozen=True)
class MechanismInfo:
    """Public facts about one mechanism."""

    family: Family
    theorem: str
    uses_delta: bool = False
    record_cost: RecordCost | None = None  # None: a global-sensitivity mechanism (no per-record cost)


class Mechanism(str, Enum):
    """Every mechanism a plan step can run; the value is its serialised name."""

    LAPLACE = "laplace"
    GAUSSIAN = "gaussian"
    GEOMETRIC = "geometric"
    APPROX_BOUNDS = "approx_bounds"
    ADAPTIVE_CLIP = "adaptive_clip"
    EM_QUANTILE = "em_quantile"
    RECURSIVE_QUANTILES = "recursive_quantiles"
    INVERSE_SENSITIVITY_MEDIAN = "inverse_sensitivity_median"
    INVERSE_SENSITIVITY_ORDER_STATISTIC = "inverse_sensitivity_order_statistic"
    INVERSE_SENSITIVITY_TRIMMED_MEAN = "inverse_sensitivity_trimmed_mean"
    INVERSE_SENSITIVITY_MIN_DISTANCE = "inverse_sensitivity_min_distance"
    INVERSE_SENSITIVITY_TRIANGLE_COUNT = "inverse_sensitivity_triangle_count"
    SMOOTH_MEDIAN = "smooth_median"
    SMOOTH_QUANTILE = "smooth_quantile"
    SMOOTH_TRIMMED_MEAN = "smooth_trimmed_mean"
    SMOOTH_MIN_DISTANCE = "smooth_min_distance"
    SMOOTH_TRIANGLE_COUNT = "smooth_triangle_count"
    PTR_ORDER_STATISTIC = "ptr_order_statistic"
    PTR_TRIMMED_MEAN = "ptr_trimmed_mean"
    PTR_MIN_DISTANCE = "ptr_min_distance"
    PTR_TRIANGLE_COUNT = "ptr_triangle_count"
    PARTITION_SELECTION = "partition_selection"

    def __str__(self) -> str:
        return self.value

    @property
    def info(self) -> MechanismInfo:
        """The mechanism's public facts (``MECHANISMS``)."""
        return MECHANISMS[self]

    @property
    def family(self) -> Family:
        return self.info.family

    @property
    def theorem(self) -> str:
        return self.info.theorem

    @property
    def uses_delta(self) -> bool:
        """True for the (ε, δ) mechanisms (Gaussian, Propose-Test-Release, partition selection)."""
        return self.info.uses_delta

    @property
    def is_global(self) -> bool:
        """True when the noise is calibrated to a global sensitivity the planner states."""
        return self.info.family in (Family.GLOBAL, Family.BOUNDS)

    @property
    def noise(self) -> str | None:
        """The noise family of a smooth-sensitivity release (Cauchy: pure ε-DP), else ``None``."""
        return "cauchy" if self.info.family is Family.SMOOTH else None

    @property
    def record_cost(self) -> RecordCost:
        """How a data-dependent mechanism counts record changes (``RecordCost``)."""
        cost = self.info.record_cost
        if cost is None:
            raise UsageError(
                f"{self.value} is calibrated to a global sensitivity and has no per-record cost",
                self.value,
                "ask a data-dependent mechanism for its record cost",
            )
        return cost


_ONE, _ORDER, _SMOOTHC = RecordCost.ONE_CHANGE, RecordCost.ORDER, RecordCost.SMOOTH

#: The one table of public facts, keyed by mechanism.
MECHANISMS: dict[Mechanism, MechanismInfo] = {
    Mechanism.LAPLACE: MechanismInfo(Family.GLOBAL, "Laplace mechanism, Dwork-Roth Thm 3.6"),
    Mechanism.GAUSSIAN: MechanismInfo(Family.GLOBAL, "analytic Gaussian mechanism, Balle-Wang 2018 Thm 8", True),
    Mechanism.GEOMETRIC: MechanismInfo(Family.GLOBAL, "geometric mechanism, Ghosh-Roughgarden-Sundararajan 2009"),
    Mechanism.APPROX_BOUNDS: MechanismInfo(
        Family.BOUNDS,
        "noisy log2-binned histogram (geometric mechanism, Ghosh-Roughgarden-Sundararajan 2009) "
        "thresholded by post-processing, as Google's ApproxBounds",
    ),
    Mechanism.ADAPTIVE_CLIP: MechanismInfo(
        Family.COMBINED,
        "approximate bounds, then Laplace on the values clipped to them (adaptive basic composition, Dwork-Roth "
        "Thm 3.16)",
    ),
    Mechanism.EM_QUANTILE: MechanismInfo(
        Family.EXPONENTIAL, "exponential-mechanism quantile, Smith 2011 and Dwork-Roth Thm 3.10", record_cost=_ORDER
    ),
    Mechanism.RECURSIVE_QUANTILES: MechanismInfo(
        Family.EXPONENTIAL,
        "recursive splitting, Kaplan-Schnapp-Stemmer 2022, with the exponential-mechanism quantile at each split "
        "(Smith 2011; parallel composition within a level, Dwork-Roth Thm 3.16 over levels)",
        record_cost=_ORDER,
    ),
    Mechanism.INVERSE_SENSITIVITY_MEDIAN: MechanismInfo(Family.INVERSE_SENSITIVITY, _INVERSE, record_cost=_ORDER),
    Mechanism.INVERSE_SENSITIVITY_ORDER_STATISTIC: MechanismInfo(
        Family.INVERSE_SENSITIVITY, _INVERSE, record_cost=_ORDER
    ),
    Mechanism.INVERSE_SENSITIVITY_TRIMMED_MEAN: MechanismInfo(Family.INVERSE_SENSITIVITY, _INVERSE, record_cost=_ONE),
    Mechanism.INVERSE_SENSITIVITY_MIN_DISTANCE: MechanismInfo(Family.INVERSE_SENSITIVITY, _INVERSE, record_cost=_ORDER),
    Mechanism.INVERSE_SENSITIVITY_TRIANGLE_COUNT: MechanismInfo(Family.INVERSE_SENSITIVITY, _INVERSE, record_cost=_ONE),
    Mechanism.SMOOTH_MEDIAN: MechanismInfo(Family.SMOOTH, _SMOOTH, record_cost=_SMOOTHC),
    Mechanism.SMOOTH_QUANTILE: MechanismInfo(Family.SMOOTH, _SMOOTH, record_cost=_SMOOTHC),
    Mechanism.SMOOTH_TRIMMED_MEAN: MechanismInfo(Family.SMOOTH, _SMOOTH, record_cost=_SMOOTHC),
    Mechanism.SMOOTH_MIN_DISTANCE: MechanismInfo(Family.SMOOTH, _SMOOTH, record_cost=_SMOOTHC),
    Mechanism.SMOOTH_TRIANGLE_COUNT: MechanismInfo(Family.SMOOTH, _SMOOTH, record_cost=_ONE),
    Mechanism.PTR_ORDER_STATISTIC: MechanismInfo(Family.PTR, _PTR, True, _ONE),
    Mechanism.PTR_TRIMMED_MEAN: MechanismInfo(Family.PTR, _PTR, True, _ONE),
    Mechanism.PTR_MIN_DISTANCE: MechanismInfo(Family.PTR, _PTR, True, _ONE),
    Mechanism.PTR_TRIANGLE_COUNT: MechanismInfo(Family.PTR, _PTR, True, _ONE),
    Mechanism.PARTITION_SELECTION: MechanismInfo(
        Family.SELECTION,
        "thresholded discrete Laplace on distinct-unit counts, Korolova et al. 2009 and Wilson et al. 2020",
        True,
    ),
}


def mechanism_named(name: str) -> Mechanism | None:
    """The mechanism an analyst named, or ``None`` for an unknown name (the planner words the refusal)."""
    try:
        return Mechanism(name)
    except ValueError:
        return None
