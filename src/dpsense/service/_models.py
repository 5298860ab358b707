"""Response models (for the published OpenAPI document) and the steward's request bodies."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, StrictFloat, StrictInt

from dpsense.interface.spec import Name, Number, Scalar, bounded
from dpsense.ledger import MAX_TOKEN_TTL_S
from dpsense.service._spec import Body

# -- responses ------------------------------------------------------------------------------------


class LossOut(BaseModel):
    """An exact privacy loss (``"n/d"`` strings) with float approximations for display."""

    kind: str
    epsilon: str | None = None
    delta: str | None = None
    rho: str | None = None
    approx: list[float]


class BudgetOut(BaseModel):
    """Cap, spend and remainder of one budget scope."""

    dataset: str
    scope: str
    mode: str
    cap: LossOut
    spent: LossOut
    remaining: LossOut


class BudgetsOut(BaseModel):
    """The dataset's total budget and, when the steward set one, the caller's own sub-budget."""

    total: BudgetOut
    analyst: BudgetOut | None = None


class ReleaseOut(BaseModel):
    """A release: noisy values (one row per group), the explain report, what it charged."""

    release_id: int
    dataset: str
    snapshot: str | None
    cached: bool
    charged: LossOut | None
    mechanism: str
    columns: list[str]
    rows: list[list[Any]]
    explain: str
    budget: BudgetsOut


class StoredReleaseOut(BaseModel):
    """A stored release in a listing (``analyst`` is shown to the steward only)."""

    release_id: int
    dataset: str
    snapshot: str | None
    mechanism: str
    columns: list[str]
    rows: list[list[Any]]
    query: Any
    question: str = Field(description="the query as one readable line: statistics, grouping, filters")
    created_at: float | None = Field(description="when it was committed, Unix seconds (the ledger's clock)")
    explain: str
    analyst: str | None = None


class ReleasesOut(BaseModel):
    """Stored releases, oldest first: an analyst's own, or every one for the steward."""

    releases: list[StoredReleaseOut]


class ExpectedErrorOut(BaseModel):
    """One statistic's expected error at the requested ε, from public facts (``Session.forecast``)."""

    name: str
    statistic: str
    bound: float | None = Field(description="|error| <= bound with probability `confidence`; null: no number yet")
    confidence: float
    how: str
    noise_dominated_below: int | None = Field(
        default=None, description="a private-n mean: the group size below which the bound exceeds the bounds' width"
    )


class PreviewOut(BaseModel):
    """The plan a release would run, what it would charge and each statistic's expected error (nothing charged)."""

    dataset: str
    would_charge: LossOut
    explain: str
    budget: BudgetsOut
    accuracy: list[ExpectedErrorOut]
    warnings: list[str] = Field(description="the privacy policy's accuracy goal, where the forecast misses it")


class DatasetOut(BaseModel):
    """The public schema of a dataset."""

    name: str
    snapshot: str
    privacy_unit: str | None
    adjacency: str | None
    columns: dict[str, Any]
    max_rows_per_unit: int | None
    max_groups_per_unit: dict[str, int]
    budget: dict[str, Any] | None
    policy: dict[str, Any] | None


class DatasetsOut(BaseModel):
    """Every registered dataset with its public schema."""

    datasets: list[DatasetOut]


class WhoAmIOut(BaseModel):
    """Who the token speaks for."""

    analyst: str
    role: str


class TokenOut(BaseModel):
    """A new API token: shown once, stored by the ledger only as a salted hash."""

    token: str
    token_id: str
    analyst: str
    role: str
    expires_at: float | None = None


class AuditOut(BaseModel):
    """The ledger's verification: the audit chain, the anchor, every table against the chain."""

    ok: bool
    entries: int
    head_hash: str
    first_broken_seq: int | None
    reason: str
    problems: list[str]
    tables_checked: bool


class CheckpointOut(BaseModel):
    """A verified audit head to keep outside the ledger (``dpsense verify-log --checkpoint``)."""

    format: str
    seq: int
    head: str
    at: str


class RegisteredOut(BaseModel):
    """A registered (or linked) dataset."""

    dataset: DatasetOut
    linked: bool


class OkOut(BaseModel):
    """A steward change that was applied."""

    ok: bool


# -- steward requests -----------------------------------------------------------------------------


class BudgetIn(Body):
    """A privacy budget (ε, δ); δ = 0 for pure ε-DP."""

    epsilon: Number
    delta: Number = 0


class PolicyIn(Body):
    """The steward's written privacy policy (every field of ``dpsense.PrivacyPolicy``)."""

    protected: Name
    population: StrictInt
    planned_releases: StrictInt
    release_window: Name
    delta_rationale: Name
    per_release_epsilon: Number
    attacker_knowledge: Name
    minimum_useful_accuracy: Name
    approved_by: Name
    approved_on: Name
    next_review: Name


class HierarchyIn(Body):
    """A public hierarchy: its levels from the top down and its leaf key set (one list of values per leaf)."""

    levels: list[Name] = Field(min_length=1, max_length=16)
    keys: list[Annotated[list[Scalar], Field(min_length=1, max_length=16)]] = Field(min_length=1, max_length=100_000)


class RegisterIn(Body):
    """Register a dataset from a file in the service's data folder (CSV or Parquet)."""

    name: Name
    source: Name = Field(description="a path relative to the service's --data-dir")
    privacy_unit: Name
    adjacency: Literal["add_remove", "replace"] = "add_remove"
    budget: BudgetIn
    policy: PolicyIn
    bounds: dict[Name, tuple[Number, Number]] = Field(default_factory=dict)
    typical: dict[Name, tuple[Number, Number]] = Field(
        default_factory=dict,
        description="per bounded numeric column, where most values lie (a hint inside its bounds, not a bound)",
    )
    steps: dict[Name, Number] = Field(
        default_factory=dict,
        description='per numeric or integer column, the decimal step its values are recorded at (e.g. "0.01")',
    )
    keys: dict[Name, Annotated[list[Scalar], Field(max_length=10_000)]] = Field(default_factory=dict)
    kinds: dict[Name, Name] = Field(default_factory=dict)
    policies: dict[Name, Name] = Field(default_factory=dict)
    max_rows_per_unit: StrictInt | None = None
    max_groups_per_unit: dict[Name, StrictInt] = Field(default_factory=dict)
    hierarchies: dict[Name, HierarchyIn] = Field(
        default_factory=dict, description="public hierarchies of group columns for census tables (docs/census.md)"
    )
    snapshot: Name = "v1"


class AmendIn(Body):
    """Correct a registered dataset's declarations: a new version of its newest snapshot, same budget.

    Name only what changes. Per column, a value replaces that column's declaration and ``null``
    removes it (bounds, keys, typical range, recording step, group cap). The data is read again from the registered
    file and must be unchanged; privacy unit, adjacency and budget cannot be amended.
    """

    dataset: Name
    bounds: dict[Name, tuple[Number, Number] | None] = Field(default_factory=dict)
    typical: dict[Name, tuple[Number, Number] | None] = Field(default_factory=dict)
    steps: dict[Name, Number | None] = Field(default_factory=dict)
    keys: dict[Name, Annotated[list[Scalar], Field(max_length=10_000)] | None] = Field(default_factory=dict)
    kinds: dict[Name, Name] = Field(default_factory=dict)
    policies: dict[Name, Name] = Field(default_factory=dict)
    max_rows_per_unit: StrictInt | None = None
    max_groups_per_unit: dict[Name, StrictInt | None] = Field(default_factory=dict)
    policy: PolicyIn | None = None
    snapshot: Name | None = Field(default=None, description="the new version's name (default: <snapshot>.2, .3, ...)")


class AmendedOut(BaseModel):
    """The amended dataset's new version and what changed (as registered and as given)."""

    dataset: DatasetOut
    amended: list[str]


class AnalystIn(Body):
    """An analyst to allow."""

    name: Name


def _lifetime(value: float) -> float:
    """A token lifetime in seconds: finite, > 0 and at most ``MAX_TOKEN_TTL_S`` (10 years)."""
    if not 0 < value <= MAX_TOKEN_TTL_S:
        raise ValueError(f"a token's lifetime is > 0 and at most {MAX_TOKEN_TTL_S:.0f} seconds (10 years)")
    return float(value)


#: A token lifetime as written: an integer or decimal number of seconds within the size rule and ``_lifetime``.
Lifetime = Annotated[StrictInt | StrictFloat, AfterValidator(bounded), AfterValidator(_lifetime)]


class TokenIn(Body):
    """A token to create for an existing analyst."""

    analyst: Name
    role: Literal["analyst", "steward", "collector"] = "analyst"
    expires_in_s: Lifetime | None = Field(
        default=None, description=f"seconds until the token expires (> 0, at most {MAX_TOKEN_TTL_S:.0f}); none: never"
    )


class SetBudgetIn(Body):
    """Create or change a budget scope of a dataset: the total, or an analyst/family/period sub-budget."""

    dataset: Name
    scope: Literal["total", "analyst", "family", "period"]
    value: Name | None = Field(default=None, description="the analyst or family name")
    start: StrictInt | None = Field(default=None, description="period start, Unix seconds")
    end: StrictInt | None = Field(default=None, description="period end (exclusive), Unix seconds")
    epsilon: Number
    delta: Number = 0
