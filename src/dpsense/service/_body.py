"""Reading request bodies without stalling the service: off the event loop, under size, depth and time limits.

A body is judged on a small pool of parser threads (``off_loop``), never on the event loop, so a
body that is slow to read delays only itself: ``/healthz`` and every other request keep being
answered. The limits (docs/service.md, "Limits"):

=========================  =========================  ==============================================
limit                      value                      answer
=========================  =========================  ==============================================
body size                  ``max_body_bytes`` (1 MiB)  413 ``body_too_large`` (``_guard``)
YAML body size             ``MAX_YAML_BYTES`` (32 KiB) 413 ``yaml_too_large``
nesting depth              ``MAX_DEPTH`` (32)          422 ``body_too_deep``
values in a body           ``MAX_NODES`` (50 000)      422 ``body_too_complex``
time to read a body        ``PARSE_TIMEOUT_S`` (2 s)   422 ``body_too_complex``
a number                   ``NUMBER_RULE``             422 ``invalid_number`` (NaN, Infinity, 1e309,
                                                       0.1e99999, a 5000-digit number)
YAML anchors / aliases     refused                     400 ``invalid_request``
=========================  =========================  ==============================================

JSON bodies of the ``/v1/`` routes are checked by ``BodyCheck`` (an ASGI layer inside ``Guard``)
before FastAPI sees them: a body that passes is bounded (depth, values, finite numbers of bounded
size), so FastAPI's own parse and validation of it are short. YAML bodies are read by the YAML
route itself through ``load_yaml`` on the parser threads, with the scanner the CLI shares
(``dpsense.query._limits.read_limited_yaml``): PyYAML's event stream is walked first, counting depth
and values as the events arrive, and the document is composed only when the stream is within the
limits (PyYAML's scanner is quadratic in the nesting depth, so the depth is cut off after
``MAX_DEPTH`` levels instead of being read to the end). ``_yaml_refusal`` words its refusals as the
JSON errors of this table.

No error document echoes a non-finite number or an over-long input: the offending value is
described (``"NaN"``, ``"a number of size 1e400 ..."``), never copied.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from dpsense.core.errors import UsageError
from dpsense.query._limits import YamlLimitError, YamlViolation, read_limited_yaml
from dpsense.query._values import MAX_NUMBER_CHARS, NUMBER_RULE, number_problem
from dpsense.service._errors import ApiError, api_error, validation_document

T = TypeVar("T")
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The deepest nesting of lists and objects (a release request nests 4 levels).
MAX_DEPTH = 32
#: The most values (objects, lists, strings, numbers, ...) one body may hold.
MAX_NODES = 50_000
#: YAML bodies larger than this are refused (a release spec is a few hundred bytes; JSON takes 1 MiB).
MAX_YAML_BYTES = 32 * 1024
#: A body that is not read within this time is refused (the limits above keep reading far shorter).
PARSE_TIMEOUT_S = 2.0
#: JSON bodies up to this size are read on the event loop itself (well under a millisecond, and never
#: queued behind large bodies on the parser threads); larger ones on a parser thread.
INLINE_JSON_BYTES = 8 * 1024
#: Parser threads (separate from the ledger workers, so slow bodies never hold up releases).
PARSER_THREADS = 2

_pool = ThreadPoolExecutor(max_workers=PARSER_THREADS, thread_name_prefix="dpsense-parse")
_JSON_FIX = "send the release as JSON to POST /v1/releases (bodies up to 1 MiB)"


async def off_loop(work: Callable[[], T]) -> T:
    """Run ``work`` on a parser thread; more than ``PARSE_TIMEOUT_S`` is a 422 (the thread finishes alone)."""
    future = asyncio.get_running_loop().run_in_executor(_pool, work)
    try:
        return await asyncio.wait_for(future, PARSE_TIMEOUT_S)
    except TimeoutError:
        raise _limit(
            422,
            "body_too_complex",
            f"the body was not read within {PARSE_TIMEOUT_S:g} s",
            "parse_timeout_s",
            PARSE_TIMEOUT_S,
            "send a smaller, flatter body",
        ) from None


def _limit(status: int, code: str, message: str, name: str, value: float, fix: str, **more: Any) -> ApiError:
    return ApiError(status, code, message, fix=fix, fields={"limit": {"name": name, "value": value}, **more})


def _where(path: tuple[str | int, ...]) -> str:
    text = "body"
    for part in path[: MAX_DEPTH + 1]:
        text += f"[{part}]" if isinstance(part, int) else f".{str(part)[:64]}"
    return text


class _Bad:
    """A number the JSON reader set aside (the walk reports it with its place in the body)."""

    __slots__ = ("problem",)

    def __init__(self, problem: str) -> None:
        self.problem = problem


def _constant(name: str) -> _Bad:
    return _Bad(f"{name} is not a finite number (JSON has no NaN or Infinity)")


def _float(text: str) -> float | _Bad:
    if len(text) <= 24:
        value = float(text)
        if value == 0 or 1e-300 <= abs(value) < 1e300:
            return value
    problem = number_problem(text)
    return _Bad(problem) if problem is not None else float(text)


def _int(text: str) -> int | _Bad:
    if len(text) <= 18:
        return int(text)
    if len(text) > MAX_NUMBER_CHARS:
        return _Bad(f"a number written with {len(text)} characters is over the {MAX_NUMBER_CHARS}-character limit")
    problem = number_problem(text)
    return _Bad(problem) if problem is not None else int(text)


def check_tree(data: Any) -> None:
    """Refuse a parsed body deeper than ``MAX_DEPTH``, with more than ``MAX_NODES`` values or a bad number."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    nodes = 1
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise too_deep(_where(path))
        if isinstance(value, dict | list | tuple):
            nodes += 2 * len(value) if isinstance(value, dict) else len(value)  # a key is a value too
            if nodes > MAX_NODES:
                raise too_many()
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend((v, (*path, k)) for k, v in items)
            continue
        problem = value.problem if isinstance(value, _Bad) else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            problem = number_problem(value)
        if problem is not None:
            raise ApiError(
                422,
                "invalid_number",
                f"{_where(path)}: {NUMBER_RULE}",
                fix='write the number as a finite decimal such as 0.5, 24 or "1e-8"',
                fields={"rule": NUMBER_RULE, "value": problem, "loc": ["body", *(str(p)[:64] for p in path)]},
            )


def too_many() -> ApiError:
    """The refusal of a body with more than ``MAX_NODES`` values (commas and colons count before parsing)."""
    return _limit(
        422,
        "body_too_complex",
        f"the body holds more than {MAX_NODES} values",
        "max_values",
        MAX_NODES,
        "send fewer keys or values (split the request)",
    )


def too_deep(where: str) -> ApiError:
    """The refusal of a body nested deeper than ``MAX_DEPTH``."""
    return _limit(
        422,
        "body_too_deep",
        f"the body nests lists and objects more than {MAX_DEPTH} levels deep (at {where[:300]})",
        "max_depth",
        MAX_DEPTH,
        "flatten the body: a release request nests 4 levels",
    )


def read_json(raw: bytes) -> Any:
    """A JSON body within the limits (``check_tree``), or an ``ApiError`` naming the limit or the syntax error."""
    if raw.count(b",") + raw.count(b":") > MAX_NODES:  # an upper bound on the values, counted before parsing
        raise too_many()
    try:
        data = json.loads(raw, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except RecursionError:
        raise too_deep("body") from None
    except json.JSONDecodeError as exc:
        raise ApiError(
            400,
            "invalid_json",
            f"the body is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
            fix="send one JSON object (Content-Type: application/json)",
        ) from None
    except ValueError:  # undecodable bytes (UnicodeDecodeError) and other unreadable text
        raise ApiError(400, "invalid_json", "the body is not UTF-8 JSON text", fix="send UTF-8 encoded JSON") from None
    check_tree(data)
    return data


def load_yaml(raw: bytes) -> Any:
    """A YAML body within the limits: size, then depth, values and numbers as its events arrive."""
    if len(raw) > MAX_YAML_BYTES:
        raise _limit(
            413, "yaml_too_large", f"a YAML body is at most {MAX_YAML_BYTES} bytes", "max_yaml_bytes", MAX_YAML_BYTES,
            _JSON_FIX,
        )  # fmt: skip
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError("a YAML body must be UTF-8 text", "undecodable bytes", "send UTF-8") from None
    try:
        data = read_limited_yaml(text, max_depth=MAX_DEPTH, max_values=MAX_NODES)
    except ImportError:  # pragma: no cover - depends on the installed extras
        raise ApiError(415, "yaml_unavailable", "YAML bodies need PyYAML", fix="send JSON to /v1/releases") from None
    except YamlLimitError as exc:
        raise _yaml_refusal(exc.violation) from None
    check_tree(data)
    return data


def _yaml_refusal(violation: YamlViolation) -> ApiError | UsageError:
    """The service's words for a refused YAML body (the JSON error of the limit it broke)."""
    if violation.kind == "anchor":
        return UsageError("YAML anchors and aliases are not accepted", "&/*", "write the values out")
    if violation.kind == "depth":
        return too_deep("body" if violation.line is None else f"line {violation.line}")
    if violation.kind == "number":
        return ApiError(
            422,
            "invalid_number",
            f"line {violation.line}: {NUMBER_RULE}",
            fix='write the number as a finite decimal such as 0.5, 24 or "1e-8"',
            fields={"rule": NUMBER_RULE, "value": f"a number written with {violation.chars} characters"},
        )
    if violation.kind == "values":
        return too_many()
    where = f" at line {violation.line}, column {violation.column}" if violation.line is not None else ""
    return UsageError(f"the body is not valid YAML{where}", "YAML", "fix the YAML syntax")


def _is_json(headers: list[tuple[bytes, bytes]]) -> bool:
    """FastAPI reads a body as JSON when it has no Content-Type or a JSON one (``*/json``, ``*/*+json``)."""
    for key, value in headers:
        if key.lower() == b"content-type":
            media = value.decode("latin-1").partition(";")[0].strip().lower()
            subtype = media.partition("/")[2]
            return subtype == "json" or subtype.endswith("+json")
    return True


def read_json_body(raw: bytes, model: type[BaseModel] | None) -> None:
    """Read ``raw`` (``read_json``) and validate it as ``model``; a schema problem is the route's 422."""
    data = read_json(raw)
    if model is None:
        return
    try:
        model.model_validate(data)
    except ValidationError as exc:
        errors = [dict(e, loc=("body", *e.get("loc", ()))) for e in exc.errors(include_url=False)]
        document = validation_document(errors)["error"]
        raise ApiError(422, document.pop("code"), document.pop("message"), fields=document) from None


class BodyCheck:
    """Reads a JSON body of a ``/v1/`` route on a parser thread (``read_json``) before the application sees it.

    A body over a limit, or one that its route's model (``models``, by method and path) refuses, is
    answered here with the JSON error FastAPI would give; a body within them is handed on as it came,
    so FastAPI's own parse and validation on the event loop only ever see a bounded, valid body.
    ``skip`` holds paths that read their own bodies (the YAML route).
    """

    def __init__(
        self, app: ASGIApp, *, skip: frozenset[str], models: Mapping[tuple[str, str], type[BaseModel]]
    ) -> None:
        self._app = app
        self._skip = skip
        self._models = models

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] not in ("POST", "PUT", "PATCH", "DELETE")
            or not scope["path"].startswith("/v1/")
            or scope["path"] in self._skip
            or not _is_json(scope.get("headers", []))
        ):
            await self._app(scope, receive, send)
            return
        chunks: list[bytes] = []
        last: Message | None = None
        while True:
            message = await receive()
            if message["type"] != "http.request":
                last = message  # a disconnect: the application sees it as it came
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        raw = b"".join(chunks)
        if last is None and raw.strip():
            try:
                model = self._models.get((scope["method"], scope["path"]))
                if len(raw) <= INLINE_JSON_BYTES:
                    read_json_body(raw, model)
                else:
                    await off_loop(lambda: read_json_body(raw, model))
            except ApiError as exc:
                await api_error(exc)(scope, receive, send)
                return
        pending: list[Message] = [{"type": "http.request", "body": raw, "more_body": False}]
        if last is not None:
            pending.append(last)

        async def replay() -> Message:
            return pending.pop(0) if pending else await receive()

        await self._app(scope, replay, send)
