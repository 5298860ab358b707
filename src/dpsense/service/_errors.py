"""How the service answers a refusal: one JSON error document and a status that says whose problem it is.

Every error body is ``{"error": {"code", "message", "rule", "value", "fix"}}`` (the last three for
``UsageError``, which states the rule, the offending value and the fix). No error carries a data
value: ``UsageError`` messages never do (``dpsense.core.errors``), a failure after data access is a
``ChargedFailure`` that says nothing but its request id, and anything unexpected is a bare 500.

=====================================  ======  =================================================
refusal                                status  code
=====================================  ======  =================================================
no / malformed / unknown token         401     ``unauthorized``
a steward endpoint, analyst token      403     ``forbidden``
another analyst's (or no) release      404     ``not_found``
unknown dataset                        404     ``unknown_dataset``
bad input (``UsageError``)             400     ``invalid_request``
malformed body (schema)                422     ``invalid_body``
idempotency key reused differently     422     ``idempotency_key_reused``
budget cannot cover the request        409     ``budget_exhausted``
request id of a failed release         409     ``ledger_state``
ledger lock not obtained in time       503     ``ledger_busy`` (Retry-After: 1)
failure after reading the data         500     ``charged_failure`` (charged, no reason)
a bug                                  500     ``internal``
=====================================  ======  =================================================
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from dpsense.core.errors import (
    BudgetExhausted,
    ChargedFailure,
    DPSenseError,
    LedgerBusy,
    LedgerStateError,
    RequestIdConflict,
    UnknownAnalyst,
    UnknownDataset,
    UsageError,
)

log = logging.getLogger("dpsense.service")


class ApiError(Exception):
    """A refusal the service itself decides (authentication, roles, missing headers, not found)."""

    def __init__(self, status: int, code: str, message: str, *, fix: str = "", headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.fix = fix
        self.headers = headers or {}


def unauthorized(message: str = "a valid API token is required") -> ApiError:
    """401 with the Bearer challenge."""
    return ApiError(
        401,
        "unauthorized",
        message,
        fix="send 'Authorization: Bearer <token>' with a token from your data steward",
        headers={"WWW-Authenticate": 'Bearer realm="dpsense"'},
    )


def error_document(code: str, message: str, **fields: Any) -> dict[str, Any]:
    """The JSON body of every error."""
    return {"error": {"code": code, "message": message, **fields}}


def dpsense_error(exc: DPSenseError) -> JSONResponse:
    """The response for a ``DPSenseError`` (see the table in the module docstring)."""
    if isinstance(exc, UsageError):
        status, code = _usage_status(exc)
        body = error_document(code, str(exc), rule=exc.rule, value=_plain(exc.value), fix=exc.fix)
        if isinstance(exc, BudgetExhausted):
            body["error"] |= {"scope": exc.scope, "requested": str(exc.requested), "remaining": str(exc.remaining)}
        return JSONResponse(body, status_code=status)
    if isinstance(exc, LedgerBusy):
        body = error_document("ledger_busy", "the ledger is busy; nothing was charged", fix="retry in a moment")
        return JSONResponse(body, status_code=503, headers={"Retry-After": "1"})
    if isinstance(exc, ChargedFailure):
        body = error_document("charged_failure", str(exc), request_id=exc.request_id)
        return JSONResponse(body, status_code=500)
    return JSONResponse(error_document("internal", "internal error: this is a bug in dpsense"), status_code=500)


def _usage_status(exc: UsageError) -> tuple[int, str]:
    if isinstance(exc, BudgetExhausted):
        return 409, "budget_exhausted"
    if isinstance(exc, UnknownDataset):
        return 404, "unknown_dataset"
    if isinstance(exc, UnknownAnalyst):
        return 403, "unknown_analyst"
    if isinstance(exc, RequestIdConflict):
        return 422, "idempotency_key_reused"
    if isinstance(exc, LedgerStateError):
        return 409, "ledger_state"
    return 400, "invalid_request"


def _plain(value: object) -> Any:
    """A JSON-able spelling of an error's offending value (the caller's own input or a public fact)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return str(value)


def install(app: FastAPI) -> None:
    """Register the handlers that turn every failure into the documented JSON error."""

    @app.exception_handler(ApiError)
    async def _api(request: Request, exc: ApiError) -> JSONResponse:
        fields = {"fix": exc.fix} if exc.fix else {}
        return JSONResponse(error_document(exc.code, exc.message, **fields), exc.status, headers=exc.headers)

    @app.exception_handler(DPSenseError)
    async def _dpsense(request: Request, exc: DPSenseError) -> JSONResponse:
        if not isinstance(exc, UsageError | ChargedFailure):
            log.error("refused with %s", type(exc).__name__)  # the type only: messages stay out of logs
        return dpsense_error(exc)

    @app.exception_handler(RequestValidationError)
    async def _body(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(validation_document(exc.errors()), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse(error_document(code, str(exc.detail)), exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected %s", type(exc).__name__)  # never the message or traceback: they may hold data
        return JSONResponse(error_document("internal", "internal error: this is a bug in dpsense"), status_code=500)


def validation_document(errors: Any) -> dict[str, Any]:
    """A 422 body from pydantic errors: where and what, without echoing the input back."""
    problems = [
        {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
        for e in errors
    ]
    first = problems[0] if problems else {"loc": [], "msg": "invalid body"}
    where = ".".join(p for p in first["loc"] if p != "body") or "body"
    return error_document(
        "invalid_body",
        f"{where}: {first['msg']}",
        fix="see the request schema in /openapi.json",
        problems=problems,
    )
