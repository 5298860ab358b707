"""What every route module depends on: the service's state, authentication, the caller, shared error docs.

Both ``_app`` (the analyst's routes and the application) and ``_steward`` (the steward's routes)
import from here and not from each other, as in FastAPI's "bigger applications" layout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar, cast

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from dpsense.ledger import TokenIdentity
from dpsense.release import Session
from dpsense.service._errors import ApiError, unauthorized
from dpsense.service._workers import ServiceConfig, Worker, Workers

T = TypeVar("T")

#: Error responses every authenticated route may give (documented in the OpenAPI schema).
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "bad input: the rule, the value and the fix"},
    401: {"description": "no token, or a token that is not valid"},
    404: {"description": "no such dataset or release (another analyst's release is not found either)"},
    409: {
        "description": "a budget cannot cover the request (nothing charged), the key's release failed, the "
        "request names a snapshot other than the current one, or (steward) the data is registered with other "
        "declarations"
    },
    422: {"description": "a malformed body, or an idempotency key reused for another request"},
}
_bearer = HTTPBearer(auto_error=False, scheme_name="token", description="An API token from the data steward.")


@dataclass(frozen=True)
class Service:
    """The application's state: its configuration and worker pool."""

    config: ServiceConfig
    workers: Workers


@dataclass(frozen=True)
class Caller:
    """An authenticated request: who asks, and a way to run work with their Session."""

    service: Service
    identity: TokenIdentity

    async def run(self, work: Callable[[Session], T]) -> T:
        """Run ``work`` with the caller's Session on a worker thread."""
        identity, generation = self.identity, self.service.workers.generation
        return await self.service.workers.run(lambda worker: work(worker.session(identity, generation)))

    async def run_worker(self, work: Callable[[Worker], T]) -> T:
        """Run ``work`` with the worker itself (its ledger connection) on a worker thread."""
        return await self.service.workers.run(work)


def service_of(request: Request) -> Service:
    """The ``Service`` of the application that serves ``request``."""
    return cast(Service, request.app.state.service)


async def verify(service: Service, token: str) -> TokenIdentity | None:
    """The identity behind ``token`` (checked against the salted hash in the ledger)."""
    return await service.workers.run(lambda worker: worker.ledger.verify_token(token))


async def _any_role(request: Request, credentials: HTTPAuthorizationCredentials | None) -> Caller:
    """The caller behind a valid token of any role; 401 without one."""
    service = service_of(request)
    if credentials is None or not credentials.credentials:
        raise unauthorized()
    identity = await verify(service, credentials.credentials)
    if identity is None:
        raise unauthorized("the API token is not valid (unknown, wrong or revoked)")
    return Caller(service, identity)


async def authenticated(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Caller:
    """The caller of a ``/v1/`` route: an analyst or steward token; 401 without a valid token.

    A collector token (it may only submit local-DP reports, ``submitter_of``) is refused with 403.
    """
    caller = await _any_role(request, credentials)
    if caller.identity.role == "collector":
        raise ApiError(
            403, "forbidden", "a collector token may only submit reports", fix="use an analyst or steward token"
        )
    return caller


async def submitter_of(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Caller:
    """The caller of the report-ingest route: a collector or steward token (403 for an analyst's)."""
    caller = await _any_role(request, credentials)
    if caller.identity.role not in ("collector", "steward"):
        raise ApiError(403, "forbidden", "only a collector token may submit reports", fix="use a collector token")
    return caller


CallerDep = Annotated[Caller, Depends(authenticated)]


async def steward(caller: CallerDep) -> Caller:
    """The caller, who must hold a steward token (403 otherwise)."""
    if caller.identity.role != "steward":
        raise ApiError(403, "forbidden", "only the data steward may do this", fix="use a steward token")
    return caller


StewardDep = Annotated[Caller, Depends(steward)]
