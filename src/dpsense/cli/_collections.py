"""``dpsense collection``: local-DP collections from the command line (docs/collections.md).

Commands (each a thin call into the Session's collection methods):

* ``collection add NAME --scheme SCHEME.json --max-reports-per-client N [--dictionary WORDS.txt] --steward``
* ``collection ingest NAME REPORTS.jsonl --batch-id ID`` (one ``{"client_id": ..., "report": ...}`` per
  line; sent in batches of at most 10 000 reports, ``ID/1``, ``ID/2``, ...; a rerun with the same id
  stores nothing twice)
* ``collection estimate NAME [--candidates WORDS.txt | --top N] [--json | --csv] [--explain]``
* ``collection show NAME [--json]``

``collection_app`` is added to the application in ``_app``'s table of commands, as the other groups are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from dpsense.cli._common import (
    DEFAULT_LEDGER,
    AnalystOpt,
    CreateOpt,
    CsvOpt,
    JsonOpt,
    LedgerOpt,
    StewardOpt,
    StoreOpt,
    _command,
    _format,
    _require_steward,
    _session,
)
from dpsense.core.errors import InvalidData, UsageError

collection_app = typer.Typer(
    help="Local-DP collections: register one (steward), ingest device reports, estimate frequencies.",
    no_args_is_help=True,
)

#: The most reports one ``ingest`` command sends in one batch (the ledger's batch limit).
BATCH_REPORTS = 10_000

NameArg = Annotated[str, typer.Argument(help="The collection's name.")]


def _words(path: Path, flag: str) -> list[str]:
    """One value per line (blank lines skipped), as written."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{flag} must name a readable UTF-8 text file", str(path), "pass one value per line") from exc
    return [line for line in text.splitlines() if line.strip()]


def _scheme(path: Path) -> dict[str, Any]:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(
            "--scheme must name a JSON file holding the device scheme",
            str(path),
            'write the scheme\'s JSON, e.g. {"scheme": "krr", "version": 1, "dictionary": ["a", "b"], "epsilon": "1"}',
        ) from exc
    if not isinstance(loaded, dict):
        raise UsageError("--scheme's file must hold one JSON object", type(loaded).__name__, "write the scheme object")
    return loaded


def _reports(path: Path) -> list[Any]:
    """The lines of a JSON-lines file of reports; a line that is not JSON is refused by its number."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError("REPORTS must name a readable UTF-8 file", str(path), "pass a JSON-lines file") from exc
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            raise InvalidData(
                "each line of REPORTS is one JSON object", f"line {number}", 'write {"client_id": ..., "report": ...}'
            ) from None
    if not out:
        raise InvalidData("REPORTS holds no report", str(path), "write one report per line")
    return out


@collection_app.command("add")
def collection_add(
    name: NameArg,
    scheme: Annotated[Path, typer.Option("--scheme", dir_okay=False, help="The device scheme as a JSON file.")],
    max_reports_per_client: Annotated[
        int, typer.Option("--max-reports-per-client", min=1, help="The most reports one client may ever send.")
    ],
    dictionary: Annotated[
        Path | None, typer.Option("--dictionary", dir_okay=False, help="Candidate values, one per line.")
    ] = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    create: CreateOpt = False,
) -> None:
    """Register a local-DP collection: its device scheme, dictionary and per-client report budget (steward)."""
    with _command() as io:
        _require_steward(steward, "register a collection")
        declared = _scheme(scheme)
        words = None if dictionary is None else _words(dictionary, "--dictionary")
        with _session(ledger, analyst, steward, store=store, create=create) as session:
            info = session.register_collection(
                name, scheme=declared, dictionary=words, max_reports_per_client=max_reports_per_client
            )
        io.out.print(
            f"collection {info.name!r}: scheme {info.scheme.get('scheme')!r}, at most {info.max_reports_per_client}"
            " report(s) per client",
            markup=False,
        )


@collection_app.command("ingest")
def collection_ingest(
    name: NameArg,
    reports: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Reports, one JSON object a line.")],
    batch_id: Annotated[str, typer.Option("--batch-id", help="This file's id: a rerun with it stores nothing twice.")],
    submitter: Annotated[
        str | None, typer.Option("--submitter", help="Who relays the reports [default: the analyst name].")
    ] = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Store device reports: each checked, each client's report budget enforced, batches idempotent."""
    with _command() as io:
        items = _reports(reports)
        accepted, refused, replayed = 0, [], 0
        with _session(ledger, analyst, steward, store=store) as session:
            for k, start in enumerate(range(0, len(items), BATCH_REPORTS), start=1):
                chunk = items[start : start + BATCH_REPORTS]
                try:
                    outcome = session.ingest_reports(name, chunk, batch_id=f"{batch_id}/{k}", submitter=submitter)
                except InvalidData as exc:  # the batch's report i is the file's line start + i + 1
                    raise InvalidData(
                        f"REPORTS lines {start + 1}-{start + len(chunk)} (report i is line {start + 1} + i):"
                        f" {exc.rule}",
                        exc.value,
                        exc.fix,
                    ) from None
                accepted += outcome.accepted
                refused += [{"line": start + i + 1, "reason": reason} for i, reason in outcome.refused]
                replayed += outcome.replayed
        if as_json:
            io.document(json.dumps({"accepted": accepted, "refused": refused, "replayed_batches": replayed}))
            return
        note = f" ({replayed} batch(es) were stored already: nothing changed for them)" if replayed else ""
        io.out.print(f"accepted {accepted}, refused {len(refused)}{note}", markup=False)
        for item in refused[:20]:
            io.out.print(f"  line {item['line']}: {item['reason']} (the client's report budget is spent)", markup=False)


@collection_app.command("estimate")
def collection_estimate(
    name: NameArg,
    candidates: Annotated[
        Path | None, typer.Option("--candidates", dir_okay=False, help="Values to estimate, one per line.")
    ] = None,
    top: Annotated[int | None, typer.Option("--top", min=1, help="Heavy hitters (prefix collections).")] = None,
    request_id: Annotated[str | None, typer.Option("--request-id", help="Idempotency key.")] = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    as_json: JsonOpt = False,
    as_csv: CsvOpt = False,
    explain: Annotated[bool, typer.Option("--explain", help="Also print the explain report.")] = False,
) -> None:
    """Estimate value frequencies from every stored report: a release at no central cost (post-processing)."""
    from dpsense.cli import _output as out
    from dpsense.interface.documents import release_document

    with _command() as io:
        shape = _format(as_json, as_csv)
        words = None if candidates is None else _words(candidates, "--candidates")
        with _session(ledger, analyst, steward, store=store) as session:
            result = session.estimate_frequencies(name, candidates=words, top=top, request_id=request_id)
        if shape == "json":
            io.document(out.dumps(release_document(result)))
        elif shape == "csv":
            io.document(out.release_csv(result))
        else:
            io.out.print(out.release_table(result))
            if explain:
                io.out.print(result.explain(), markup=False)
            state = "cached: the stored estimate" if result.cached else "stored now"
            io.out.print(f"{state}; no central budget is charged (post-processing of randomized reports)")


@collection_app.command("show")
def collection_show(
    name: NameArg,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """A collection's public declaration, its devices' guarantee and its tallies."""
    from dpsense.interface.documents import collection_document

    with _command() as io:
        with _session(ledger, analyst, steward, store=store) as session:
            info = session.collection(name)
        doc = collection_document(info)
        if as_json:
            io.document(json.dumps(doc))
            return
        for key, value in doc.items():
            io.out.print(f"{key}: {json.dumps(value) if isinstance(value, dict | list) else value}", markup=False)
