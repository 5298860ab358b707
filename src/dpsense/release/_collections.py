"""Local-DP collections, end to end on the ledger: register, ingest reports, release estimates.

A collection gathers reports that each client randomized on its own device with a public scheme
(``dpsense.device``: RAPPOR, Count Mean Sketch, Hadamard Count Mean Sketch, k-RR, OUE, prefix
sketches). The server holds only randomized reports, so everything it computes from them is
post-processing (Dwork-Roth Prop. 2.1): an estimate costs no central budget and is stored as an
ordinary release (history, dashboard, ``explain``), one per (collection state, question).

Steps and where each rule is decided:

* ``register_collection`` (steward): the scheme is checked strictly (``scheme_from_json``), the
  dictionary is public, and the per-client report budget is declared; the ledger stores them.
* ``ingest_reports`` (a collector): the whole batch is checked before the ledger (a malformed report
  refuses the batch, naming its index and field; nothing is stored); the ledger then accepts each
  client's reports while its count stays within the budget and stores the additive summary of the
  accepted ones, idempotently per (submitter, batch id).
* ``estimate_frequencies`` (an analyst): the summaries are added up, decoded
  (``dpsense.mechanisms.local_collection``) and stored; the same question on the same stored batches
  returns the stored release.

Guarantee: each report is ε-LDP for its client (the scheme's ``guarantee``), under the adjacency
"replace one client's input"; a client's lifetime loss is bounded by its report budget (M·ε by basic
composition; ε∞ per value for memoized schemes). Docs: docs/collections.md, docs/math/local-collection.md.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dpsense._version import __version__
from dpsense.core.errors import InvalidData, UsageError
from dpsense.core.privacy_loss import PureDP
from dpsense.device import KrrScheme, OueScheme, PrefixScheme, Scheme, SchemeError, scheme_from_json
from dpsense.ledger import CollectionInfo, IngestOutcome, Ledger, ReleaseRecord
from dpsense.noise.entropy import random_bytes
from dpsense.release._release import Release

if TYPE_CHECKING:  # the decoders (numpy, scipy) load when a batch is summarized or an estimate decoded
    from dpsense.mechanisms.local_collection import FrequencyTable

#: Bumped when an estimate's output for the same reports changes, so stored estimates are not reused wrongly.
ESTIMATE_VERSION = "1"
#: The most reports one batch may carry.
MAX_BATCH_REPORTS = 10_000
#: The longest client id.
MAX_CLIENT_ID_CHARS = 200
#: The most candidates one estimate may decode.
MAX_CANDIDATES = 100_000
_ADJACENCY = "replace one client's input (local DP: each report randomized on the client)"


def register_collection(
    ledger: Ledger,
    name: str,
    *,
    scheme: Mapping[str, Any],
    dictionary: Sequence[str] | None = None,
    max_reports_per_client: int,
) -> CollectionInfo:
    """Register collection ``name`` with its public scheme, dictionary and per-client report budget.

    Raises:
        UsageError: a malformed scheme (naming the field), dictionary or budget; a taken name.

    """
    parsed = parse_scheme(scheme)
    words = None if dictionary is None else _candidates(dictionary, "dictionary")
    ledger.register_collection(
        name, scheme=parsed.to_json(), dictionary=words, max_reports_per_client=max_reports_per_client
    )
    return ledger.collection(name)


def ingest_reports(
    ledger: Ledger, name: str, *, submitter: str, batch_id: str, reports: Sequence[Mapping[str, Any]]
) -> IngestOutcome:
    """Store one batch: ``reports`` is a list of ``{"client_id": str, "report": {...}}``.

    Every report is checked against the collection's scheme before the ledger is touched; the ledger
    then enforces each client's report budget (refused reports are listed in the outcome) and makes
    the batch idempotent per (``submitter``, ``batch_id``).

    Raises:
        InvalidData: a malformed batch or report (nothing stored).
        UnknownDataset: no such collection.
        RequestIdConflict: the batch id was used by this submitter for other reports.

    """
    if not isinstance(reports, Sequence) or isinstance(reports, str | bytes):
        raise InvalidData("reports must be a list", type(reports).__name__, "send a JSON list of reports")
    if not 1 <= len(reports) <= MAX_BATCH_REPORTS:
        raise InvalidData(
            f"a batch carries 1 to {MAX_BATCH_REPORTS:,} reports",
            len(reports),
            f"split the reports into batches of at most {MAX_BATCH_REPORTS:,}",
        )
    from dpsense.mechanisms import local_collection as decoding

    info = ledger.collection(name)
    scheme = parse_scheme(info.scheme)
    clients: list[str] = []
    bodies: list[Mapping[str, Any]] = []
    for i, item in enumerate(reports):
        clients.append(_client_id(item, i))
        bodies.append(item["report"])
    whole = decoding.summarize(scheme, bodies)  # every report checked before the ledger; raises naming it
    digest = hashlib.sha256(
        json.dumps([[c, b] for c, b in zip(clients, bodies, strict=True)], sort_keys=True).encode("utf-8")
    ).hexdigest()
    return ledger.ingest(
        name,
        submitter=submitter,
        batch_id=batch_id,
        body_sha256=digest,
        clients=clients,
        summarize=lambda accepted: (  # summarized again only when the ledger refused some reports
            whole if len(accepted) == len(bodies) else decoding.summarize(scheme, [bodies[i] for i in accepted])
        ).to_json(),
    )


def estimate_frequencies(
    ledger: Ledger,
    name: str,
    *,
    analyst: str,
    request_id: str,
    candidates: Sequence[str] | None = None,
    top: int | None = None,
) -> Release:
    """Estimate value frequencies from every stored batch; stored as a release at no central cost.

    ``candidates`` (default: the registered dictionary) are the values to decode; for a prefix
    (unknown-domain) scheme pass ``top`` instead to find the heavy hitters. The result table has one
    row per value: ``value``, ``estimate`` (an unbiased count where the method is; see the notes),
    ``std_error``, ``significant`` (RAPPOR's Bonferroni-controlled selection, else empty).

    Raises:
        UsageError: no candidates and no dictionary, both ``candidates`` and ``top``, bad values.
        UnknownDataset: no such collection.

    """
    from dpsense.mechanisms import local_collection as decoding

    info = ledger.collection(name)
    scheme = parse_scheme(info.scheme)
    asked = _question(info, scheme, candidates, top)
    answered = ledger.store_estimate(  # a retry or the same question on the same batches: nothing to decode
        name, analyst=analyst, request_id=request_id, cache_key=_cache_key(name, info.state, asked), record=None
    )
    if answered is not None:
        return Release(answered[0], cached=True, charged=None)
    state, summaries = ledger.collection_summaries(name)  # batches may have arrived since: the key follows them
    cache_key = _cache_key(name, state, asked)
    merged = decoding.Summary.empty(scheme)
    for item in summaries:
        merged = merged.merge(decoding.Summary.from_json(scheme, item))
    if isinstance(scheme, PrefixScheme) and top is not None:
        table = decoding.heavy_hitters(scheme, merged, top=top)
    else:
        table = decoding.estimate(scheme, merged, asked["candidates"])
    value = _table_value(table)
    guarantee = scheme.guarantee()
    explain = _explain(name, info, guarantee, table, merged.n, state)
    parameters = {
        "analyst": analyst,
        "collection": name,
        "question": asked,
        "state": list(state),
        "scheme": info.scheme,
        "guarantee": guarantee,
        "explain": explain,
    }
    record = ReleaseRecord(
        value=value,
        mechanism=f"local-{info.scheme.get('scheme', 'collection')}-decoding",
        mechanism_version=ESTIMATE_VERSION,
        parameters=parameters,
        privacy_unit="client",
        adjacency=_ADJACENCY,
        code_version=__version__,
    )
    stored = ledger.store_estimate(name, analyst=analyst, request_id=request_id, cache_key=cache_key, record=record)
    assert stored is not None  # a record is given: the call stores it or answers with the stored one
    stored_release, new = stored
    return Release(stored_release, cached=not new, charged=PureDP(0) if new else None)


def _cache_key(name: str, state: tuple[int, int], asked: Mapping[str, Any]) -> str:
    """The key of one question on one set of stored batches (their count and largest id name the set)."""
    question = {"collection": name, "state": list(state), "version": ESTIMATE_VERSION} | dict(asked)
    return "collection:" + hashlib.sha256(json.dumps(question, sort_keys=True).encode("utf-8")).hexdigest()


def new_request_id() -> str:
    """A fresh random request id (for callers that send none)."""
    return random_bytes(16).hex()


def parse_scheme(obj: Mapping[str, Any]) -> Scheme:
    """The device scheme of a JSON declaration, refused with the offending field named (``UsageError``)."""
    try:
        return scheme_from_json(dict(obj))
    except SchemeError as exc:
        raise UsageError(
            f"the collection's scheme field {exc.field!r} {exc.rule}", f"scheme.{exc.field}", exc.fix
        ) from None


def _candidates(values: object, what: str) -> list[str]:
    if not isinstance(values, Sequence) or isinstance(values, str | bytes):
        raise UsageError(f"the {what} is a list of strings", type(values).__name__, "pass a list of strings")
    if not 1 <= len(values) <= MAX_CANDIDATES:
        raise UsageError(
            f"the {what} holds 1 to {MAX_CANDIDATES:,} values", len(values), "pass fewer values, or use top="
        )
    out = []
    for i, v in enumerate(values):
        if not isinstance(v, str) or not v or len(v) > 1_000:
            raise UsageError(
                f"each value of the {what} is a non-empty string of at most 1 000 characters",
                f"{what}[{i}]",
                "pass strings",
            )
        out.append(v)
    if len(set(out)) != len(out):
        raise UsageError(f"the {what}'s values must be distinct", what, "remove the repeated values")
    return out


def _question(
    info: CollectionInfo, scheme: Scheme, candidates: Sequence[str] | None, top: int | None
) -> dict[str, Any]:
    if candidates is not None and top is not None:
        raise UsageError("an estimate takes candidates or top, not both", "candidates, top", "pass one of them")
    if top is not None:
        if isinstance(top, bool) or not isinstance(top, int) or not 1 <= top <= 10_000:
            raise UsageError("top is an integer in [1, 10 000]", top, "pass e.g. top=10")
        if not isinstance(scheme, PrefixScheme):
            raise UsageError(
                "heavy hitters over an unknown domain (top) need a collection with the prefix scheme",
                scheme.kind,
                "pass candidates=[...] for this scheme, or register a prefix collection",
            )
        return {"top": top}
    if candidates is None:
        if isinstance(scheme, KrrScheme | OueScheme):  # they report into the scheme's own dictionary
            return {"candidates": list(scheme.dictionary)}
        if info.dictionary is None:
            raise UsageError(
                "this collection has no dictionary, so an estimate needs candidates (or top= for a prefix scheme)",
                info.name,
                "pass candidates=[...]",
            )
        return {"candidates": list(info.dictionary)}
    return {"candidates": _candidates(candidates, "candidates")}


def _client_id(item: object, index: int) -> str:
    if not isinstance(item, Mapping) or set(item) != {"client_id", "report"}:
        raise InvalidData(
            "each report is an object with exactly the fields client_id and report",
            f"reports[{index}]",
            'send {"client_id": "...", "report": {...}}',
        )
    client = item["client_id"]
    if not isinstance(client, str) or not 1 <= len(client) <= MAX_CLIENT_ID_CHARS or not client.isprintable():
        raise InvalidData(
            f"client_id is a printable string of 1 to {MAX_CLIENT_ID_CHARS} characters",
            f"reports[{index}].client_id",
            "send the client's stable pseudonymous id",
        )
    if not isinstance(item["report"], Mapping):
        raise InvalidData("report is an object", f"reports[{index}].report", "send the report the device produced")
    return client


def _finite(value: Any) -> float | None:
    """A stored number, or None where the estimator gives none (a candidate RAPPOR's selection dropped)."""
    number = float(value)
    return number if math.isfinite(number) else None


def _table_value(table: FrequencyTable) -> dict[str, Any]:
    significant = table.significant
    rows = [
        [
            value,
            _finite(table.estimate[i]),
            _finite(table.std_error[i]),
            None if significant is None else bool(significant[i]),
        ]
        for i, value in enumerate(table.candidates)
    ]
    return {"columns": ["value", "estimate", "std_error", "significant"], "rows": rows}


def _explain(
    name: str, info: CollectionInfo, guarantee: Mapping[str, Any], table: FrequencyTable, n: int, state: tuple[int, int]
) -> str:
    lifetime = guarantee.get("epsilon_lifetime")
    per_report = guarantee.get("epsilon_per_report")
    budget = info.max_reports_per_client
    memo = (
        f"; the scheme memoizes a permanent response, so the loss about any one value stays at most ε∞ = {lifetime}"
        if lifetime is not None
        else ""
    )
    return (
        f"Local-DP collection {name!r}, scheme {info.scheme.get('scheme')!r}: each report is ε-LDP on its client"
        f" (ε = {per_report} per report; {guarantee.get('theorem', '')}), adjacency: {_ADJACENCY}. Each client may"
        f" send at most {budget} report(s), enforced by the ledger: a lifetime loss of at most {budget} × ε"
        f" (basic composition){memo}. Estimated from {n} report(s) in {state[0]} batch(es) by {table.method}:"
        " post-processing of randomized reports (Dwork-Roth Prop. 2.1), so no central budget is charged."
    )
