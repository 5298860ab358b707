"""``Session``: the one path from a question to a charged, stored, auditable release.

``release`` runs, in this order (docs/design.md, layer L4):

1. build the query against the dataset's public schema and plan it from public facts only;
   check the executor can run it and the per-release ε cap — all before the ledger is touched, so
   bad input leaves the ledger unchanged (docs/design.md invariant 6);
2. ``ledger.reserve`` the plan's exact loss under a cache key (keyed snapshot fingerprint + canonical
   plan + mechanism version): a stored answer to the same request is returned at no cost, with its
   stored noise (invariant 5); an identical request still pending elsewhere is waited for (single
   flight, ``dpsense.ledger._ledger``) and its release returned the same way;
3. run the plan on the engine with a fresh secret salt inside a release scope (temporary tables are
   removed on exit, even on error);
4. check that the realised loss of every step composes to exactly the charge (``InternalError``
   otherwise, charged: data was read);
5. ``ledger.commit`` the noisy values with the record (plan, explain report, policy, versions).

A failure after the data was read is charged and reported without a reason (``ChargedFailure``).
Releases refuse to run while the test-only deterministic noise source is active, unless the session
was opened with ``allow_test_noise=True`` (tests only; such records are marked ``test_noise``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpsense._version import __version__
from dpsense.core.adjacency import Adjacency
from dpsense.core.checks import integer_in
from dpsense.core.errors import (
    ChargedFailure,
    DPSenseError,
    InternalError,
    LedgerStateError,
    UnknownDataset,
    UnsupportedRequest,
    UsageError,
)
from dpsense.core.numbers import NumberLike
from dpsense.core.privacy_loss import ApproxDP
from dpsense.engine import Engine
from dpsense.ledger import (
    Anchor,
    AuditReport,
    BudgetStatus,
    CollectionInfo,
    IngestOutcome,
    Ledger,
    ReleaseRecord,
    Reservation,
    Scope,
    StoredRelease,
)
from dpsense.noise.entropy import is_test_source_active, random_bytes
from dpsense.query import Plan, Query, QueryIR, assert_loss_equals, by_meaning, plan
from dpsense.query._schema import Schema
from dpsense.query._values import PublicValue
from dpsense.release._admission import admit
from dpsense.release._datasets import Amendment, Dataset, Declaration, amend, attach, load_stored, register
from dpsense.release._executor import check_executable, collect_bound, execute
from dpsense.release._forecast import ExpectedError, Forecast, epsilon_for, forecast, goal_check
from dpsense.release._policy import Budget, PrivacyPolicy, check_budget_policy, check_release_policy
from dpsense.release._profile import Profile, public_units
from dpsense.release._progress import Progress, no_progress, release_stages
from dpsense.release._release import Release, release_value
from dpsense.release._shared import SharedSnapshots
from dpsense.release._sql import SqlRelease
from dpsense.release._store import SnapshotStore
from dpsense.statistics import STATISTICS

if TYPE_CHECKING:
    from dpsense.query.sql import SqlQuery
from dpsense.statistics._steps import loss_pair

#: Bumped when any mechanism's output distribution changes, so stored releases are never reused wrongly.
MECHANISM_VERSION = "dpsense-release/7"
_SALT_BYTES = 32
_ROLES = ("analyst", "steward")


class Session:
    """An analyst's (or the steward's) connection to one ledger and one engine.

    Example::

        session = Session.open("sqlite:///dpsense.db", analyst="alice", role="steward")
        events = session.register_dataset("events", source="events.parquet", privacy_unit="person_id",
                                          bounds={"hours": (0, 24)}, budget=Budget(4), policy=policy)
        release = session.release(events.query().agg(n=count()), epsilon=0.5)

    A server passes ``engine=snapshots.engine()`` and ``snapshots=`` (a ``SharedSnapshots``): the
    Session then reads each dataset's current snapshot from one copy shared by the whole process and
    only reads (it registers nothing).
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        analyst: str,
        role: str = "analyst",
        engine: Engine | None = None,
        allow_test_noise: bool = False,
        owns_ledger: bool = False,
        constant_work: int | None = None,
        snapshots: SharedSnapshots | None = None,
        store: SnapshotStore | str | os.PathLike[str] | None = None,
    ) -> None:
        if role not in _ROLES:
            raise UsageError("a session's role is 'analyst' or 'steward'", role, "pass role='analyst'")
        if not isinstance(analyst, str) or not analyst:
            raise UsageError("a session needs the analyst's name", analyst, "pass analyst='alice'")
        self._ledger = ledger
        self._owns_ledger = owns_ledger
        if snapshots is not None and engine is None:
            raise UsageError(
                "a Session on shared snapshots reads them through an engine of theirs",
                None,
                "pass engine=snapshots.engine() with snapshots=",
            )
        self._engine = engine if engine is not None else _default_engine()
        self._owns_engine = engine is None
        self._snapshots = snapshots
        self.analyst = analyst
        self.role = role
        self._allow_test_noise = allow_test_noise
        self._constant_work = _check_constant_work(constant_work)
        self._store = SnapshotStore(Path(store)) if isinstance(store, str | os.PathLike) else store
        self._datasets: dict[str, Dataset] = {}
        self._fingerprints: dict[tuple[str, str], str] = {}
        self._declared: dict[tuple[str, str], str] = {}  # (dataset, snapshot) -> digest of its declarations
        self._reserved_budgets: tuple[BudgetStatus, ...] = ()
        if role == "steward":
            ledger.add_analyst(analyst)

    @classmethod
    def open(
        cls,
        url: str,
        *,
        analyst: str,
        role: str = "analyst",
        engine: Engine | None = None,
        allow_test_noise: bool = False,
        constant_work: int | None = None,
        store: str | os.PathLike[str] | bool = True,
    ) -> Session:
        """Open the ledger at ``url`` (``sqlite:///path.db`` or ``postgresql://...``) for ``analyst``.

        ``store`` is where registered snapshots are kept checked, so that attaching one does not read
        its source again (``dpsense.release._store``): by default ``<ledger file>.store`` beside a
        SQLite ledger and none for PostgreSQL; a directory path names one (shared by the steward's and
        the analysts' processes); ``False`` keeps none.

        ``constant_work=K`` makes every smooth-sensitivity step evaluate exactly K terms of its
        sensitivity family plus the tail (public work), so a release's running time does not depend on
        where the early-stopping rule would have stopped (a timing side channel; the service sets it).
        """
        _check_constant_work(constant_work)  # before the ledger is opened
        return cls(
            Ledger.open(url),
            analyst=analyst,
            role=role,
            engine=engine,
            allow_test_noise=allow_test_noise,
            owns_ledger=True,
            constant_work=constant_work,
            store=_store_for(url, store),
        )

    def close(self) -> None:
        """Close the engine (removing every copy and temporary table) and the ledger if this session opened them."""
        if self._owns_engine:
            self._engine.close()
        if self._owns_ledger:
            self._ledger.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def constant_work(self) -> int | None:
        """The public work bound of every smooth-sensitivity step (``None``: stop early on the data)."""
        return self._constant_work

    @property
    def ledger(self) -> Ledger:
        """The ledger this session charges."""
        return self._ledger

    @property
    def reserved_budgets(self) -> tuple[BudgetStatus, ...]:
        """The budgets as this session's last ``release`` left them, from its reserve transaction.

        Every scope that transaction locked (``Reservation.budgets``), after the release's own debit;
        empty when the last release was refused before its charge. A server answers with these figures
        instead of reading the budgets again (``dpsense.service``).
        """
        return self._reserved_budgets

    # -- steward ---------------------------------------------------------------------------------

    def add_analyst(self, name: str) -> None:
        """Allow ``name`` to release from this ledger (steward only)."""
        self._require_steward("add analysts")
        self._ledger.add_analyst(name)

    def set_budget(self, dataset: str, scope: Scope, budget: Budget) -> None:
        """Create or change a sub-budget (per analyst, family, period) or the total (steward only)."""
        self._require_steward("set budgets")
        check_budget_policy(self._ledger, dataset, scope, budget)  # the policy's δ and ε rules, before any write
        self._ledger.set_budget(dataset, scope, budget.as_loss())

    def register_dataset(
        self,
        name: str,
        *,
        source: object,
        privacy_unit: str,
        budget: Budget,
        policy: PrivacyPolicy,
        adjacency: Adjacency | str = "add_remove",
        bounds: Mapping[str, tuple[PublicValue, PublicValue]] | None = None,
        keys: Mapping[str, Iterable[PublicValue]] | None = None,
        kinds: Mapping[str, str] | None = None,
        policies: Mapping[str, str] | None = None,
        max_rows_per_unit: int | None = None,
        max_groups_per_unit: Mapping[str, int] | None = None,
        typical: Mapping[str, tuple[PublicValue, PublicValue]] | None = None,
        hierarchies: Mapping[str, Mapping[str, Any]] | None = None,
        steps: Mapping[str, PublicValue] | None = None,
        snapshot: str = "v1",
        progress: Progress = no_progress,
    ) -> Dataset:
        """Register ``source`` (CSV/Parquet path, pandas/Polars/Arrow table, DuckDB table) with its budget.

        Steward only. Everything but the data checks is judged before the data is read: the privacy
        unit and declared columns must exist, bounds must be ordered, δ must be well below
        1/population, the per-release ε cap within the budget. Then the data checks run with the
        declared per-column policies (``refuse`` / ``drop`` / ``clamp``). ``max_groups_per_unit``
        declares per group column how many of its values one unit may touch (e.g. ``{"region": 1}``: a
        person lives in one region); queries grouped by it use that bound unless they state their own.
        ``hierarchies`` declares public hierarchies of group columns for census tables, e.g.
        ``{"geo": {"levels": ["region", "district"], "keys": [("north", "n1"), ("south", "s1")]}}``: the
        levels from the top down and the leaf key set (each child under one parent; docs/census.md).
        ``typical`` declares per bounded numeric column the range most values lie in (e.g.
        ``{"latency_ms": (0, 2000)}`` under bounds (0, 10**6)): a public hint, not a bound; a mean or sum
        over bounds at least ``ADAPTIVE_WIDTH_RATIO`` times wider than its power-of-two cover defaults to
        ``mechanism="adaptive_clip"`` (docs/planner.md, "A declared typical range").
        ``steps`` declares per numeric or integer column the decimal step its values are recorded at
        (e.g. ``{"alcohol": "0.01"}``, ``{"income": 1000}``): its medians and quantiles choose among the
        multiples of the step (docs/planner.md, "A declared recording step"); a fact, not a bound.
        Data that matches a registered
        snapshot (keyed fingerprint) links to that dataset's budget; ``Dataset.linked`` says so.
        """
        self._require_steward("register datasets")
        if self._snapshots is not None:
            raise UsageError(
                "a Session on shared snapshots only reads registered snapshots",
                name,
                "register from a Session with an engine of its own",
            )
        adj = Adjacency.parse(adjacency)
        loss = budget.as_loss()
        if not isinstance(policy, PrivacyPolicy):
            raise UsageError(
                "registration records the privacy policy", type(policy).__name__, "pass policy=PrivacyPolicy(...)"
            )
        policy.check(loss)
        if max_rows_per_unit is not None and not integer_in(max_rows_per_unit, 1):
            raise UsageError("max_rows_per_unit must be an integer >= 1", max_rows_per_unit, "pass e.g. 30")
        declaration = Declaration(
            privacy_unit,
            adj,
            bounds or {},
            keys or {},
            kinds or {},
            policies or {},
            max_rows_per_unit,
            max_groups_per_unit or {},
            typical or {},
            hierarchies or {},
            steps or {},
        )
        if name in self._datasets:
            raise UsageError("this session already holds a dataset of that name", name, "use session.dataset(name)")
        dataset = register(
            self._ledger, self._engine, name, source=source, snapshot=snapshot, declaration=declaration,
            budget=loss, policy=policy, progress=progress, store=self._store,
        )  # fmt: skip
        self._datasets[dataset.name] = dataset
        return dataset

    def amend_dataset(
        self,
        name: str,
        *,
        bounds: Mapping[str, tuple[PublicValue, PublicValue] | None] | None = None,
        keys: Mapping[str, Iterable[PublicValue] | None] | None = None,
        kinds: Mapping[str, str] | None = None,
        policies: Mapping[str, str] | None = None,
        typical: Mapping[str, tuple[PublicValue, PublicValue] | None] | None = None,
        max_rows_per_unit: int | None = None,
        max_groups_per_unit: Mapping[str, int | None] | None = None,
        policy: PrivacyPolicy | None = None,
        steps: Mapping[str, PublicValue | None] | None = None,
        source: object | None = None,
        snapshot: str | None = None,
        progress: Progress = no_progress,
    ) -> Dataset:
        """Correct the declarations of a registered dataset: a new version of its newest snapshot.

        Steward only. Name only what changes: per column, ``bounds``, ``keys``, ``kinds``,
        ``policies``, ``typical``, ``steps`` and ``max_groups_per_unit`` replace that column's declaration
        (``None`` removes it); ``max_rows_per_unit`` and ``policy`` replace the registered ones. The
        privacy unit, adjacency and budget cannot be amended (``set_budget`` changes a budget). The
        registered data is read again (from ``source``, else the registered path) and must be the
        same (keyed fingerprint); the checks run under the new declarations, nothing is written
        when they refuse. The new version (``snapshot``, by default ``<snapshot>.2``, ``.3``, ...)
        spends the same budget; earlier releases keep the declarations they were made under.
        ``Dataset.amended`` lists what changed. See ``dpsense.release._datasets.amend``.
        """
        self._require_steward("amend datasets")
        if self._snapshots is not None:
            raise UsageError(
                "a Session on shared snapshots only reads registered snapshots",
                name,
                "amend from a Session with an engine of its own",
            )
        if policy is not None:
            if not isinstance(policy, PrivacyPolicy):
                raise UsageError(
                    "an amended privacy policy is a PrivacyPolicy",
                    type(policy).__name__,
                    "pass policy=PrivacyPolicy(...)",
                )
            policy.check_record()  # and against the dataset's budget in amend (check_kept_budget)
        if max_rows_per_unit is not None and not integer_in(max_rows_per_unit, 1):
            raise UsageError("max_rows_per_unit must be an integer >= 1", max_rows_per_unit, "pass e.g. 30")
        amendment = Amendment(
            bounds=bounds or {},
            keys=keys or {},
            kinds=kinds or {},
            policies=policies or {},
            typical=typical or {},
            steps=steps or {},
            max_rows_per_unit=max_rows_per_unit,
            max_groups_per_unit=max_groups_per_unit or {},
            policy=policy,
        )
        dataset = amend(
            self._ledger, self._engine, name, amendment, source=source, snapshot=snapshot, progress=progress,
            store=self._store,
        )  # fmt: skip
        previous = self._datasets.pop(name, None)
        if previous is not None:
            self._engine.forget(previous.table)
        self._datasets[name] = dataset
        return dataset

    # -- analysts --------------------------------------------------------------------------------

    def dataset(self, name: str, *, source: object | None = None, snapshot: str | None = None) -> Dataset:
        """A registered dataset, attached to this session (its data loaded and checked against the fingerprint).

        On shared snapshots (``snapshots=``) every call reads the dataset's current snapshot from the
        ledger and answers that one (loaded once per process); naming another is ``SnapshotNotCurrent``.
        """
        if self._snapshots is not None:
            if source is not None:
                raise UsageError(
                    "a Session on shared snapshots reads the source the steward registered",
                    name,
                    "leave source out",
                )
            return self._snapshots.dataset(self._ledger, self._engine, name, snapshot=snapshot)
        if name not in self._datasets:
            self._datasets[name] = attach(
                self._ledger, self._engine, name, source=source, snapshot=snapshot, store=self._store
            )
        return self._datasets[name]

    def verify_snapshot(self, name: str, *, snapshot: str | None = None) -> bool:
        """Re-read the stored file of a registered snapshot in full: True when it is the checked one.

        Attaching trusts the stored file while its identity (inode, size, times) is the recorded one;
        this re-computes its keyed checksum and checks its schema (``dpsense.release._store``), reading
        every byte. False when there is no store, no stored file, or it fails a check: the next attach
        then reads the source again. Reveals nothing about the data.
        """
        if self._store is None:
            return False
        stored = self._ledger.profile(name, snapshot)
        dataset = Dataset(name, stored.snapshot, Profile.from_json(stored.profile), f"{name}@{stored.snapshot}#verify")
        if not load_stored(self._ledger, self._engine, self._store, dataset, stored.fingerprint, full_check=True):
            return False
        self._engine.forget(dataset.table)
        return True

    def datasets(self) -> list[str]:
        """Every dataset registered in the ledger."""
        return self._ledger.dataset_names()

    def preview(self, query: Query, *, epsilon: NumberLike, delta: NumberLike = 0, public_n: int | None = None) -> Plan:
        """The plan a release would run (mechanisms, sensitivities, cost), without charging or reading data."""
        return self._planned(query, epsilon=epsilon, delta=delta, public_n=public_n)[2]

    def forecast(self, query: Query, *, epsilon: NumberLike, delta: NumberLike = 0) -> Forecast:
        """Each statistic's expected error at (``epsilon``, ``delta``), before spending (reads no data).

        The bounds a release would state in its ``_error95`` columns, from public facts
        (``dpsense.release._forecast``): a number for counts, sums and histograms, a formula in the
        group's size for a private-n mean, and a note where the mechanism calibrates to the data. The
        privacy policy's ``minimum_useful_accuracy`` ("counts within ±50") is checked against it.
        """
        dataset, ir, the_plan, _, names = self._planned(query, epsilon=epsilon, delta=delta, public_n=None)
        expected = tuple(forecast(ir, the_plan, names))
        requested = the_plan.requested
        eps = requested.epsilon
        dlt = requested.delta if isinstance(requested, ApproxDP) else Fraction(0)
        goal = (dataset.profile.policy or {}).get("minimum_useful_accuracy")
        return Forecast(eps, dlt, expected, tuple(goal_check(goal, expected, eps)))

    def epsilon_for(self, query: Query, *, error: float | Mapping[str, float], delta: NumberLike = 0) -> Fraction:
        """The least ε (3 significant digits, rounded up) at which each named statistic's error is at most its target.

        ``error`` is one target for every statistic of the query, or ``{name: target}``; targets are
        the 95 % bounds ``forecast`` gives, in the statistics' units. Searched up to the policy's
        per-release ε cap; refused (``UsageError``) when even that misses, or for a statistic whose
        error has no number before the data (a mean's depends on its group's size: target its sum and
        count). Reads no data, charges nothing.
        """
        dataset = self._attached(query)
        targets = dict(error) if isinstance(error, Mapping) else dict.fromkeys(query.output_names(), error)
        policy = dataset.profile.policy or {}
        largest = Fraction(policy["per_release_epsilon"]) if "per_release_epsilon" in policy else Fraction(100)

        self.forecast(query, epsilon=largest, delta=delta)  # refusals that no ε changes speak for themselves

        def at(epsilon: Fraction) -> tuple[ExpectedError, ...] | None:
            try:
                return self.forecast(query, epsilon=epsilon, delta=delta).expected
            except DPSenseError:  # a plan refused at this ε (a noise scale too large to sample): not met
                return None

        return epsilon_for(targets, at, largest=largest)

    def _planned(
        self, query: Query, *, epsilon: NumberLike, delta: NumberLike, public_n: int | None
    ) -> tuple[Dataset, QueryIR, Plan, int | None, tuple[tuple[str, str], ...]]:
        """The dataset, the query named by meaning, its plan, the public bound on collected rows and the names.

        Refusals come before any charge and in the analyst's names (the query is planned and checked as
        asked first); what runs, is cached and is stored is the query named by meaning
        (``query._meaning``), so the analyst's output names never change the question. The names are
        (analyst's name, label) pairs in the order asked.
        """
        dataset = self._attached(query)
        asked = _with_declared_rules(query, dataset).build(dataset.schema)
        if public_n is not None:
            raise UnsupportedRequest(
                "a release does not take its public n from the request",
                public_n,
                "drop public_n: under replace adjacency an ungrouped, unfiltered mean with one row per unit uses "
                "the number of units recorded at registration by itself; any other mean is a noisy sum over a "
                "noisy count",
            )
        self._checked_plan(dataset, asked, epsilon=epsilon, delta=delta)
        ir, labels = by_meaning(asked, dataset.schema)
        result, collect_rows = self._checked_plan(dataset, ir, epsilon=epsilon, delta=delta)
        # group columns first, in the order asked (the IR sorts them), then the outputs under their names
        grouping = query.grouping_columns() if len(ir.group_by) > 1 else ()
        names = (*((c, c) for c in grouping), *((name, labels[name]) for name in query.output_names()))
        return dataset, ir, result, collect_rows, names

    def _checked_plan(
        self, dataset: Dataset, ir: QueryIR, *, epsilon: NumberLike, delta: NumberLike
    ) -> tuple[Plan, int | None]:
        """The plan of ``ir`` and its collect bound, after every check on public facts (nothing charged)."""
        result = plan(
            ir,
            epsilon=epsilon,
            delta=delta,
            adjacency=dataset.profile.adjacency,
            public_n=public_units(dataset.profile, ir),
            max_rows_per_unit=dataset.profile.max_rows_per_unit,
            rules=STATISTICS,
        )
        check_executable(ir, result)
        admit(
            ir,
            result,
            table=self._engine.table_info(dataset.table),
            population=_population(dataset),
            engine_key=_engine_value,
        )
        check_release_policy(dataset.profile.policy, result.requested)
        return result, self._collect_rows(dataset, result)  # refuses a bound above the engine's limit

    def release(
        self,
        query: Query,
        *,
        epsilon: NumberLike,
        delta: NumberLike = 0,
        public_n: int | None = None,
        request_id: str | None = None,
        family: str | None = None,
        progress: Progress = no_progress,
    ) -> Release:
        """Release ``query`` at exactly (``epsilon``, ``delta``); see the module docstring for the steps.

        ``progress(stage, done, total)`` hears each stage start (charge, each aggregate, commit): public
        names only, for a front end's progress bar (``dpsense.release._progress``).

        Raises:
            UsageError (and subclasses): bad input, judged before the ledger is touched.
            BudgetExhausted: a budget scope cannot cover the request (nothing charged).
            ChargedFailure: the release failed after reading data (charged, no reason given).

        """
        self._reserved_budgets = ()
        if is_test_source_active() and not self._allow_test_noise:
            raise UsageError(
                "releases refuse to run on the test-only deterministic noise source",
                "deterministic_entropy active",
                "leave the deterministic_entropy() block, or open a test session with allow_test_noise=True",
            )
        dataset, ir, the_plan, collect_rows, names = self._planned(
            query, epsilon=epsilon, delta=delta, public_n=public_n
        )
        requested = the_plan.requested
        shown = {label: name for name, label in reversed(names)}  # a statistic's stage shows its first asked name
        stages = release_stages([shown.get(a.name, a.name) for a in ir.aggregates])
        progress(stages[0], 0, len(stages))
        reservation = self._ledger.reserve(
            dataset=dataset.name,
            analyst=self.analyst,
            request_id=request_id or random_bytes(16).hex(),
            loss=requested,
            family=family,
            cache_key=self._cache_key(dataset, the_plan),
        )
        self._reserved_budgets = reservation.budgets
        if reservation.stored is not None:
            progress("the stored release (no new charge)", len(stages), len(stages))
            return Release(reservation.stored, cached=True, charged=None, names=names)
        data_accessed = False
        try:
            assert_loss_equals(the_plan, reservation.loss)
            with self._engine.release_scope():
                data_accessed = True
                executed = execute(
                    self._engine,
                    dataset.table,
                    ir=ir,
                    plan=the_plan,
                    unit_column=dataset.profile.unit,
                    salt=random_bytes(_SALT_BYTES),
                    engine_key=_engine_value,
                    constant_work=self._constant_work,
                    max_collect_rows=collect_rows,
                    on_stage=lambda i: progress(stages[1 + i], 1 + i, len(stages)),
                )
            progress(stages[-1], len(stages) - 1, len(stages))
            if loss_pair(executed.total_loss) != loss_pair(reservation.loss):
                raise InternalError(f"the steps ran at {executed.total_loss}, not the charged {reservation.loss}")
            record = ReleaseRecord(
                value=release_value(executed),
                mechanism=",".join(sorted({s.mechanism for s in the_plan.steps})),
                mechanism_version=MECHANISM_VERSION,
                parameters=self._parameters(dataset, the_plan, ir.canonical()),
                privacy_unit=dataset.profile.unit,
                adjacency=dataset.profile.adjacency.value,
                code_version=__version__,
            )
            outcome = self._ledger.commit_outcome(reservation, record)
        except DPSenseError as exc:
            self._fail(reservation, data_accessed=data_accessed)
            if data_accessed:
                raise ChargedFailure(reservation.request_id) from None
            raise exc
        except BaseException:
            self._fail(reservation, data_accessed=data_accessed)
            if data_accessed:
                raise ChargedFailure(reservation.request_id) from None
            raise
        progress("released", len(stages), len(stages))
        if not outcome.charged:  # another completion of this charge stored its value first: answer that one
            return Release(outcome.stored, cached=True, charged=None, names=names)
        return Release(outcome.stored, cached=False, charged=requested, names=names)

    def sql(
        self,
        text: str,
        *,
        epsilon: NumberLike,
        delta: NumberLike = 0,
        request_id: str | None = None,
        family: str | None = None,
        progress: Progress = no_progress,
    ) -> SqlRelease:
        """Release a SQL question (the DP subset; see ``dpsense.query.sql``) through ``release``.

        Rewrites of one question share one canonical query: the second asks for the stored release
        at no cost. Refused SQL raises before anything is charged.
        """
        parsed = _parse_sql(text, schema_for=self._sql_schema)
        release = self.release(
            parsed.query, epsilon=epsilon, delta=delta, request_id=request_id, family=family, progress=progress
        )
        return SqlRelease(release, parsed.outputs)

    def preview_sql(self, text: str, *, epsilon: NumberLike, delta: NumberLike = 0) -> Plan:
        """The plan of a SQL question, without charging or reading data."""
        parsed = _parse_sql(text, schema_for=self._sql_schema)
        return self.preview(parsed.query, epsilon=epsilon, delta=delta)

    def forecast_sql(self, text: str, *, epsilon: NumberLike, delta: NumberLike = 0) -> Forecast:
        """``forecast`` of a SQL question (its aggregates by their canonical names), reading no data."""
        parsed = _parse_sql(text, schema_for=self._sql_schema)
        return self.forecast(parsed.query, epsilon=epsilon, delta=delta)

    # ------------------------------------------------------------------ local-DP collections

    def register_collection(
        self,
        name: str,
        *,
        scheme: Mapping[str, Any],
        dictionary: Sequence[str] | None = None,
        max_reports_per_client: int,
    ) -> CollectionInfo:
        """Register a local-DP collection (steward): ``dpsense.release._collections.register_collection``."""
        self._require_steward("register a collection")
        from dpsense.release import _collections  # loads the decoders (scipy) only when collections are used

        return _collections.register_collection(
            self._ledger, name, scheme=scheme, dictionary=dictionary, max_reports_per_client=max_reports_per_client
        )

    def collections(self) -> list[str]:
        """Every local-DP collection registered in the ledger."""
        return self._ledger.collection_names()

    def collection(self, name: str) -> CollectionInfo:
        """A collection's public declaration and tallies."""
        return self._ledger.collection(name)

    def ingest_reports(
        self, name: str, reports: Sequence[Mapping[str, Any]], *, batch_id: str, submitter: str | None = None
    ) -> IngestOutcome:
        """Store a batch of device reports: ``dpsense.release._collections.ingest_reports``."""
        from dpsense.release import _collections  # loads the decoders (scipy) only when collections are used

        return _collections.ingest_reports(
            self._ledger, name, submitter=submitter or self.analyst, batch_id=batch_id, reports=reports
        )

    def estimate_frequencies(
        self,
        name: str,
        *,
        candidates: Sequence[str] | None = None,
        top: int | None = None,
        request_id: str | None = None,
    ) -> Release:
        """Frequency estimates of a collection, stored as a release at no central cost.

        See ``dpsense.release._collections.estimate_frequencies``.
        """
        from dpsense.release import _collections  # loads the decoders (scipy) only when collections are used

        return _collections.estimate_frequencies(
            self._ledger,
            name,
            analyst=self.analyst,
            request_id=request_id or random_bytes(16).hex(),
            candidates=candidates,
            top=top,
        )

    def budget(self, dataset: str, scope: Scope | None = None) -> BudgetStatus:
        """Cap, spend and remainder of the dataset's total budget (or of a sub-budget ``scope``)."""
        return self._ledger.budget(dataset, scope)

    def history(self, dataset: str) -> list[StoredRelease]:
        """Stored releases of ``dataset``: the steward sees all, an analyst only their own."""
        releases = self._ledger.releases(dataset)
        if self.role == "steward":
            return releases
        return [r for r in releases if r.parameters.get("analyst") == self.analyst]

    def verify_log(self, *, expected_head: str | Anchor | None = None) -> AuditReport:
        """Verify the ledger: its audit chain, every table against it, and ``expected_head`` when given."""
        return self._ledger.verify(expected_head=expected_head)

    # -- helpers ---------------------------------------------------------------------------------

    def _fail(self, reservation: Reservation, *, data_accessed: bool) -> None:
        """End a reservation; after data access one that is already FAILED (superseded) stays so."""
        try:
            self._ledger.fail(reservation, data_accessed=data_accessed)
        except LedgerStateError:
            if not data_accessed:
                raise

    def _require_steward(self, what: str) -> None:
        if self.role != "steward":
            raise UsageError(f"only a steward may {what}", self.analyst, "open the session with role='steward'")

    def _attached(self, query: Query) -> Dataset:
        if not isinstance(query, Query):
            raise UsageError("release() takes a Query", type(query).__name__, "build one with dataset.query()")
        if query.dataset not in self._datasets:
            return self.dataset(query.dataset)
        return self._datasets[query.dataset]

    def _sql_schema(self, name: str, quoted: bool) -> tuple[str, Schema]:
        known = self._ledger.dataset_names()
        if name not in known and not quoted:
            matches = [k for k in known if k.lower() == name.lower()]
            name = matches[0] if len(matches) == 1 else name
        if name not in known:
            raise UnknownDataset(name)
        return name, self.dataset(name).schema

    def _collect_rows(self, dataset: Dataset, the_plan: Plan) -> int | None:
        """The public bound on collected rows, refused before any charge when the engine's limit is lower."""
        bound = collect_bound(the_plan, _population(dataset))
        limit = self._engine.collect_limit
        if bound is not None and limit is not None and bound > limit:
            raise UsageError(
                "the rows this release may collect to the driver (the policy's population times the "
                "contribution bound) exceed the engine's collect limit",
                {"worst_case_rows": bound, "collect_limit": limit},
                "raise the engine's collect_limit (spark_collect_limit in a spec), lower max_rows_per_unit "
                "for this statistic, or ask for an additive statistic",
            )
        return bound

    def _fingerprint(self, dataset: Dataset) -> str:
        """The keyed fingerprint of the dataset's snapshot (immutable once registered: read once)."""
        key = (dataset.name, dataset.snapshot)
        if key not in self._fingerprints:
            self._fingerprints[key] = self._ledger.profile(dataset.name, dataset.snapshot).fingerprint
        return self._fingerprints[key]

    def _declarations(self, dataset: Dataset) -> str:
        """The digest of the snapshot's declarations in the cache key (a registered profile is immutable: once)."""
        key = (dataset.name, dataset.snapshot)
        if key not in self._declared:
            declared = dataset.profile.to_json()
            declared.pop("source", None)  # where the data was read is not what it is
            self._declared[key] = hashlib.sha256(json.dumps(declared, sort_keys=True).encode("utf-8")).hexdigest()
        return self._declared[key]

    def _cache_key(self, dataset: Dataset, the_plan: Plan) -> str:
        doc = {
            "snapshot": self._fingerprint(dataset),
            "declarations": self._declarations(dataset),
            "plan": the_plan.canonical(),
            "mechanism_version": MECHANISM_VERSION,
            "test_noise": is_test_source_active(),
        }
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode("utf-8")).hexdigest()

    def _parameters(self, dataset: Dataset, the_plan: Plan, query_text: str) -> dict[str, Any]:
        profile = dataset.profile.to_json()
        profile.pop("source", None)
        return {
            "analyst": self.analyst,
            "dataset": dataset.name,
            "snapshot": dataset.snapshot,
            "query": json.loads(query_text),
            "plan": json.loads(the_plan.canonical()),
            "explain": the_plan.explain(),
            "profile": profile,
            "policy": dataset.profile.policy,
            "test_noise": is_test_source_active(),
        }


def _with_declared_rules(query: Query, dataset: Dataset) -> Query:
    """The query with the dataset's declared groups-per-unit bound when it states none of its own."""
    caps = dataset.profile.max_groups_per_unit
    columns = query.grouping_columns()
    if query.declared_max_groups_per_unit is not None or not columns or not all(c in caps for c in columns):
        return query
    bound = 1
    for column in columns:  # a unit touching k_c values of each column touches at most prod k_c groups
        bound *= caps[column]
    return query.max_groups_per_unit(bound)


def _population(dataset: Dataset) -> int | None:
    """The policy's public bound on the number of units (registration refuses a snapshot above it)."""
    population = (dataset.profile.policy or {}).get("population")
    return population if isinstance(population, int) and not isinstance(population, bool) else None


def _default_engine() -> Engine:
    from dpsense.engine import DuckDBEngine

    engine: Engine = DuckDBEngine()
    return engine


def _engine_value(value: Any) -> Any:
    """A public query value (exact fraction, string, bool) as the engine binds it."""
    if isinstance(value, Fraction):
        return int(value) if value.denominator == 1 else float(value)
    return value


def _check_constant_work(value: object) -> int | None:
    if value is None:
        return None
    if not integer_in(value, 1):
        raise UsageError(
            "constant_work is the number of sensitivity terms every smooth step evaluates",
            value,
            "pass a positive integer such as constant_work=4096, or None to stop early",
        )
    return value


def _parse_sql(text: str, *, schema_for: Callable[[str, bool], tuple[str, Schema]]) -> SqlQuery:
    """``dpsense.query.sql.parse_sql``, imported on first use: importing the Session needs no sqlglot."""
    from dpsense.query.sql import parse_sql

    return parse_sql(text, schema_for=schema_for)


def _store_for(url: str, store: str | os.PathLike[str] | bool) -> SnapshotStore | None:
    """The snapshot store ``Session.open`` uses: beside a SQLite ledger (True), none (False), or a directory."""
    if store is True:
        return SnapshotStore.beside(url)
    if store is False:
        return None
    if isinstance(store, str | os.PathLike):
        return SnapshotStore(Path(store))
    raise UsageError("store is a directory path, True (beside the ledger) or False (none)", store, "pass store=True")
