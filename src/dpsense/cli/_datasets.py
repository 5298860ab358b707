"""``dpsense dataset add|amend|verify|list|show``: the steward registers and corrects datasets.

Registered on the application in ``_app``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from dpsense.cli._common import (
    _POSTGRES,
    DEFAULT_LEDGER,
    AdjacencyChoice,
    AnalystOpt,
    CreateOpt,
    EngineOpt,
    JsonOpt,
    LedgerOpt,
    SparkCollectLimitOpt,
    SparkMasterOpt,
    StewardOpt,
    StoreOpt,
    _command,
    _require_steward,
    _session,
)
from dpsense.cli._engine import EngineName, EngineSettings, choose_engine
from dpsense.cli._errors import EXIT_TAMPERED, print_error
from dpsense.cli._options import (
    KINDS,
    POLICIES,
    number_option,
    parse_bounds,
    parse_choices,
    parse_choices_by_value,
    parse_counts,
    parse_hierarchies,
    parse_keys,
    parse_steps,
)
from dpsense.core.errors import UsageError

KindOpt = Annotated[list[str] | None, typer.Option("--kind", metavar="COL=KIND", help=" | ".join(KINDS))]
ColumnPolicyOpt = Annotated[list[str] | None, typer.Option("--policy", metavar="COL=POLICY", help=" | ".join(POLICIES))]
MaxRowsOpt = Annotated[int | None, typer.Option("--max-rows-per-unit", metavar="C")]
StepOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--step",
        metavar="COL=S",
        help="COL's values are recorded in steps of the decimal S (e.g. alcohol=0.01, income=1000): its "
        "medians and quantiles choose among the multiples of S.",
    ),
]


def dataset_add(
    name: Annotated[str, typer.Argument(help="The dataset's name.")],
    source: Annotated[
        str,
        typer.Option(
            "--source",
            help="CSV or Parquet file; with --engine spark also a Parquet directory, a URI (s3a://, hdfs://) "
            "or a catalog table name.",
        ),
    ],
    unit: Annotated[str, typer.Option("--unit", help="The privacy-unit column (whose data one guarantee covers).")],
    budget_epsilon: Annotated[str, typer.Option("--budget-epsilon", metavar="E", help="The total ε.")],
    privacy_policy: Annotated[
        Path, typer.Option("--privacy-policy", exists=True, dir_okay=False, help="The privacy policy (YAML).")
    ],
    budget_delta: Annotated[str, typer.Option("--budget-delta", metavar="D", help="The total δ.")] = "0",
    adjacency: Annotated[AdjacencyChoice, typer.Option("--adjacency")] = AdjacencyChoice.ADD_REMOVE,
    bound: Annotated[list[str] | None, typer.Option("--bound", metavar="COL=L:U", help="Public bounds.")] = None,
    typical: Annotated[
        list[str] | None,
        typer.Option(
            "--typical",
            metavar="COL=A:B",
            help="Where most values of COL lie, inside its --bound (a hint, not a bound): a mean or sum over "
            "bounds 8x wider than its power-of-two cover clips adaptively by default.",
        ),
    ] = None,
    keys: Annotated[list[str] | None, typer.Option("--keys", metavar="COL=a,b,c", help="Public keys.")] = None,
    step: StepOpt = None,
    kind: KindOpt = None,
    policy: ColumnPolicyOpt = None,
    max_rows_per_unit: MaxRowsOpt = None,
    max_groups: Annotated[
        list[str] | None,
        typer.Option("--max-groups", metavar="COL=K", help="At most K values of COL per unit (e.g. region=1)."),
    ] = None,
    hierarchy: Annotated[
        list[str] | None,
        typer.Option(
            "--hierarchy",
            metavar="NAME=LEVEL,LEVEL:LEAVES",
            help="A public hierarchy for census tables: its levels from the top down and a file of its leaves, "
            "one a line, values comma-separated in the levels' order (docs/census.md).",
        ),
    ] = None,
    snapshot: Annotated[str, typer.Option("--snapshot", help="The snapshot's name.")] = "v1",
    ledger: LedgerOpt = DEFAULT_LEDGER,
    create: CreateOpt = False,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    engine: EngineOpt = None,
    spark_master: SparkMasterOpt = None,
    spark_collect_limit: SparkCollectLimitOpt = None,
) -> None:
    """Register a dataset with its budget, public declarations and privacy policy (steward).

    A new SQLite ledger needs --create (the first registration starts it).

    The privacy policy file holds every field of dpsense.PrivacyPolicy:

    \b
        protected: "a person: every event they logged"
        population: 1000000          # a public upper bound on the privacy units
        planned_releases: 12
        release_window: 2026-12-01/2027-11-30
        delta_rationale: "pure ε-DP releases: δ = 0"
        per_release_epsilon: 1.0
        attacker_knowledge: "all but one person's events"
        minimum_useful_accuracy: "counts within ±50"
        approved_by: "the data steward"
        approved_on: 2026-11-29
        next_review: 2027-05-29
    """  # noqa: D301 (the \b line is click's no-rewrap marker: see the module docstring)
    from dpsense.cli import _output as out
    from dpsense.cli._progress import progress_bar
    from dpsense.cli._spec import load_policy
    from dpsense.release import Budget

    with _command() as io:
        _require_steward(steward, "register datasets")
        bounds = parse_bounds(bound or [])
        typical_ranges = parse_bounds(typical or [], flag="--typical")
        public_keys = parse_keys(keys or [])
        kinds = parse_choices("--kind", kind or [], KINDS, "location=point")
        policies = parse_choices("--policy", policy or [], POLICIES, "hours=clamp")
        group_caps = parse_counts("--max-groups", max_groups or [], "region=1")
        hierarchies = parse_hierarchies(hierarchy or [])
        total = (number_option("--budget-epsilon", budget_epsilon), number_option("--budget-delta", budget_delta))
        the_policy = load_policy(privacy_policy)
        choice = choose_engine(EngineSettings(engine, spark_master, spark_collect_limit))
        if choice.name is EngineName.DUCKDB and not Path(source).is_file():
            raise UsageError(
                "--source must be an existing CSV or Parquet file on the embedded engine",
                source,
                "check the path, or pass --engine spark for a directory, a URI or a table name",
            )
        with _session(ledger, analyst, steward, choice, store=store, create=create) as session:
            with progress_bar(io.err, f"registering {name!r}") as progress:
                dataset = session.register_dataset(
                    name,
                    source=source,
                    privacy_unit=unit,
                    budget=Budget(*total),
                    policy=the_policy,
                    adjacency=adjacency.value,
                    bounds=bounds,
                    keys=public_keys,
                    kinds=kinds,
                    policies=policies,
                    max_rows_per_unit=max_rows_per_unit,
                    max_groups_per_unit=group_caps,
                    typical=typical_ranges,
                    hierarchies=hierarchies or None,
                    steps=parse_steps(step or []),
                    snapshot=snapshot,
                    progress=progress,
                )
            status = session.budget(dataset.name)
        how = "same data as a registered snapshot: linked to its budget" if dataset.linked else "registered"
        io.out.print(f"dataset {dataset.name!r} snapshot {dataset.snapshot!r}: {how}", markup=False)
        io.out.print(out.profile_table(dataset.name, dataset.snapshot, dataset.profile))
        io.out.print(f"budget {out.loss_text(status.cap)}, spent {out.loss_text(status.spent)}", markup=False)


#: What ``dataset amend --remove`` can take away, by its flag's name.
_REMOVABLE = ("bound", "typical", "keys", "max-groups", "step")


def dataset_amend(
    name: Annotated[str, typer.Argument(help="The dataset's name.")],
    bound: Annotated[list[str] | None, typer.Option("--bound", metavar="COL=L:U", help="New public bounds.")] = None,
    typical: Annotated[
        list[str] | None, typer.Option("--typical", metavar="COL=A:B", help="A new typical range of COL.")
    ] = None,
    keys: Annotated[list[str] | None, typer.Option("--keys", metavar="COL=a,b,c", help="New public keys.")] = None,
    step: StepOpt = None,
    kind: KindOpt = None,
    policy: ColumnPolicyOpt = None,
    max_rows_per_unit: MaxRowsOpt = None,
    max_groups: Annotated[
        list[str] | None, typer.Option("--max-groups", metavar="COL=K", help="At most K values of COL per unit.")
    ] = None,
    remove: Annotated[
        list[str] | None,
        typer.Option(
            "--remove",
            metavar="WHAT=COL",
            help=f"Take a declaration away: WHAT is one of {', '.join(_REMOVABLE)} (e.g. typical=hours).",
        ),
    ] = None,
    privacy_policy: Annotated[
        Path | None,
        typer.Option("--privacy-policy", exists=True, dir_okay=False, help="A new privacy policy (YAML)."),
    ] = None,
    source: Annotated[
        str | None, typer.Option("--source", help="The registered data, if it moved [default: the registered path].")
    ] = None,
    snapshot: Annotated[
        str | None, typer.Option("--snapshot", help="The new version's name [default: <snapshot>.2, .3, ...].")
    ] = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
) -> None:
    """Correct a registered dataset's declarations: a new version of its newest snapshot (steward).

    Name only what changes; every other declaration is kept. The registered data is read again and
    must be unchanged (changed data is a new snapshot: dataset add --snapshot). The new version spends
    the same budget; earlier releases keep the declarations they were made under. The privacy unit,
    adjacency and budget cannot be amended. Example:

    \b
        dpsense dataset amend events --max-groups region=1 --bound hours=0:48 --steward
    """  # noqa: D301 (the \b line is click's no-rewrap marker: see the module docstring)
    from dpsense.cli import _output as out
    from dpsense.cli._progress import progress_bar
    from dpsense.cli._spec import load_policy

    with _command() as io:
        _require_steward(steward, "amend datasets")
        removed = parse_choices_by_value("--remove", remove or [], _REMOVABLE, "typical=hours")
        bounds: dict[str, Any] = {**parse_bounds(bound or []), **dict.fromkeys(removed["bound"])}
        typical_ranges: dict[str, Any] = {
            **parse_bounds(typical or [], flag="--typical"),
            **dict.fromkeys(removed["typical"]),
        }
        public_keys: dict[str, Any] = {**parse_keys(keys or []), **dict.fromkeys(removed["keys"])}
        group_caps: dict[str, Any] = {
            **parse_counts("--max-groups", max_groups or [], "region=1"),
            **dict.fromkeys(removed["max-groups"]),
        }
        the_policy = None if privacy_policy is None else load_policy(privacy_policy)
        with (
            _session(ledger, analyst, steward, store=store) as session,
            progress_bar(io.err, f"amending {name!r}") as progress,
        ):
            dataset = session.amend_dataset(
                name,
                bounds=bounds,
                keys=public_keys,
                kinds=parse_choices("--kind", kind or [], KINDS, "location=point"),
                policies=parse_choices("--policy", policy or [], POLICIES, "hours=clamp"),
                typical=typical_ranges,
                steps={**parse_steps(step or []), **dict.fromkeys(removed["step"])},
                max_rows_per_unit=max_rows_per_unit,
                max_groups_per_unit=group_caps,
                policy=the_policy,
                source=source,
                snapshot=snapshot,
                progress=progress,
            )
        io.out.print(f"dataset {dataset.name!r} snapshot {dataset.snapshot!r}: amended", markup=False)
        for change in dataset.amended:
            io.out.print(f"  {change}", markup=False, soft_wrap=True)
        io.out.print(out.profile_table(dataset.name, dataset.snapshot, dataset.profile))


def dataset_verify(
    name: Annotated[str, typer.Argument(help="The dataset's name.")],
    snapshot: Annotated[
        str | None, typer.Option("--snapshot", help="The registered snapshot [default: the latest].")
    ] = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
) -> None:
    """Re-read a dataset's stored snapshot file in full and check it against the ledger (steward).

    Attaching trusts a stored file while its identity (inode, size, times) is the recorded one; this
    re-computes its keyed checksum and checks its schema, reading every byte. Exit codes: 0 it is the
    registered snapshot; 1 it is missing or fails its check (nothing is lost: the next attach reads the
    source again and stores it anew); 2 bad input (an unknown dataset or snapshot); 5 no such ledger.
    """
    with _command() as io:
        _require_steward(steward, "verify stored snapshots")
        if store is None and ledger.startswith(_POSTGRES):
            raise UsageError(
                "a PostgreSQL ledger has no default snapshot store", ledger, "pass --store DIR (or DPSENSE_STORE)"
            )
        with _session(ledger, analyst, steward, store=store) as session:
            ok = session.verify_snapshot(name, snapshot=snapshot)
            which = session.ledger.profile(name, snapshot).snapshot
        if not ok:
            print_error(
                io.err,
                f"the stored snapshot {which!r} of {name!r} is missing or fails its check; "
                "the next attach reads the source again and stores it anew",
            )
            raise typer.Exit(EXIT_TAMPERED)
        io.out.print(
            f"the stored snapshot {which!r} of {name!r} is the registered one (checked in full)",
            markup=False,
            soft_wrap=True,
        )


def dataset_list(
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """List the registered datasets: each one's snapshots (the newest answers), privacy unit and budget."""
    from dpsense.cli import _output as out

    with _command() as io:
        with _session(ledger, analyst, steward, store=store) as session:
            rows = []
            for name in session.datasets():
                newest = session.ledger.profile(name)
                status = session.budget(name)
                rows.append(
                    {
                        "dataset": name,
                        "snapshots": session.ledger.snapshots(name),
                        "newest": newest.snapshot,
                        "privacy_unit": newest.profile.get("unit"),
                        "adjacency": newest.profile.get("adjacency"),
                        "budget": out.loss_text(status.cap),
                        "remaining": out.loss_text(status.remaining),
                    }
                )
        if as_json:
            io.document(out.dumps({"datasets": rows}))
            return
        io.out.print(out.record_table("datasets", rows))


def dataset_show(
    name: Annotated[str, typer.Argument(help="The dataset's name.")],
    snapshot: Annotated[str | None, typer.Option("--snapshot", help="A snapshot [default: the newest].")] = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
) -> None:
    """Show a snapshot's public profile: every declaration releases use (bounds, keys, caps, policies)."""
    from dpsense.cli import _output as out
    from dpsense.release._profile import Profile

    with _command() as io:
        with _session(ledger, analyst, steward, store=store) as session:
            stored = session.ledger.profile(name, snapshot)
        io.out.print(out.profile_table(name, stored.snapshot, Profile.from_json(stored.profile)))
