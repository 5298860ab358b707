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

import contextlib
import dataclasses
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import DPSenseError, InvalidData, InvalidPrivacyParameter, RegistrationConflict, UsageError
from dpsense.core.privacy_loss import ApproxDP, PureDP
from dpsense.engine import ClippedSum, StewardEngine, TableInfo
from dpsense.ledger import Ledger
from dpsense.noise.entropy import random_bytes
from dpsense.query import Query, Schema
from dpsense.query._values import PublicValue
from dpsense.release._policy import PrivacyPolicy
from dpsense.release._profile import Profile, build_profile, check_quality, checked_columns
from dpsense.release._progress import REGISTRATION_STAGES, Progress, no_progress
from dpsense.release._store import SnapshotStore, declarations_digest
from dpsense.statistics._steps import bounded_sum


@dataclass(frozen=True)
class Dataset:
    """A registered dataset snapshot attached to a Session: its public profile and schema.

    ``linked`` is True when the data matched an already registered snapshot (by keyed fingerprint) and
    the registration linked to that dataset's budget instead of opening a new one. ``amended`` lists,
    for a version made by ``amend``, each declaration it changed (as registered and as given).
    """

    name: str
    snapshot: str
    profile: Profile
    table: str
    linked: bool = False
    amended: tuple[str, ...] = ()

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
    hierarchies: Mapping[str, object] = field(default_factory=dict)
    steps: Mapping[str, PublicValue] = field(default_factory=dict)


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
    store: SnapshotStore | None = None,
) -> Dataset:
    """Register ``source`` as snapshot ``snapshot`` of ``name`` (see the module docstring).

    With a ``store`` the prepared snapshot is also written there (``_store``) before the ledger
    records it, so later sessions attach it without reading the source again.
    """
    if name in ledger.dataset_names():  # before the data is read
        check_kept_budget(ledger, name, policy)
    staging = f"{name}@{snapshot}"
    total = len(REGISTRATION_STAGES)
    progress(REGISTRATION_STAGES[0], 0, total)
    info = engine.register(staging, source)
    try:
        profile, fingerprint = _checked(
            ledger, engine, staging, info, declaration, policy, _budget_json(budget), _source_path(source), progress
        )
        linked = _linked(ledger, engine, staging, fingerprint, profile)
        if linked is not None:
            progress("linked to the registered snapshot", total, total)
            return linked
        known = name in ledger.dataset_names()
        if known and snapshot in ledger.snapshots(name):
            raise UsageError(
                "this dataset already has a snapshot of that name with other data",
                snapshot,
                "name the new snapshot, e.g. snapshot='2026-12'",
            )
        profile = _prepared(ledger, engine, staging, info, profile, name, snapshot, fingerprint, store, progress)
        if not known:
            ledger.register_dataset(name, budget=budget, fingerprint=fingerprint)
        ledger.save_profile(name, snapshot=snapshot, fingerprint=fingerprint, profile=profile.to_json())
        progress("registered", total, total)
        return Dataset(name, snapshot, profile, staging)
    except BaseException:
        engine.forget(staging)
        raise


@dataclass(frozen=True)
class Amendment:
    """What a steward changes in a registered dataset's declarations (``Session.amend_dataset``).

    Per-column maps replace that column's declaration (``None`` removes it: a column's bounds, keys,
    typical range, recording step or group cap); columns not named keep theirs. ``max_rows_per_unit`` and ``policy``
    replace the registered ones when given. The privacy unit, the adjacency and the budget are not
    declarations an amendment may change: the budget already spent was accounted under them.
    """

    bounds: Mapping[str, tuple[PublicValue, PublicValue] | None] = field(default_factory=dict)
    keys: Mapping[str, Iterable[PublicValue] | None] = field(default_factory=dict)
    kinds: Mapping[str, str] = field(default_factory=dict)
    policies: Mapping[str, str] = field(default_factory=dict)
    typical: Mapping[str, tuple[PublicValue, PublicValue] | None] = field(default_factory=dict)
    steps: Mapping[str, PublicValue | None] = field(default_factory=dict)
    max_rows_per_unit: int | None = None
    max_groups_per_unit: Mapping[str, int | None] = field(default_factory=dict)
    policy: PrivacyPolicy | None = None

    def applied_to(self, profile: Profile) -> Declaration:
        """The declaration of ``profile`` with this amendment's changes."""

        def merged(current: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
            out = dict(current)
            for column, value in changes.items():
                if value is None:
                    out.pop(column, None)
                else:
                    out[column] = value
            return out

        columns = profile.columns
        policies = {n: c.policy for n, c in columns.items()}
        policies[profile.unit] = profile.unit_policy
        return Declaration(
            privacy_unit=profile.unit,
            adjacency=profile.adjacency,
            bounds=merged({n: c.bounds for n, c in columns.items() if c.bounds is not None}, self.bounds),
            keys=merged({n: c.keys for n, c in columns.items() if c.keys is not None}, self.keys),
            kinds=merged({n: c.kind.value for n, c in columns.items()}, self.kinds),
            policies=merged(policies, self.policies),
            max_rows_per_unit=profile.max_rows_per_unit if self.max_rows_per_unit is None else self.max_rows_per_unit,
            max_groups_per_unit=merged(profile.max_groups_per_unit, self.max_groups_per_unit),
            typical=merged({n: c.typical for n, c in columns.items() if c.typical is not None}, self.typical),
            hierarchies=profile.hierarchies,  # kept as registered (an amendment does not change them)
            steps=merged({n: c.step for n, c in columns.items() if c.step is not None}, self.steps),
        )


def amend(
    ledger: Ledger,
    engine: StewardEngine,
    name: str,
    amendment: Amendment,
    *,
    source: object | None = None,
    snapshot: str | None = None,
    progress: Progress = no_progress,
    store: SnapshotStore | None = None,
) -> Dataset:
    """Record amended declarations of ``name``'s newest snapshot as a new snapshot version of it.

    The data is the registered snapshot's (its source is read again and must have the registered
    keyed fingerprint: changed data is a new snapshot, ``register``); the checks and data policies
    run again under the amended declarations, so an amendment that the data breaks (narrower bounds
    under ``refuse``) is refused like a registration, before anything is written. The budget stays
    the dataset's: every version charges it. Earlier releases keep the profile they were made under
    (their records hold it); new releases use the new version, and a question asked again under it
    is a new question (the cache key holds the version's declarations). ``Dataset.amended`` lists
    what changed, as before and after.
    """
    current = ledger.profile(name)
    registered = Profile.from_json(current.profile)
    declaration = amendment.applied_to(registered)
    policy = amendment.policy if amendment.policy is not None else PrivacyPolicy.from_json(registered.policy or {})
    check_kept_budget(ledger, name, policy)
    chosen = _source_of(name, registered, source, "pass source= (the same data) to amend_dataset")
    versions = ledger.snapshots(name)
    new_snapshot = snapshot if snapshot is not None else next_version(current.snapshot, versions)
    if new_snapshot in versions:
        raise UsageError(
            "this dataset already has a snapshot of that name", new_snapshot, "name the amended version another way"
        )
    staging = f"{name}@{new_snapshot}"
    total = len(REGISTRATION_STAGES)
    progress(REGISTRATION_STAGES[0], 0, total)
    info = engine.register(staging, chosen)
    try:
        profile, fingerprint = _checked(
            ledger, engine, staging, info, declaration, policy, registered.budget, _source_path(chosen), progress
        )
        if fingerprint != current.fingerprint:
            raise UsageError(
                "the source is not the registered snapshot (its keyed fingerprint differs): an amendment changes "
                "declarations, not data",
                current.snapshot,
                "register the changed data as a new snapshot: register_dataset(..., snapshot='<new name>')",
            )
        changed = declaration_differences(registered, profile)
        if not changed:
            raise UsageError(
                "the amendment changes no declaration", name, "name the bounds, keys, caps or policy to change"
            )
        profile = _prepared(ledger, engine, staging, info, profile, name, new_snapshot, fingerprint, store, progress)
        ledger.save_profile(name, snapshot=new_snapshot, fingerprint=fingerprint, profile=profile.to_json())
        progress("amended", total, total)
        return Dataset(name, new_snapshot, profile, staging, amended=tuple(changed))
    except BaseException:
        engine.forget(staging)
        raise


def next_version(snapshot: str, taken: Iterable[str]) -> str:
    """``<snapshot>.2``, ``.3``, ... : the first amended-version name not taken (``v1`` -> ``v1.2``)."""
    base, _, last = snapshot.rpartition(".")
    stem = base if base and last.isdigit() else snapshot
    taken = set(taken)
    k = 2
    while f"{stem}.{k}" in taken:
        k += 1
    return f"{stem}.{k}"


def _checked(
    ledger: Ledger,
    engine: StewardEngine,
    staging: str,
    info: TableInfo,
    declaration: Declaration,
    policy: PrivacyPolicy,
    budget: dict[str, str],
    source: str | None,
    progress: Progress,
) -> tuple[Profile, str]:
    """The profile of the registered ``staging`` table under ``declaration``, checked, and its fingerprint."""
    total = len(REGISTRATION_STAGES)
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
        hierarchies=declaration.hierarchies,
        steps=declaration.steps,
    )
    profile = dataclasses.replace(profile, policy=policy.to_json(), source=source, budget=budget)
    progress(REGISTRATION_STAGES[1], 1, total)
    check_quality(profile, engine.data_quality(staging, checked_columns(profile)))
    check_population(engine, staging, unit=declaration.privacy_unit, population=policy.population)
    progress(REGISTRATION_STAGES[2], 2, total)
    fingerprint = engine.fingerprint(staging, ledger.fingerprint_key())
    progress(REGISTRATION_STAGES[3], 3, total)
    return profile, fingerprint


def _linked(ledger: Ledger, engine: StewardEngine, staging: str, fingerprint: str, profile: Profile) -> Dataset | None:
    """The registered snapshot this data links to (same fingerprint, same declarations), or None if new.

    Of a dataset's versions holding this data (a registration and its amendments), the newest whose
    declarations are the given ones links; when none has them, ``RegistrationConflict`` names what
    differs from the newest and how to amend.
    """
    linked_to = ledger.dataset_for_fingerprint(fingerprint)
    if linked_to is None or linked_to[1] is None:
        return None
    existing = linked_to[0]
    versions = []
    for version in reversed(ledger.snapshots(existing)):
        stored = ledger.profile(existing, version)
        if stored.fingerprint == fingerprint:
            versions.append((stored.snapshot, Profile.from_json(stored.profile)))
    for version, registered in versions:
        if not declaration_differences(registered, profile):
            prepare(engine, staging, registered)
            return Dataset(existing, version, registered, staging, linked=True)
    newest, registered = versions[0]
    raise RegistrationConflict(existing, newest, declaration_differences(registered, profile))


def _prepared(
    ledger: Ledger,
    engine: StewardEngine,
    staging: str,
    info: TableInfo,
    profile: Profile,
    name: str,
    snapshot: str,
    fingerprint: str,
    store: SnapshotStore | None,
    progress: Progress,
) -> Profile:
    """Apply the policies, index, record the public units and store the snapshot (before any ledger write)."""
    prepare(engine, staging, profile)  # a refusal here writes nothing
    profile = with_public_units(engine, staging, profile)
    if store is not None:
        total = len(REGISTRATION_STAGES)
        progress(REGISTRATION_STAGES[4], 4, total)
        try:
            store.save(
                engine,
                staging,
                info=info,
                dataset=name,
                snapshot=snapshot,
                fingerprint=fingerprint,
                key=ledger.fingerprint_key(),
                declarations=declarations_digest(profile.to_json()),
            )
        except OSError:
            raise UsageError(
                "the snapshot store beside the ledger could not be written",
                str(store.directory),
                "make the directory writable by the steward, or name another with store=",
            ) from None
    return profile


#: The declarations a link must repeat exactly, by their key in ``Profile.to_json`` (columns and policy apart).
_DECLARED = {
    "unit": "privacy_unit",
    "adjacency": "adjacency",
    "unit_policy": "the policy for rows without a unit",
    "max_rows_per_unit": "max_rows_per_unit",
    "max_groups_per_unit": "max_groups_per_unit",
    "budget": "budget",
}


def declaration_differences(registered: Profile, given: Profile) -> list[str]:
    """``"<declaration>: registered <old>, given <new>"`` for each declaration that differs.

    Every declaration counts (adjacency, privacy unit, a column's kind, bounds, keys, policy or
    typical range, the contribution bounds, the privacy policy, the budget); the source does not (a
    copy of the file elsewhere is the same data), nor the public number of units (a fact of the data).
    """
    before, after = registered.to_json(), given.to_json()
    differences = _differences(before, after, _DECLARED)
    shown = ({"hierarchies": _hierarchies(before)}, {"hierarchies": _hierarchies(after)})
    differences += _differences(*shown, {"hierarchies": "hierarchies"})
    policy_before, policy_after = before["policy"] or {}, after["policy"] or {}
    keys = sorted(policy_before.keys() | policy_after.keys())
    differences += _differences(policy_before, policy_after, {key: f"privacy policy {key}" for key in keys})
    columns_before, columns_after = before["columns"], after["columns"]
    for column in sorted(columns_before.keys() | columns_after.keys()):
        labels = {key: f"{key} of column {column!r}" for key in ("kind", "bounds", "keys", "policy", "typical", "step")}
        differences += _differences(columns_before.get(column) or {}, columns_after.get(column) or {}, labels)
    return differences


def _hierarchies(profile: Mapping[str, Any]) -> dict[str, str] | None:
    """A profile's hierarchies as a short text each (levels, leaves and a digest: the leaf key set may be long)."""
    declared = profile.get("hierarchies")
    if not declared:
        return None
    return {
        name: f"levels {h['levels']}, {len(h['keys'])} leaves, sha256 "
        + hashlib.sha256(json.dumps(h, sort_keys=True).encode("utf-8")).hexdigest()[:12]
        for name, h in sorted(declared.items())
    }


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


def attach(
    ledger: Ledger,
    engine: StewardEngine,
    name: str,
    *,
    source: object | None,
    snapshot: str | None,
    store: SnapshotStore | None = None,
) -> Dataset:
    """Load a registered snapshot into ``engine``; refuse data whose fingerprint differs.

    Without ``source``, a ``store`` holding the snapshot's checked file attaches it with no read of
    the data (``SnapshotStore.load``); otherwise the source is read, fingerprinted and prepared again,
    and stored for the next time.
    """
    stored = ledger.profile(name, snapshot)
    profile = Profile.from_json(stored.profile)
    dataset = Dataset(name, stored.snapshot, profile, f"{name}@{stored.snapshot}")
    if source is None and store is not None and load_stored(ledger, engine, store, dataset, stored.fingerprint):
        return dataset
    chosen = _source_of(name, profile, source, "pass source= (the same DataFrame or file) when attaching")
    info = engine.register(dataset.table, chosen)
    if engine.fingerprint(dataset.table, ledger.fingerprint_key()) != stored.fingerprint:
        engine.forget(dataset.table)
        raise UsageError(
            "the source is not the registered snapshot (its keyed fingerprint differs)",
            stored.snapshot,
            "register the changed data as a new snapshot: register_dataset(..., snapshot='<new name>')",
        )
    prepare(engine, dataset.table, profile)
    if store is not None and source is None:
        with contextlib.suppress(OSError):  # an unwritable store only costs the next attach a full read
            store.save(
                engine,
                dataset.table,
                info=info,
                dataset=name,
                snapshot=stored.snapshot,
                fingerprint=stored.fingerprint,
                key=ledger.fingerprint_key(),
                declarations=declarations_digest(profile.to_json()),
            )
    return dataset


def load_stored(
    ledger: Ledger,
    engine: StewardEngine,
    store: SnapshotStore,
    dataset: Dataset,
    fingerprint: str,
    *,
    full_check: bool = False,
) -> bool:
    """Attach ``dataset`` from ``store`` (True), or nothing when the store does not hold it checked."""
    return store.load(
        engine,
        dataset.table,
        dataset=dataset.name,
        snapshot=dataset.snapshot,
        fingerprint=fingerprint,
        key=ledger.fingerprint_key(),
        declarations=declarations_digest(dataset.profile.to_json()),
        unit_column=dataset.profile.unit,
        sums=declared_sums(dataset.profile),
        group_columns=sorted(dataset.profile.max_groups_per_unit),
        full_check=full_check,
    )


def prepare(engine: StewardEngine, table: str, profile: Profile) -> None:
    """Apply the data policies, then index the snapshot on its privacy unit under a fresh secret order.

    The order is this process's; once the snapshot is stored (``_store``) it stays the snapshot's for
    every later attach. Privacy does not depend on it: each release keeps, per unit, rows chosen from
    that unit's rows alone (``_index_query.first_rows_condition``), whatever the order.

    The clipped sum of every column with declared bounds (the sum, mean and variance steps use it
    unless a query overrides the bounds) is offered to the index, so an engine may store its exact
    grid units once instead of clipping and rounding every row in every release; so are the columns
    with a declared groups-per-unit bound, whose distinct values per unit an engine may count once, so
    that a release capping groups on them windows only the units above the cap.
    """
    apply_policies(engine, table, profile)
    engine.index_units(
        table,
        unit_column=profile.unit,
        key=random_bytes(32),
        sums=declared_sums(profile),
        group_columns=sorted(profile.max_groups_per_unit),
    )


def with_public_units(engine: StewardEngine, table: str, profile: Profile) -> Profile:
    """Under replace adjacency, the profile with the snapshot's number of units, when no policy drops rows.

    Replace adjacency changes one unit's data for another's: every neighbour holds as many units, so
    the number is not protected by the guarantee and is recorded as a public fact (docs/concepts.md,
    "The number of units under replace"). Under add/remove it stays private and is never recorded.
    A ``drop`` policy breaks that: a unit whose every row it drops is gone from the snapshot, and its
    replacement need not be, so the count after the policies differs between neighbours; then no
    count is recorded and no mean uses a public n. (Rows without a unit are no unit: dropping them
    changes no count.)
    """
    if profile.adjacency is not Adjacency.REPLACE or any(c.policy == "drop" for c in profile.columns.values()):
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


def _source_of(name: str, profile: Profile, source: object | None, fix: str) -> object:
    """``source`` if given, else the registered path; refused for a frame registered from memory."""
    chosen = source if source is not None else profile.source
    if chosen is None:
        raise UsageError(
            "the dataset was registered from memory (a DataFrame or Arrow table), so its data must be passed again",
            name,
            fix,
        )
    return chosen


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
