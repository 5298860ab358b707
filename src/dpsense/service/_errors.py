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
a snapshot other than the current one  409     ``snapshot_not_current`` (``dataset``, ``snapshot``,
                                               ``current_snapshot``)
identical data, other declarations     409     ``registration_conflict`` (``dataset``, ``snapshot``,
                                               ``differences``); nothing written
ledger lock not obtained in time       503     ``ledger_busy`` (Retry-After: 1)
failure after reading the data         500     ``charged_failure`` (charged, no reason)
a bug                                  500     ``internal``
a body over a limit (``_body``)        413/422 ``body_too_large``, ``yaml_too_large``,
                                               ``body_too_deep``, ``body_too_complex``,
                                               ``invalid_number`` (with ``limit`` or ``rule``)
JSON that does not parse               400     ``invalid_json``
=====================================  ======  =================================================

Every error renders (``ErrorResponse``): a non-finite number is written as text, text is sent as
ASCII JSON (an unpaired surrogate in a caller's field name is escaped, never a failed encode), and
long values and locations are cut, so no refusal can itself become a 500.
"""

from __future__ import annotations

import json
import logging
import math
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
    RegistrationConflict,
    RequestIdConflict,
    SnapshotNotCurrent,
    UnknownAnalyst,
    UnknownDataset,
    UsageError,
)
from dpsense.interface.wording import for_interface

log = logging.getLogger("dpsense.service")


class ApiError(Exception):
    """A refusal the service itself decides (authentication, roles, missing headers, not found)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        fix: str = "",
        headers: dict[str, str] | None = None,
        fields: dict[str, Any] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.fix = fix
        self.headers = headers or {}
        self.fields = fields or {}


#: The longest text of a caller's value an error document repeats.
MAX_ECHO_CHARS = 300
#: The most schema problems one 422 lists.
MAX_PROBLEMS = 20


def renderable(value: Any) -> Any:
    """``value`` with every non-finite float written as text (JSON has no NaN or Infinity)."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {str(k): renderable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [renderable(v) for v in value]
    return value


class ErrorResponse(JSONResponse):
    """A JSON error that always renders: finite numbers only, ASCII text (see the module docstring)."""

    def render(self, content: Any) -> bytes:
        return json.dumps(renderable(content), ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()


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


def api_error(exc: ApiError) -> ErrorResponse:
    """The response for an ``ApiError``."""
    fields = {"fix": exc.fix} if exc.fix else {}
    body = error_document(exc.code, exc.message, **fields, **exc.fields)
    return ErrorResponse(body, exc.status, headers=exc.headers)


def dpsense_error(exc: DPSenseError) -> JSONResponse:
    """The response for a ``DPSenseError`` (see the table in the module docstring)."""
    if isinstance(exc, UsageError):
        status, code = _usage_status(exc)
        message, fix = for_interface(_cut(str(exc)), "http"), for_interface(_cut(exc.fix), "http")
        body = error_document(code, message, rule=_cut(exc.rule), value=_plain(exc.value), fix=fix)
        if isinstance(exc, BudgetExhausted):
            body["error"] |= {"scope": exc.scope, "requested": str(exc.requested), "remaining": str(exc.remaining)}
        elif isinstance(exc, SnapshotNotCurrent):
            body["error"] |= {"dataset": exc.dataset, "snapshot": exc.snapshot, "current_snapshot": exc.current}
        elif isinstance(exc, RegistrationConflict):
            differences = [_cut(d) for d in exc.differences[:MAX_PROBLEMS]]
            body["error"] |= {"dataset": exc.dataset, "snapshot": exc.snapshot, "differences": differences}
        return ErrorResponse(body, status_code=status)
    if isinstance(exc, LedgerBusy):
        body = error_document("ledger_busy", "the ledger is busy; nothing was charged", fix="retry in a moment")
        return ErrorResponse(body, status_code=503, headers={"Retry-After": "1"})
    if isinstance(exc, ChargedFailure):
        body = error_document("charged_failure", str(exc), request_id=exc.request_id)
        return ErrorResponse(body, status_code=500)
    return ErrorResponse(error_document("internal", "internal error: this is a bug in dpsense"), status_code=500)


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
    if isinstance(exc, SnapshotNotCurrent):
        return 409, "snapshot_not_current"
    if isinstance(exc, RegistrationConflict):
        return 409, "registration_conflict"
    return 400, "invalid_request"


def _plain(value: object, budget: list[int] | None = None) -> Any:
    """A JSON-able spelling of an error's offending value (the caller's own input or a public fact).

    Non-finite floats become text, huge integers a description of their size, long text is cut and
    long lists are shortened, so that the document always renders and stays small.
    """
    left = budget if budget is not None else [MAX_PROBLEMS * 5]
    left[0] -= 1
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, int):
        return value if value.bit_length() <= 64 else f"an integer of {value.bit_length()} bits"
    if isinstance(value, str):
        return _cut(value)
    if isinstance(value, list | tuple):
        return [_plain(v, left) for v in value if left[0] > 0]
    try:
        return _cut(str(value))
    except ValueError:  # a Fraction or Decimal past Python's digit limit for int-to-text
        return f"a {type(value).__name__} too long to show"


def _cut(text: str) -> str:
    return text if len(text) <= MAX_ECHO_CHARS else text[:MAX_ECHO_CHARS] + f"… ({len(text)} characters)"


def install(app: FastAPI) -> None:
    """Register the handlers that turn every failure into the documented JSON error."""

    @app.exception_handler(ApiError)
    async def _api(request: Request, exc: ApiError) -> JSONResponse:
        return api_error(exc)

    @app.exception_handler(DPSenseError)
    async def _dpsense(request: Request, exc: DPSenseError) -> JSONResponse:
        if not isinstance(exc, UsageError | ChargedFailure):
            log.error("refused with %s", type(exc).__name__)  # the type only: messages stay out of logs
        return dpsense_error(exc)

    @app.exception_handler(RequestValidationError)
    async def _body(request: Request, exc: RequestValidationError) -> JSONResponse:
        return ErrorResponse(validation_document(exc.errors()), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return ErrorResponse(error_document(code, str(exc.detail)), exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected %s", type(exc).__name__)  # never the message or traceback: they may hold data
        return ErrorResponse(error_document("internal", "internal error: this is a bug in dpsense"), status_code=500)


#: The fix of a 422 whose first problem names none.
SCHEMA_FIX = "see the request schema in /openapi.json"


def validation_document(errors: Any, *, default_fix: str = SCHEMA_FIX) -> dict[str, Any]:
    """A 422 body from pydantic errors: where and what, without echoing the input back.

    The fix is the first problem's own (``ctx["fix"]``: the shared release spec names the field, the
    closest valid name or what to add), else ``default_fix``.
    """
    errors = list(errors)
    problems = [
        {
            "loc": [str(p)[:64] for p in _where(e)][:40],
            "msg": _cut(str(e.get("msg", ""))),
            "type": str(e.get("type", "")),
        }
        for e in errors[:MAX_PROBLEMS]
    ]
    ctx = errors[0].get("ctx") if errors else None
    fix = ctx.get("fix") if isinstance(ctx, dict) else None
    first = problems[0] if problems else {"loc": [], "msg": "invalid body"}
    where = ".".join(p for p in first["loc"] if p != "body") or "body"
    return error_document(
        "invalid_body",
        f"{where}: {first['msg']}",
        fix=_cut(fix) if isinstance(fix, str) and fix else default_fix,
        problems=problems,
    )


def _where(error: Any) -> list[Any]:
    """An error's location, ending with the field it names (``ctx["field"]``: unknown, unused or needed)."""
    loc = list(error.get("loc", ()))
    ctx = error.get("ctx")
    field = ctx.get("field") if isinstance(ctx, dict) else None
    return [*loc, field] if isinstance(field, str) and loc[-1:] != [field] else loc
