"""The steward's routes: register datasets from the data folder, analysts, tokens, budgets, audit, dashboard.

A steward token is required (403 for an analyst's). Registration reads only files inside the
service's ``data_dir`` (a path that resolves outside it is refused), through ``Session.register_dataset``
in a Session of its own, so that the data checks and the keyed fingerprint are the Python API's.

The dashboard (``/dashboard``) is a server-rendered HTML page with an inline SVG plot and no
scripts, so it needs no network. A browser signs in once with a steward token through the form at
``/dashboard``, which sets an HttpOnly, SameSite=Strict cookie; an ``Authorization: Bearer`` header
works too.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs

import duckdb
from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel

from dpsense.core.errors import UsageError
from dpsense.engine import DuckDBEngine
from dpsense.interface.documents import dataset_document
from dpsense.interface.spec import Name
from dpsense.ledger import Anchor, Scope, checkpoint_document
from dpsense.release import Budget, PrivacyPolicy, Session
from dpsense.service._dashboard import SECURITY_HEADERS, SIGN_IN_STYLE, render_dashboard
from dpsense.service._deps import ERRORS, StewardDep, service_of, verify
from dpsense.service._errors import ApiError
from dpsense.service._models import (
    AmendedOut,
    AmendIn,
    AnalystIn,
    AuditOut,
    CheckpointOut,
    OkOut,
    RegisteredOut,
    RegisterIn,
    SetBudgetIn,
    TokenIn,
    TokenOut,
)
from dpsense.service._workers import Worker, service_session

COOKIE = "dpsense_token"


#: The JSON body model of each steward route (read and checked off the event loop by ``_body.BodyCheck``).
STEWARD_BODIES: dict[tuple[str, str], type[BaseModel]] = {
    ("POST", "/v1/steward/datasets"): RegisterIn,
    ("POST", "/v1/steward/amendments"): AmendIn,
    ("POST", "/v1/steward/analysts"): AnalystIn,
    ("POST", "/v1/steward/tokens"): TokenIn,
    ("PUT", "/v1/steward/budgets"): SetBudgetIn,
}
router = APIRouter(prefix="/v1/steward", responses=ERRORS | {403: {"description": "not a steward token"}})


def on_own_engine(analyst: str, act: Callable[[Session, Worker], dict[str, Any]]) -> Callable[[Worker], dict[str, Any]]:
    """A worker's job running ``act`` in a steward Session on a DuckDB engine of its own (closed after)."""

    def work(worker: Worker) -> dict[str, Any]:
        connection = duckdb.connect(":memory:", config={"threads": 1})
        engine = DuckDBEngine(connection=connection)
        try:
            with service_session(worker.config, worker.ledger, analyst=analyst, role="steward", engine=engine) as s:
                return act(s, worker)
        finally:
            engine.close()
            connection.close()

    return work


@router.post("/datasets", response_model=RegisteredOut, status_code=201)
async def register(body: RegisterIn, caller: StewardDep) -> dict[str, Any]:
    """Register a CSV or Parquet file from the service's data folder with its budget and policy."""
    source = resolve_source(caller.service.config.data_dir, body.source)
    analyst = caller.identity.analyst

    def act(session: Session, worker: Worker) -> dict[str, Any]:
        dataset = session.register_dataset(
            body.name,
            source=str(source),
            privacy_unit=body.privacy_unit,
            budget=Budget(body.budget.epsilon, body.budget.delta),
            policy=PrivacyPolicy(**body.policy.model_dump()),
            adjacency=body.adjacency,
            bounds={k: (v[0], v[1]) for k, v in body.bounds.items()},
            keys=body.keys,
            kinds=body.kinds,
            policies=body.policies,
            max_rows_per_unit=body.max_rows_per_unit,
            max_groups_per_unit=body.max_groups_per_unit or None,
            typical={k: (v[0], v[1]) for k, v in body.typical.items()},
            steps=body.steps,
            hierarchies={
                name: {"levels": h.levels, "keys": [tuple(leaf) for leaf in h.keys]}
                for name, h in body.hierarchies.items()
            }
            or None,
            snapshot=body.snapshot,
        )
        stored = worker.ledger.profile(dataset.name, dataset.snapshot)
        return {
            "dataset": dataset_document(dataset.name, stored.snapshot, stored.profile),
            "linked": dataset.linked,
        }

    result = await caller.run_worker(on_own_engine(analyst, act))
    caller.service.workers.invalidate()
    return result


@router.post("/amendments", response_model=AmendedOut, status_code=201)
async def amend(body: AmendIn, caller: StewardDep) -> dict[str, Any]:
    """Correct a dataset's declarations: a new version of its newest snapshot on the same budget."""
    analyst = caller.identity.analyst

    def act(session: Session, worker: Worker) -> dict[str, Any]:
        dataset = session.amend_dataset(
            body.dataset,
            bounds={k: None if v is None else (v[0], v[1]) for k, v in body.bounds.items()},
            keys=body.keys,
            kinds=body.kinds,
            policies=body.policies,
            typical={k: None if v is None else (v[0], v[1]) for k, v in body.typical.items()},
            steps=dict(body.steps),
            max_rows_per_unit=body.max_rows_per_unit,
            max_groups_per_unit=body.max_groups_per_unit,
            policy=None if body.policy is None else PrivacyPolicy(**body.policy.model_dump()),
            snapshot=body.snapshot,
        )
        stored = worker.ledger.profile(dataset.name, dataset.snapshot)
        return {
            "dataset": dataset_document(dataset.name, stored.snapshot, stored.profile),
            "amended": list(dataset.amended),
        }

    result = await caller.run_worker(on_own_engine(analyst, act))
    caller.service.workers.invalidate()
    return result


@router.post("/analysts", response_model=OkOut, status_code=201)
async def add_analyst(body: AnalystIn, caller: StewardDep) -> dict[str, Any]:
    """Allow an analyst to release (idempotent)."""

    def work(session: Session) -> dict[str, Any]:
        session.add_analyst(body.name)
        return {"ok": True}

    return await caller.run(work)


@router.post("/tokens", response_model=TokenOut, status_code=201)
async def create_token(body: TokenIn, caller: StewardDep) -> dict[str, Any]:
    """A new API token for an existing analyst; shown once, stored only as a salted hash.

    ``expires_in_s`` (optional; finite, > 0, at most 10 years) makes it expire that many seconds from now.
    """

    def work(worker: Worker) -> dict[str, Any]:
        token = worker.ledger.create_token(body.analyst, role=body.role, ttl_s=body.expires_in_s)
        token_id = token.split("_")[1]
        expires_at = None
        if body.expires_in_s is not None:
            expires_at = next(t.expires_at for t in worker.ledger.tokens(body.analyst) if t.token_id == token_id)
        doc = {"token": token, "token_id": token_id, "analyst": body.analyst, "role": body.role}
        return doc | {"expires_at": expires_at}

    return await caller.run_worker(work)


@router.delete("/tokens/{token_id}", response_model=OkOut)
async def revoke_token(token_id: Name, caller: StewardDep) -> dict[str, Any]:
    """Revoke a token by its id (the part after ``dps_``)."""
    if not await caller.run_worker(lambda worker: worker.ledger.revoke_token(token_id)):
        raise ApiError(404, "not_found", "no active token has that id")
    return {"ok": True}


@router.put("/budgets", response_model=OkOut)
async def set_budget(body: SetBudgetIn, caller: StewardDep) -> dict[str, Any]:
    """Create or change the total budget or an analyst, family or period sub-budget of a dataset."""
    scope = scope_of(body)

    def work(session: Session) -> dict[str, Any]:
        session.set_budget(body.dataset, scope, Budget(body.epsilon, body.delta))
        return {"ok": True}

    return await caller.run(work)


#: ``SEQ:HASH`` or ``HASH`` (``dpsense.ledger.Anchor``), checked by FastAPI so a bad value is a 422 naming the field.
_HEAD_PATTERN = r"^([0-9]{1,18}:)?[0-9a-f]{64}$"
ExpectedHead = Annotated[
    str | None,
    Query(pattern=_HEAD_PATTERN, description="A head recorded earlier (SEQ:HASH or HASH): the chain must carry it."),
]


@router.get("/audit", response_model=AuditOut)
async def audit(caller: StewardDep, expected_head: ExpectedHead = None) -> dict[str, Any]:
    """Verify the ledger: the audit chain, every table against it, and ``expected_head`` when given."""

    def work(session: Session) -> dict[str, Any]:
        return session.ledger.verify(expected_head=expected_head).to_json()

    return await caller.run(work)


@router.get("/audit/checkpoint", response_model=CheckpointOut)
async def audit_checkpoint(caller: StewardDep) -> dict[str, Any]:
    """The verified head to keep outside the ledger; 409 when the ledger does not verify."""

    def work(session: Session) -> dict[str, Any]:
        report = session.ledger.verify()
        if not report.ok:
            raise ApiError(409, "ledger_tampered", f"the ledger does not verify: {report.reason}")
        anchor = Anchor(report.head_hash, report.entries)
        return checkpoint_document(anchor, at=datetime.now(UTC).isoformat())

    return await caller.run(work)


def scope_of(body: SetBudgetIn) -> Scope:
    """The ledger scope a budget request names."""
    if body.scope == "total":
        return Scope.total()
    if body.scope == "period":
        if body.start is None or body.end is None:
            raise UsageError("a period budget needs start and end", (body.start, body.end), "pass Unix seconds")
        return Scope.period(body.start, body.end)
    if body.value is None:
        raise UsageError(f"a {body.scope} budget needs value", None, f"pass the {body.scope}'s name as value")
    return Scope.analyst(body.value) if body.scope == "analyst" else Scope.family(body.value)


def resolve_source(data_dir: Path, source: str) -> Path:
    """``source`` inside ``data_dir``; anything that resolves outside it, or is not a file, is refused."""
    root = data_dir.resolve()
    path = (root / source).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        raise UsageError(
            "the source must be a file inside the service's data folder",
            source,
            "copy the file into the folder given to --data-dir and pass its relative path",
        )
    return path


# -- the dashboard ---------------------------------------------------------------------------------

dashboard = APIRouter(include_in_schema=False)


@dashboard.get("/dashboard")
async def show_dashboard(request: Request) -> Response:
    """The steward's dashboard, or the sign-in form."""
    service = service_of(request)
    header = request.headers.get("authorization", "")
    token = header[7:].strip() if header.lower().startswith("bearer ") else request.cookies.get(COOKIE, "")
    identity = await verify(service, token) if token else None
    if identity is None or identity.role != "steward":
        message = "" if not token else "That token is not a valid steward token."
        return HTMLResponse(_sign_in(message), status_code=401, headers=SECURITY_HEADERS)
    page = await service.workers.run(lambda worker: render_dashboard(worker.ledger))
    return HTMLResponse(page, headers=SECURITY_HEADERS)


@dashboard.post("/dashboard/login")
async def sign_in(request: Request) -> Response:
    """Check a steward token sent by the form and keep it in an HttpOnly cookie."""
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    token = (form.get("token") or [""])[0].strip()
    identity = await verify(service_of(request), token) if token else None
    if identity is None or identity.role != "steward":
        return HTMLResponse(
            _sign_in("That token is not a valid steward token."), status_code=401, headers=SECURITY_HEADERS
        )
    response = RedirectResponse("/dashboard", status_code=303, headers=SECURITY_HEADERS)
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/dashboard")
    return response


@dashboard.post("/dashboard/logout")
async def sign_out() -> Response:
    """Forget the cookie."""
    response = RedirectResponse("/dashboard", status_code=303, headers=SECURITY_HEADERS)
    response.delete_cookie(COOKIE, path="/dashboard")
    return response


def _sign_in(message: str) -> str:
    note = f'<p class="error">{html.escape(message)}</p>' if message else ""
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>dpsense — sign in</title>"
        f"<style>{SIGN_IN_STYLE}</style></head><body>"
        f"<h1>dpsense steward dashboard</h1>{note}"
        "<form method='post' action='/dashboard/login'><label>Steward token "
        "<input name='token' type='password' autocomplete='off' size='60'></label> "
        "<button type='submit'>Sign in</button></form></body></html>"
    )
