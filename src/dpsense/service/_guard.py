"""The outermost layer of the service: body limits, a bearer check, release latency padding, no tracebacks.

``Guard`` wraps the FastAPI application (plain ASGI, so it sees every response, refusals included):

* **Latency padding (a timing side channel).** A release response, answer or refusal, is not sent
  before ``min_latency_s`` has passed since the request arrived; a slower one is held until the next
  multiple of ``latency_quantum_s``. A refusal judged before any data is read (bad input, budget
  exhausted) is fast; an answer reads data. Without padding, the response time would tell an
  observer which one happened, and the time of an answer would follow the data more finely. What
  stays visible is which quantum an answer fell in (docs/service.md).
* **Body limit.** A body over ``max_body_bytes`` is refused with 413 before it is parsed: at once
  when its Content-Length says so, otherwise (``Transfer-Encoding: chunked``) as soon as the chunks
  read so far pass the limit. The application is then never handed more than the limit plus one
  chunk, and whatever it answers to the interrupted body (FastAPI's own 400 for a body it could not
  read) is replaced by the same 413 document; the release route never ran, so nothing is charged.
* **Bearer check.** A request to ``/v1/`` without an ``Authorization: Bearer`` header is refused with
  401 before its body is read (the token itself is verified against the ledger by the routes).
* **Bodies read off the event loop.** Inside the guard, ``_body.BodyCheck`` reads JSON bodies on a
  parser thread under depth, size-of-tree and number limits (``_body``), before FastAPI sees them.
* **No tracebacks out.** An unexpected exception becomes a bare 500 JSON error; only the exception's
  type is logged, never its message or traceback (they could quote data).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.exceptions import HTTPException

from dpsense.service._errors import error_document

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("dpsense.service")


class _TooLarge(HTTPException):
    """The body grew past the limit while it was read (no Content-Length).

    An ``HTTPException`` so that the application handles it as a refusal (not a bug to log); its
    response is replaced by ``Guard`` with the 413 document either way.
    """

    def __init__(self) -> None:
        super().__init__(413, "the request body is over the limit")


def padded_latency(elapsed: float, *, minimum: float, quantum: float) -> float:
    """The time at which a release response may leave: at least ``minimum``, then whole quanta."""
    if elapsed <= minimum:
        return minimum
    if quantum <= 0:
        return elapsed
    return minimum + quantum * math.ceil((elapsed - minimum) / quantum - 1e-9)


class Guard:
    """See the module docstring. ``padded`` holds the (method, path) pairs of the release routes."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        padded: frozenset[tuple[str, str]],
        min_latency_s: float,
        latency_quantum_s: float,
        max_body_bytes: int,
        inner: ASGIApp | None = None,
    ) -> None:
        self._app = app
        self._inner = inner if inner is not None else app  # ``app`` wrapped by inner layers (``_body``)
        self._padded = padded
        self._minimum = max(0.0, min_latency_s)
        self._quantum = max(0.0, latency_quantum_s)
        self._limit = max_body_bytes

    @property
    def app(self) -> ASGIApp:
        """The wrapped application."""
        return self._app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        start = time.monotonic()
        started = False
        overflow = False  # the body passed the limit while it was read
        replaced = False  # the application's response was replaced by the 413
        pad = (scope["method"], scope["path"]) in self._padded

        async def guarded_send(message: Message) -> None:
            nonlocal started, replaced
            if replaced:
                return  # the rest of the application's answer to a body it was not given
            if message["type"] == "http.response.start":
                if pad:
                    target = padded_latency(time.monotonic() - start, minimum=self._minimum, quantum=self._quantum)
                    await asyncio.sleep(max(0.0, target - (time.monotonic() - start)))
                started = True
                if overflow:
                    replaced = True
                    await _respond(send, 413, _too_large(self._limit), {})
                    return
            await send(message)

        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            status, body, extra = refusal
            await _respond(guarded_send, status, body, extra)
            return
        seen = 0

        async def limited_receive() -> Message:
            nonlocal seen, overflow
            if overflow:
                raise _TooLarge  # nothing more is read once the body passed the limit
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self._limit:
                    overflow = True
                    raise _TooLarge
            return message

        try:
            await self._inner(scope, limited_receive, guarded_send)
        except _TooLarge:
            if not started:
                await guarded_send({"type": "http.response.start", "status": 413, "headers": []})
        except Exception as exc:  # the last line of defence: nothing unexpected leaves
            log.error("unexpected %s", type(exc).__name__)
            if not started:
                body = error_document("internal", "internal error: this is a bug in dpsense")
                await _respond(guarded_send, 500, body, {})

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, dict[str, Any], dict[str, str]] | None:
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self._limit):
            return 413, _too_large(self._limit), {}
        if scope["path"].startswith("/v1/"):
            scheme, _, token = headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                body = error_document(
                    "unauthorized",
                    "a valid API token is required",
                    fix="send 'Authorization: Bearer <token>' with a token from your data steward",
                )
                return 401, body, {"www-authenticate": 'Bearer realm="dpsense"'}
        return None


def _too_large(limit: int) -> dict[str, Any]:
    return error_document("body_too_large", f"the request body is over {limit} bytes", fix="send a smaller body")


async def _respond(send: Send, status: int, body: dict[str, Any], extra: dict[str, str]) -> None:
    payload = json.dumps(body).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode("ascii"))]
    headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in extra.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
