"""The local-DP collection routes: register (steward), ingest reports (collector), estimates (analyst).

=========================================  ===========================  ==================================
route                                      token                        what
=========================================  ===========================  ==================================
``POST /v1/collections``                   steward                      register a collection (201)
``GET /v1/collections/{name}``             analyst, steward             declaration, guarantee, tallies
``POST /v1/collections/{name}/reports``    collector, steward           one batch of device reports
``POST /v1/collections/{name}/estimates``  analyst, steward             frequency estimates as a release
=========================================  ===========================  ==================================

A collector token (``role="collector"``) may only submit reports: every other route refuses it
(403). A batch is ``{"batch_id": str, "reports": [{"client_id": str, "report": {...}}, ...]}``; it is
idempotent per (collector, ``batch_id``), each client's report budget is enforced by the ledger, and
refused reports are listed by index. The work runs in ``dpsense.release._collections``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from dpsense.interface.documents import collection_document, release_document
from dpsense.interface.spec import Name
from dpsense.release import _collections as collections
from dpsense.service._deps import ERRORS, Caller, CallerDep, StewardDep, submitter_of
from dpsense.service._workers import Worker

router = APIRouter(prefix="/v1/collections", responses=ERRORS | {403: {"description": "a token of another role"}})
SubmitterDep = Annotated[Caller, Depends(submitter_of)]


class _Strict(BaseModel):
    model_config = {"extra": "forbid", "strict": True}


class CollectionIn(_Strict):
    """A collection's public declaration."""

    name: Name
    scheme: dict[str, Any] = Field(description="the device scheme's JSON (dpsense.device), checked strictly")
    dictionary: list[str] | None = Field(default=None, max_length=collections.MAX_CANDIDATES)
    max_reports_per_client: int = Field(ge=1, le=1_000_000)


class ReportIn(_Strict):
    """One device report with its client's stable pseudonymous id."""

    client_id: str = Field(min_length=1, max_length=collections.MAX_CLIENT_ID_CHARS)
    report: dict[str, Any]


class BatchIn(_Strict):
    """A batch of reports, idempotent per (collector, ``batch_id``)."""

    batch_id: str = Field(min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$")
    reports: list[ReportIn] = Field(min_length=1, max_length=collections.MAX_BATCH_REPORTS)


class EstimateIn(_Strict):
    """What to estimate: ``candidates`` (default: the dictionary) or the ``top`` heavy hitters."""

    candidates: list[str] | None = Field(default=None, max_length=collections.MAX_CANDIDATES)
    top: int | None = Field(default=None, ge=1, le=10_000)
    request_id: str | None = Field(default=None, min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$")


@router.post("", status_code=201)
async def register_collection(body: CollectionIn, caller: StewardDep) -> dict[str, Any]:
    """Register a collection (steward): its scheme, dictionary and per-client report budget."""

    def work(worker: Worker) -> dict[str, Any]:
        info = collections.register_collection(
            worker.ledger,
            body.name,
            scheme=body.scheme,
            dictionary=body.dictionary,
            max_reports_per_client=body.max_reports_per_client,
        )
        return collection_document(info)

    return await caller.run_worker(work)


@router.get("/{name}")
async def get_collection(name: Name, caller: CallerDep) -> dict[str, Any]:
    """A collection's declaration, its devices' guarantee and its public tallies."""
    return await caller.run_worker(lambda worker: collection_document(worker.ledger.collection(name)))


@router.post("/{name}/reports")
async def submit_reports(name: Name, body: BatchIn, caller: SubmitterDep) -> dict[str, Any]:
    """Store a batch of device reports: each checked, each client's report budget enforced, idempotent."""
    reports = [{"client_id": r.client_id, "report": r.report} for r in body.reports]

    def work(worker: Worker) -> dict[str, Any]:
        outcome = collections.ingest_reports(
            worker.ledger, name, submitter=caller.identity.analyst, batch_id=body.batch_id, reports=reports
        )
        return {
            "batch": outcome.batch,
            "accepted": outcome.accepted,
            "refused": [{"index": i, "reason": reason} for i, reason in outcome.refused],
            "replayed": outcome.replayed,
        }

    return await caller.run_worker(work)


@router.post("/{name}/estimates")
async def estimate(name: Name, body: EstimateIn, caller: CallerDep) -> dict[str, Any]:
    """Frequency estimates from every stored batch, stored as a release (post-processing: no central cost)."""

    def work(worker: Worker) -> dict[str, Any]:
        release = collections.estimate_frequencies(
            worker.ledger,
            name,
            analyst=caller.identity.analyst,
            request_id=body.request_id or collections.new_request_id(),
            candidates=body.candidates,
            top=body.top,
        )
        return release_document(release) | {"collection": name}

    return await caller.run_worker(work)
