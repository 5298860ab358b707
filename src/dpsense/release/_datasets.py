"""Registering and attaching datasets: the steward's data checks, keyed fingerprints, linked budgets.

``register`` (steward only) reads the data once: it checks the declared columns, runs the data checks
and applies the declared per-column policies, computes the keyed fingerprint of the raw snapshot, and
either links to the dataset that already holds that fingerprint (copies never multiply a budget,
docs/design.md invariant 8; only when every declaration is the registered one, ``RegistrationConflict``
otherwise) or registers a new dataset with its budget. ``attach`` loads a registered
snapshot into this process's engine and checks that its fingerprint still matches.

The fingerprint is an HMAC under the ledger's secret key (``Ledger.fingerprint_key``): it reveals
nothing about the content and is never shown to analysts.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import DPSenseError, InvalidData, InvalidPrivacyParameter, RegistrationConflict, UsageError
from dpsense.core.privacy_loss import ApproxDP, PureDP
from dpsense.engine import ClippedSum, StewardEngine
from dpsense.ledger import Ledger
from dpsense.noise.entropy import random_bytes
from dpsense.query import Query, Schema
from dpsense.query._values import PublicValue
from dpsense.release._policy import PrivacyPolicy
from dpsense.release._profile import Profile, build_profile, check_quality, checked_columns
from dpsense.release._progress import REGISTRATION_STAGES, Progress, no_progress
from dpsense.statistics._steps import bounded_sum


@dataclass(frozen=True)
class Dataset:
    """A registered dataset snapshot attached to a Session: its public profile and schema.

    ``linked`` is True when the data matched an already registered snapshot (by keyed fingerprint) and
    the registration linked to that dataset's budget instead of opening a new one.
    """

    name: str
    snapshot: str
    profile: Profile
    table: str
    linked: bool = False

    @cached_property
    def schema(self) -> Schema:
        """The public schema queries are checked against (built once per handle)."""
        return self.profile.schema()

    def query(self) -> Query:
        """A new query over this dataset."""
        return Query(self.name)


@dataclass(frozen=True)
class Declaration:
    """What the steward declares about a source (checked before any data is read, except the schema)."""

    privacy_unit: str
    adjacency: Adjacency
    bounds: Mapping[str, tuple[PublicValue, PublicValue]]
    keys: Mapping[str, Iterable[PublicValue]]
    kinds: Mapping[str, str]
    policies: Mapping[str, str]
    max_rows_per_unit: int | None
    max_groups_per_unit: Mapping[str, int]
    typical: Mapping[str, tuple[PublicValue, PublicValue]] = field(default_factory=dict)


def register(
    ledger: Ledger,
    engine: StewardEngine,
    name: str,
    *,
    source: object,
    snapshot: str,
    declaration: Declaration,
    budget: PureDP | ApproxDP,
    policy: PrivacyPolicy,
    progress: Progress = no_progress,
) -> Dataset:
    """Register ``source`` as snapshot ``snapshot`` of ``name`` (see the module docstring)."""
    if name in ledger.dataset_names():  # before the data is read
        check_kept_budget(ledger, name, policy)
    staging = f"{name}@{snapshot}"
    total = len(REGISTRATION_STAGES)
    progress(REGISTRATION_STAGES[0], 0, total)
    info = engine.register(staging, source)
    try:
        profile = build_profile(
            info,
            unit=declaration.privacy_unit,
            adjacency=declaration.adjacency,
            bounds=declaration.bounds,
            keys=declaration.keys,
            kinds=declaration.kinds,
            policies=declaration.policies,
            max_rows_per_unit=declaration.max_rows_per_unit,
            max_groups_per_unit=declaration.max_groups_per_unit,
            typical=declaration.typical,
        )
        profile = Profile(
            profile.unit,
            profile.adjacency,
            profile.columns,
            profile.max_rows_per_unit,
            profile.unit_policy,
            policy.to_json(),
            _source_path(source),
            _budget_json(budget),
            profile.max_groups_per_unit,
        )
        progress(REGISTRATION_STAGES[1], 1, total)
        check_quality(profile, engine.data_quality(staging, checked_columns(profile)))
        check_population(engine, staging, unit=declaration.privacy_unit, population=policy.population)
        progress(REGISTRATION_STAGES[2], 2, total)
        fingerprint = engine.fingerprint(staging, ledger.fingerprint_key())
        progress(REGISTRATION_STAGES[3], 3, total)
        linked_to = ledger.dataset_for_fingerprint(fingerprint)
        if linked_to is not None:
            existing, existing_snapshot = linked_to
            stored = ledger.profile(existing, existing_snapshot) if existing_snapshot else None
            if stored is not None:
                registered = Profile.from_json(stored.profile)
                check_same_declarations(existing, stored.snapshot, registered, profile)
                linked = Dataset(existing, stored.snapshot, registered, staging, linked=True)
                prepare(engine, staging, linked.profile)
                progress("linked to the registered snapshot", total, total)
                return linked
        known = name in ledger.dataset_names()
        if known and snapshot in ledger.snapshots(name):
            raise UsageError(
                "this dataset already has a snapshot of that name with other data",
                snapshot,
                "name the new snapshot, e.g. snapshot='2026-12'",
            )
        prepare(engine, staging, profile)  # before any ledger write: a refusal here writes nothing
        profile = with_public_units(engine, staging, profile)
        if not known:
            ledger.register_dataset(name, budget=budget, fingerprint=fingerprint)
        ledger.save_profile(name, snapshot=snapshot, fingerprint=fingerprint, profile=profile.to_json())
        progress("registered", total, total)
        return Dataset(name, snapshot, profile, staging)
    except BaseException:
        engine.forget(staging)
        raise


#: The declarations a link must repeat exactly, by their key in ``Profile.to_json`` (columns and policy apart).
_DECLARED = {
    "unit": "privacy_unit",
    "adjacency": "adjacency",
    "unit_policy": "the policy for rows without a unit",
    "max_rows_per_unit": "max_rows_per_unit",
    "max_groups_per_unit": "max_groups_per_unit",
    "budget": "budget",
}


def check_same_declarations(name: str, snapshot: str, registered: Profile, given: Profile) -> None:
    """Refuse to link data to a registration whose declarations differ (``RegistrationConflict``).

    Identical data (the same keyed fingerprint) links to its registration, which keeps its own
    declarations: a registration that declares anything else (adjacency, privacy unit, a column's
    kind, bounds, keys or policy, the contribution bounds, the privacy policy or the budget) would
    otherwise be answered under declarations other than the ones given. Only the source may differ
    (a copy of the file elsewhere is the same data). Called before anything is written.
    """
    before, after = registered.to_json(), given.to_json()
    differences = _differences(before, after, _DECLARED)
    policy_before, policy_after = before["policy"] or {}, after["policy"] or {}
    keys = sorted(policy_before.keys() | policy_after.keys())
    differences += _differences(policy_before, policy_after, {key: f"privacy policy {key}" for key in keys})
    columns_before, columns_after = before["columns"], after["columns"]
    for column in sorted(columns_before.keys() | columns_after.keys()):
        labels = {key: f"{key} of column {column!r}" for key in ("kind", "bounds", "keys", "policy", "typical")}
        differences += _differences(columns_before.get(column) or {}, columns_after.get(column) or {}, labels)
    if differences:
        raise RegistrationConflict(name, snapshot, differences)


def _differences(before: Mapping[str, object], after: Mapping[str, object], labels: Mapping[str, str]) -> list[str]:
    """``"<label>: registered <old>, given <new>"`` for each key of ``labels`` whose values differ."""
    return [
        f"{label}: registered {before.get(key)!r}, given {after.get(key)!r}"
        for key, label in labels.items()
        if before.get(key) != after.get(key)
    ]


def check_kept_budget(ledger: Ledger, name: str, policy: PrivacyPolicy) -> None:
    """Refuse a new snapshot's policy that the dataset's budget breaks (the snapshot keeps that budget).

    A new snapshot of a registered dataset spends the budget the ledger already holds, not the one
    passed to ``register_dataset``: the policy rules (δ rule, per-release ε cap) must hold for it.
    """
    try:
        policy.check_budget(ledger.budget(name).cap)
    except InvalidPrivacyParameter as exc:
        raise InvalidPrivacyParameter(
            f"a new snapshot keeps the dataset's budget, which breaks its policy: {exc.rule}",
            exc.value,
            f"{exc.fix}; or change the dataset's budget first with set_budget",
        ) from None


def check_population(engine: StewardEngine, table: str, *, unit: str, population: int) -> None:
    """Refuse a snapshot holding more distinct units than the policy's declared population.

    The population is the public bound every release relies on (δ below 1/population, the collect
    bound population x C), so registration guarantees it and no release can find it wrong after
    reading. Counted before the drop policies, which only remove rows: the released views hold at
    most this many units. The count itself is never shown (the error names only the declared bound).
    """
    if engine.unit_count(table, unit_column=unit) > population:
        raise InvalidData(
            "the data holds more distinct privacy units than the policy's declared population",
            {"privacy_unit": unit, "population": population},
            "raise population in the PrivacyPolicy to a true upper bound on the units, or check the data "
            "(a wrong privacy_unit column, or rows from outside the population)",
        )


def attach(ledger: Ledger, engine: StewardEngine, name: str, *, source: object | None, snapshot: str | None) -> Dataset:
    """Load a registered snapshot into ``engine``; refuse data whose fingerprint differs."""
    stored = ledger.profile(name, snapshot)
    profile = Profile.from_json(stored.profile)
    dataset = Dataset(name, stored.snapshot, profile, f"{name}@{stored.snapshot}")
    chosen = source if source is not None else profile.source
    if chosen is None:
        raise UsageError(
            "the dataset was registered from memory (a DataFrame or Arrow table), so its data must be passed again",
            name,
            "pass source= (the same DataFrame or file) when attaching",
        )
    engine.register(dataset.table, chosen)
    if engine.fingerprint(dataset.table, ledger.fingerprint_key()) != stored.fingerprint:
        engine.forget(dataset.table)
        raise UsageError(
            "the source is not the registered snapshot (its keyed fingerprint differs)",
            stored.snapshot,
            "register the changed data as a new snapshot: register_dataset(..., snapshot='<new name>')",
        )
    prepare(engine, dataset.table, profile)
    return dataset


def prepare(engine: StewardEngine, table: str, profile: Profile) -> None:
    """Apply the data policies, then index the snapshot on its privacy unit (a secret order per process).

    The clipped sum of every column with declared bounds (the sum, mean and variance steps use it
    unless a query overrides the bounds) is offered to the index, so an engine may store its exact
    grid units once instead of clipping and rounding every row in every release.
    """
    apply_policies(engine, table, profile)
    engine.index_units(table, unit_column=profile.unit, key=random_bytes(32), sums=declared_sums(profile))


def with_public_units(engine: StewardEngine, table: str, profile: Profile) -> Profile:
    """Under replace adjacency, the profile with the snapshot's number of units (after the data policies).

    Replace adjacency changes one unit's data for another's: every neighbour holds as many units, so
    the number is not protected by the guarantee and is recorded as a public fact (docs/concepts.md,
    "The number of units under replace"). Under add/remove it stays private and is never recorded.
    """
    if profile.adjacency is not Adjacency.REPLACE:
        return profile
    return dataclasses.replace(profile, units=engine.unit_count(table, unit_column=profile.unit))


def declared_sums(profile: Profile) -> list[ClippedSum]:
    """The clipped sum the executor asks for on each numeric column with declared bounds."""
    sums = []
    for name, column in sorted(profile.columns.items()):
        if column.bounds is None or not column.kind.is_numeric:
            continue
        try:
            sums.append(bounded_sum(name, *column.bounds))
        except DPSenseError:  # bounds no grid can hold: the release refuses them itself
            continue
    return sums


def apply_policies(engine: StewardEngine, table: str, profile: Profile) -> None:
    """Apply the declared drop and clamp policies to the engine's snapshot of the data."""
    drop_missing = [profile.unit] if profile.unit_policy == "drop" else []
    drop = [n for n, c in sorted(profile.columns.items()) if c.policy == "drop"]
    clamp = {
        n: (float(c.bounds[0]), float(c.bounds[1]))
        for n, c in sorted(profile.columns.items())
        if c.policy == "clamp" and c.bounds is not None
    }
    if drop_missing or drop or clamp:
        engine.apply_policies(table, drop_missing=[*drop_missing, *drop], drop_nonfinite=drop, clamp=clamp)


def _source_path(source: object) -> str | None:
    """What to remember of a source so that a later session can attach it without ``source=``.

    A local file or directory as its absolute path; any other text (an engine's table name, a URI
    such as ``s3a://...``) as written, for the engine to resolve again; an in-memory frame: nothing.
    Attaching always checks the keyed fingerprint, so a changed source is refused, never used.
    """
    if isinstance(source, str | os.PathLike):
        text = os.fspath(source)
        if not isinstance(text, str):
            return None
        path = Path(text)
        return str(path.resolve()) if path.exists() else text
    return None


def _budget_json(budget: PureDP | ApproxDP) -> dict[str, str]:
    delta = budget.delta if isinstance(budget, ApproxDP) else 0
    return {"epsilon": str(budget.epsilon), "delta": str(delta)}
