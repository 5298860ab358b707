"""``create_app``: the FastAPI application, its authentication and the analyst's routes.

Every route that reads the ledger or data runs on a worker thread through the caller's ``Session``
(``_workers``): releases are ``Session.release`` / ``Session.sql``, previews ``Session.preview``,
listings ``Session.history`` (an analyst sees their own releases only). There is no other route to
a value. The steward's routes and the dashboard are in ``_steward``; authentication and the
routes' shared dependencies in ``_deps`` (so neither route module imports the other).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, FastAPI, Header, Request
from pydantic import BaseModel, ValidationError

from dpsense._version import __version__
from dpsense.core.errors import UsageError
from dpsense.interface.documents import (
    budget_document,
    dataset_document,
    loss_document,
    release_document,
    stored_document,
)
from dpsense.interface.spec import Name
from dpsense.ledger import Scope
from dpsense.release import Dataset, Forecast, Session
from dpsense.service import _errors
from dpsense.service._body import BodyCheck, load_yaml, off_loop
from dpsense.service._collections import router as collections_router
from dpsense.service._deps import ERRORS, Caller, CallerDep, Service
from dpsense.service._errors import ApiError, validation_document
from dpsense.service._guard import Guard
from dpsense.service._links import install_links
from dpsense.service._models import (
    BudgetsOut,
    DatasetOut,
    DatasetsOut,
    PreviewOut,
    ReleaseOut,
    ReleasesOut,
    StoredReleaseOut,
    WhoAmIOut,
)
from dpsense.service._spec import ReleaseBody, SqlBody
from dpsense.service._steward import STEWARD_BODIES, dashboard
from dpsense.service._steward import router as steward_router
from dpsense.service._workers import ServiceConfig, Worker, Workers

T = TypeVar("T")

#: How long a thread may hold the GIL before the event loop gets it back (``sys.setswitchinterval``).
SWITCH_INTERVAL_S = 0.001
#: The environment variable through which ``serve --processes N`` hands each process its configuration.
CONFIG_ENV = "DPSENSE_SERVICE_CONFIG"

#: The release routes: their responses, answers and refusals alike, are padded (``_guard``).
RELEASE_ROUTES = frozenset({("POST", "/v1/releases"), ("POST", "/v1/releases/yaml"), ("POST", "/v1/sql")})
#: The JSON body model of each analyst route (read and checked off the event loop by ``_body.BodyCheck``).
JSON_BODIES: dict[tuple[str, str], type[BaseModel]] = {
    ("POST", "/v1/preview"): ReleaseBody,
    ("POST", "/v1/preview/sql"): SqlBody,
    ("POST", "/v1/releases"): ReleaseBody,
    ("POST", "/v1/sql"): SqlBody,
}
IdempotencyKey = Annotated[
    str,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=200,
        pattern=r"^[\x21-\x7e]+$",
        description="The request's id (scoped to you): a retry with the same key returns the same release, "
        "charged once.",
    ),
]

router = APIRouter()


@router.get("/healthz", include_in_schema=False)
async def healthz() -> dict[str, str]:
    """Liveness (no ledger access)."""
    return {"status": "ok", "version": __version__}


@router.get("/v1/whoami", response_model=WhoAmIOut, responses=ERRORS)
async def whoami(caller: CallerDep) -> dict[str, Any]:
    """Who the token speaks for."""
    return {"analyst": caller.identity.analyst, "role": caller.identity.role}


@router.get("/v1/datasets", response_model=DatasetsOut, responses=ERRORS)
async def list_datasets(caller: CallerDep) -> dict[str, Any]:
    """Every registered dataset with its public schema (declared kinds, bounds, keys; no data)."""

    def work(worker: Worker) -> dict[str, Any]:
        out = []
        for name in worker.ledger.dataset_names():
            stored = worker.ledger.profile(name)
            out.append(dataset_document(name, stored.snapshot, stored.profile))
        return {"datasets": out}

    return await caller.run_worker(work)


@router.get("/v1/datasets/{dataset}", response_model=DatasetOut, responses=ERRORS)
async def get_dataset(dataset: Name, caller: CallerDep) -> dict[str, Any]:
    """One dataset's public schema."""

    def work(worker: Worker) -> dict[str, Any]:
        stored = worker.ledger.profile(dataset)
        return dataset_document(dataset, stored.snapshot, stored.profile)

    return await caller.run_worker(work)


@router.get("/v1/datasets/{dataset}/budget", response_model=BudgetsOut, responses=ERRORS)
async def get_budget(dataset: Name, caller: CallerDep) -> dict[str, Any]:
    """The dataset's total budget and the caller's own sub-budget (when the steward set one)."""
    return await caller.run(lambda session: budgets(session, dataset))


@router.post("/v1/preview", response_model=PreviewOut, responses=ERRORS)
async def preview(body: ReleaseBody, caller: CallerDep) -> dict[str, Any]:
    """The plan a release would run and its cost; nothing is charged and no data is read."""
    query = body.query()

    def work(session: Session) -> dict[str, Any]:
        attach(session, body.dataset, body.snapshot)
        plan = session.preview(query, epsilon=body.epsilon, delta=body.delta, public_n=body.public_n)
        expected = session.forecast(query, epsilon=body.epsilon, delta=body.delta)
        return preview_doc(session, plan.dataset, plan.requested, plan.explain(), expected)

    return await caller.run(work)


@router.post("/v1/preview/sql", response_model=PreviewOut, responses=ERRORS)
async def preview_sql(body: SqlBody, caller: CallerDep) -> dict[str, Any]:
    """The plan of a SQL question and its cost; nothing is charged and no data is read."""

    def work(session: Session) -> dict[str, Any]:
        plan = session.preview_sql(body.sql, epsilon=body.epsilon, delta=body.delta)
        expected = session.forecast_sql(body.sql, epsilon=body.epsilon, delta=body.delta)
        return preview_doc(session, plan.dataset, plan.requested, plan.explain(), expected)

    return await caller.run(work)


@router.post("/v1/releases", response_model=ReleaseOut, responses=ERRORS)
async def release(body: ReleaseBody, caller: CallerDep, key: IdempotencyKey) -> dict[str, Any]:
    """Release a query (the CLI's release spec as JSON, without ``source`` and ``request_id``)."""
    return await _release(body, caller, key)


@router.post(
    "/v1/releases/yaml",
    response_model=ReleaseOut,
    responses=ERRORS,
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "A release spec as YAML (the CLI's format, without source and request_id).",
            "content": {"application/yaml": {"schema": {"type": "string"}}},
        }
    },
)
async def release_yaml(request: Request, caller: CallerDep, key: IdempotencyKey) -> dict[str, Any]:
    """Release a query written as a YAML release spec (at most 64 KiB; read off the event loop, ``_body``)."""
    raw = await request.body()
    body = await off_loop(lambda: yaml_body(raw))
    return await _release(body, caller, key)


def yaml_body(raw: bytes) -> ReleaseBody:
    """A YAML release spec within the body limits, validated (run on a parser thread)."""
    data = load_yaml(raw)
    try:
        return ReleaseBody.model_validate(data)
    except ValidationError as exc:
        document = validation_document(exc.errors(include_url=False), default_fix="see the release spec format")
        raise ApiError(
            422,
            "invalid_body",
            document["error"]["message"],
            fix=document["error"]["fix"],
            fields={"problems": document["error"]["problems"]},
        ) from None


@router.post("/v1/sql", response_model=ReleaseOut, responses=ERRORS)
async def release_sql(body: SqlBody, caller: CallerDep, key: IdempotencyKey) -> dict[str, Any]:
    """Release a SQL question (the DP subset); rewrites of one question share one stored release."""

    def work(session: Session) -> dict[str, Any]:
        result = session.sql(body.sql, epsilon=body.epsilon, delta=body.delta, request_id=key, family=body.family)
        return release_document(result) | {"budget": released_budgets(session, result.record.dataset)}

    return await caller.run(work)


@router.get("/v1/releases", response_model=ReleasesOut, responses=ERRORS)
async def list_releases(caller: CallerDep, dataset: Name | None = None) -> dict[str, Any]:
    """Stored releases, oldest first: an analyst sees their own, the steward every one."""

    def work(session: Session) -> dict[str, Any]:
        names = [dataset] if dataset is not None else session.datasets() + session.collections()
        steward = session.role == "steward"
        found = [stored_document(r, with_analyst=steward) for name in names for r in session.history(name)]
        return {"releases": found}

    return await caller.run(work)


@router.get("/v1/releases/{release_id}", response_model=StoredReleaseOut, responses=ERRORS)
async def get_release(release_id: int, caller: CallerDep) -> dict[str, Any]:
    """One stored release; another analyst's release is 404, as if it did not exist."""

    def work(session: Session) -> dict[str, Any]:
        steward = session.role == "steward"
        for name in session.datasets() + session.collections():
            for record in session.history(name):
                if record.release_id == release_id:
                    return stored_document(record, with_analyst=steward)
        raise ApiError(404, "not_found", "no release of yours has that id")

    return await caller.run(work)


async def _release(body: ReleaseBody, caller: Caller, key: str) -> dict[str, Any]:
    query = body.query()

    def work(session: Session) -> dict[str, Any]:
        if body.snapshot is not None:  # a named snapshot must be the current one (else the release reads it)
            attach(session, body.dataset, body.snapshot)
        result = session.release(
            query, epsilon=body.epsilon, delta=body.delta, public_n=body.public_n, request_id=key, family=body.family
        )
        return release_document(result) | {"budget": released_budgets(session, result.record.dataset)}

    return await caller.run(work)


def attach(session: Session, dataset: str, snapshot: str | None) -> Dataset:
    """The dataset's current snapshot; a request naming another is refused (409 ``snapshot_not_current``).

    The workers' Sessions read shared snapshots, which check the current one in the ledger on every
    call (``SharedSnapshots.dataset``): no policy lets an analyst choose an older snapshot.
    """
    return session.dataset(dataset, snapshot=snapshot)


def budgets(session: Session, dataset: str) -> dict[str, Any]:
    """The total budget and the caller's analyst sub-budget (None when there is none)."""
    total = budget_document(session.budget(dataset))
    try:
        own = budget_document(session.budget(dataset, Scope.analyst(session.analyst)))
    except UsageError:
        own = None
    return {"total": total, "analyst": own}


def released_budgets(session: Session, dataset: str) -> dict[str, Any]:
    """``budgets`` after a release, from its own reserve transaction (``Session.reserved_budgets``): no read.

    The figures are the budgets as the release's charge left them, read under the locks that charge
    took. A release that returned always has them; were they missing, the budgets are read instead.
    """
    figures = session.reserved_budgets
    total = next((b for b in figures if b.scope.kind == "total"), None)
    if total is None:
        return budgets(session, dataset)
    own = next((b for b in figures if b.scope.kind == "analyst" and b.scope.value == session.analyst), None)
    return {"total": budget_document(total), "analyst": None if own is None else budget_document(own)}


def preview_doc(session: Session, dataset: str, requested: Any, explain: str, expected: Forecast) -> dict[str, Any]:
    """The preview response: the plan, its cost, and each statistic's expected error."""
    return {
        "dataset": dataset,
        "would_charge": loss_document(requested),
        "explain": explain,
        "budget": budgets(session, dataset),
        "accuracy": [dataclasses.asdict(e) for e in expected.expected],
        "warnings": list(expected.goal_misses),
    }


def create_app(config: ServiceConfig) -> Guard:
    """The service as an ASGI application (FastAPI inside ``Guard``); see ``docs/service.md``."""
    workers = Workers(config)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        schedule = asyncio.create_task(workers.resolve_stale_forever()) if workers.resolves_stale else None
        try:
            yield
        finally:
            if schedule is not None:
                schedule.cancel()
                with suppress(asyncio.CancelledError):
                    await schedule
            workers.close()

    app = FastAPI(
        title="dpsense release service",
        version=__version__,
        description="Differentially private releases over HTTP: every release is charged to the ledger "
        "before data is read. Authenticate with 'Authorization: Bearer <token>'.",
        docs_url=None,  # the interactive pages load scripts from a CDN; the schema is at /openapi.json
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.service = Service(config, workers)
    _errors.install(app)
    app.include_router(router)
    app.include_router(steward_router)
    app.include_router(collections_router)
    app.include_router(dashboard)
    install_links(app)
    return Guard(
        app,
        inner=BodyCheck(app, skip=frozenset({"/v1/releases/yaml"}), models=JSON_BODIES | STEWARD_BODIES),
        padded=RELEASE_ROUTES,
        min_latency_s=config.min_latency_s,
        latency_quantum_s=config.latency_quantum_s,
        max_body_bytes=config.max_body_bytes,
    )


def app_from_environment() -> Guard:
    """``create_app`` of the configuration in ``$DPSENSE_SERVICE_CONFIG`` (each process of ``serve --processes N``)."""
    text = os.environ.get(CONFIG_ENV)
    if text is None:
        raise UsageError(
            "a service process reads its configuration from the environment", CONFIG_ENV, "start it with dpsense serve"
        )
    sys.setswitchinterval(SWITCH_INTERVAL_S)  # as ``serve`` sets it for one process (``cli._serve``)
    return create_app(ServiceConfig.from_env(text))
