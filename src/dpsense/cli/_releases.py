"""``dpsense release``, ``sql``, ``preview``, ``budget`` and ``history``: the analyst's commands.

Registered on the application in ``_app``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from dpsense.cli._common import (
    DEFAULT_LEDGER,
    AnalystOpt,
    CsvOpt,
    EngineOpt,
    JsonOpt,
    LedgerOpt,
    SparkCollectLimitOpt,
    SparkMasterOpt,
    SpecArg,
    StewardOpt,
    StoreOpt,
    _command,
    _format,
    _pairs,
    _session,
)
from dpsense.cli._engine import EngineSettings, choose_engine
from dpsense.cli._options import (
    number_option,
    real_option,
)


def release(
    spec_yaml: SpecArg,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    as_json: JsonOpt = False,
    as_csv: CsvOpt = False,
    explain: Annotated[bool, typer.Option("--explain", help="Also print the explain report.")] = False,
    engine: EngineOpt = None,
    spark_master: SparkMasterOpt = None,
    spark_collect_limit: SparkCollectLimitOpt = None,
) -> None:
    """Release the statistics a YAML spec asks for (charged once; the same request again is free).

    A typo in the spec is refused with the closest valid name before the ledger is opened. Example:

    \b
        dataset: events              # snapshot: v1, source: data.csv (relative to the spec) optional
        epsilon: 0.5                 # delta: 0, request_id: job-1 optional
        filters: [{column: age, op: ">=", value: 18}]
        group_by: {column: region}   # keys: [north, south] optional; or {columns: [region, diagnosis]}
        max_groups_per_unit: 1
        aggregates:
          people: {kind: count_units}
          events: {kind: count, max_rows_per_unit: 30}
          hours: {kind: mean, column: hours, bounds: [0, 24]}
          p90: {kind: quantile, column: age, q: 0.9}
        engine: spark                # optional: duckdb (default) or spark
        spark_master: local[2]       # optional, spark only; spark_collect_limit: N too

    Kinds: count, count_units, sum, mean, variance, median, quantile (q), trimmed_mean
    (trim_fraction), histogram (column, keys), min_distance (columns), triangle_count (columns),
    clipped_count (column), approx_bounds (column); each also takes max_rows_per_unit and mechanism,
    the numeric ones bounds.
    """  # noqa: D301 (the \b line is click's no-rewrap marker: see the module docstring)
    from dpsense.cli import _output as out
    from dpsense.cli._progress import progress_bar
    from dpsense.cli._spec import load_release_spec
    from dpsense.interface.documents import budget_document, release_document

    with _command() as io:
        shape = _format(as_json, as_csv)
        spec, query = load_release_spec(spec_yaml)
        choice = choose_engine(EngineSettings(engine, spark_master, spark_collect_limit), spec.engine_settings())
        with _session(ledger, analyst, steward, choice, store=store) as session:
            with io.err.status(f"loading {spec.dataset!r} and checking its fingerprint…"):
                session.dataset(spec.dataset, source=spec.source_path(spec_yaml), snapshot=spec.snapshot)
            with progress_bar(io.err, "releasing") as progress:
                result = session.release(
                    query,
                    epsilon=spec.epsilon,
                    delta=spec.delta,
                    public_n=spec.public_n,
                    request_id=spec.request_id,
                    progress=progress,
                )
            status = session.budget(result.record.dataset)
        if shape == "json":
            io.document(out.dumps(release_document(result) | {"budget": budget_document(status)}))
        elif shape == "csv":
            io.document(out.release_csv(result))
        else:
            io.out.print(out.release_table(result))
            if explain:
                io.out.print(result.explain(), markup=False)
            io.out.print(out.budget_line(result, status), markup=False)


def sql_release(
    query: Annotated[str, typer.Argument(help="One SELECT of aggregates over a registered dataset.")],
    epsilon: Annotated[str, typer.Option("--epsilon", help="The release's ε (a decimal, e.g. 0.5).")],
    delta: Annotated[str, typer.Option("--delta", help="The release's δ (0 for pure ε-DP).")] = "0",
    request_id: Annotated[str | None, typer.Option("--request-id", help="Idempotency key.")] = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    as_json: JsonOpt = False,
    as_csv: CsvOpt = False,
    explain: Annotated[bool, typer.Option("--explain", help="Also print the explain report.")] = False,
    engine: EngineOpt = None,
    spark_master: SparkMasterOpt = None,
    spark_collect_limit: SparkCollectLimitOpt = None,
) -> None:
    """Release a SQL question (the DP subset: aggregates, WHERE on public predicates, GROUP BY public keys).

    Rewrites of a question already asked (aliases, order, commuted predicates, BETWEEN, COUNT(1), case)
    return the stored release at no cost. Example:

    \b
        dpsense sql "SELECT region, COUNT(DISTINCT person_id) FROM events GROUP BY region" --epsilon 0.5
    """  # noqa: D301 (the \b line is click's no-rewrap marker: see the module docstring)
    from dpsense.cli import _output as out
    from dpsense.cli._progress import progress_bar
    from dpsense.interface.documents import budget_document, release_document

    with _command() as io:
        shape = _format(as_json, as_csv)
        choice = choose_engine(EngineSettings(engine, spark_master, spark_collect_limit))
        with _session(ledger, analyst, steward, choice, store=store) as session:
            with progress_bar(io.err, "releasing") as progress:
                result = session.sql(
                    query,
                    epsilon=number_option("--epsilon", epsilon),
                    delta=number_option("--delta", delta),
                    request_id=request_id,
                    progress=progress,
                )
            status = session.budget(result.record.dataset)
        if shape == "json":
            io.document(out.dumps(release_document(result) | {"budget": budget_document(status)}))
        elif shape == "csv":
            io.document(out.release_csv(result))
        else:
            io.out.print(out.release_table(result))
            if explain:
                io.out.print(result.explain(), markup=False)
            io.out.print(out.budget_line(result, status), markup=False)


def preview(
    spec_yaml: SpecArg,
    target: Annotated[
        list[str] | None,
        typer.Option(
            "--target",
            metavar="NAME=ERROR",
            help="Also print the least ε at which statistic NAME's 95% error is at most ERROR (e.g. n=50).",
        ),
    ] = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    engine: EngineOpt = None,
    spark_master: SparkMasterOpt = None,
    spark_collect_limit: SparkCollectLimitOpt = None,
) -> None:
    """Print the plan a release would run (mechanisms, sensitivities, cost) and each statistic's expected error.

    Nothing is charged and no data is read. With --target NAME=ERROR, also the least ε at which that
    statistic's 95% error bound is at most ERROR (up to the policy's per-release cap).
    """
    from dpsense.cli import _output as out
    from dpsense.cli._spec import load_release_spec

    with _command() as io:
        targets = {name: real_option("--target", value) for name, value in _pairs("--target", target)}
        spec, query = load_release_spec(spec_yaml)
        choice = choose_engine(EngineSettings(engine, spark_master, spark_collect_limit), spec.engine_settings())
        with _session(ledger, analyst, steward, choice, store=store) as session:
            with io.err.status(f"loading {spec.dataset!r} and checking its fingerprint…"):
                session.dataset(spec.dataset, source=spec.source_path(spec_yaml), snapshot=spec.snapshot)
            plan = session.preview(query, epsilon=spec.epsilon, delta=spec.delta, public_n=spec.public_n)
            expected = session.forecast(query, epsilon=spec.epsilon, delta=spec.delta)
            needed = session.epsilon_for(query, error=targets, delta=spec.delta) if targets else None
            status = session.budget(spec.dataset)
        io.out.print(plan.explain(), markup=False)
        io.out.print(expected.text(), markup=False, soft_wrap=True)
        if needed is not None:
            wanted = ", ".join(f"{name!r} within ±{value:g}" for name, value in targets.items())
            io.out.print(f"least ε for {wanted}: {out.decimal_text(needed)}", markup=False)
        io.out.print(
            f"preview only: nothing charged. A release would charge {out.loss_text(plan.requested)}; "
            f"remaining {out.loss_text(status.remaining)}",
            markup=False,
        )


def budget(
    dataset: Annotated[str, typer.Argument(help="The dataset's name.")],
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    as_json: JsonOpt = False,
    as_csv: CsvOpt = False,
) -> None:
    """Show a dataset's total budget: cap, spent, remaining (exact)."""
    from dpsense.cli import _output as out
    from dpsense.interface.documents import budget_document

    with _command() as io:
        shape = _format(as_json, as_csv)
        with _session(ledger, analyst, steward, store=store) as session:
            status = session.budget(dataset)
        if shape == "json":
            io.document(out.dumps(budget_document(status)))
        elif shape == "csv":
            io.document(out.budget_csv(status))
        else:
            io.out.print(out.budget_table(status))


def history(
    dataset: Annotated[str, typer.Argument(help="The dataset's name.")],
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    as_json: JsonOpt = False,
    as_csv: CsvOpt = False,
) -> None:
    """List the stored releases of a dataset (the steward sees all, an analyst their own)."""
    from dpsense.cli import _output as out

    with _command() as io:
        shape = _format(as_json, as_csv)
        with _session(ledger, analyst, steward, store=store) as session:
            releases, charges = session.history(dataset), session.ledger.charges(dataset)
        rows = out.history_rows(releases, charges)
        if shape == "json":
            io.document(out.dumps(out.history_document(dataset, releases, charges)))
        elif shape == "csv":
            io.document(out.history_csv(rows))
        else:
            io.out.print(out.history_table(dataset, rows))
