"""The fast lane for later streaming derender chunks: one pure-ASGI step in front of the app.

A later chunk (``stream_state`` set, no prompt ids, at most
:data:`~render_service.serving.app.INLINE_CHUNK_TOKENS` ids) is the call a stream makes once per
engine step, so its fixed cost sizes the CPU tier. Through the full stack it pays FastAPI's and
Starlette's middleware, routing, dependency solving and response classes, several times the
derender itself. The lane answers such a chunk directly, doing what that stack does for it and
nothing else: the API-key check (:class:`.auth.ApiKeyAuth`), the body-size limit, the parsed-body
limits (:func:`.limits.check_body`), the handler, the ``X-Request-Id`` and fingerprint headers,
the request/latency/in-flight/token metrics and the access log line (:mod:`.observe`).

Anything else, and any chunk whose handling raises (bad state, limits, validation, ...), goes to the
full app with the already-read body replayed, so every error answer, status and metric is exactly
the full stack's. The derender handlers are pure, so a retried failure has no side effect.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson
from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import metrics
from .auth import ApiKeyAuth
from .limits import BodyLimits, check_body, declared_over
from .observe import FINGERPRINT_HEADER, REQUEST_ID_HEADER, access_log, client_request_id, new_request_id

Chunk = Callable[[Any], bool]
Handler = Callable[[Any], Any]


class FastLane:
    """ASGI wrapper: later chunks on ``handlers``' paths answered here, the rest by ``app``.

    ``handlers`` maps a path to ``body -> JSON-ready result``; ``is_chunk(body)`` says whether a
    parsed body is a later small chunk; ``fingerprint()`` is the current fingerprint (``None``
    while loading: the lane then stays out of the way).
    """

    def __init__(self, app: ASGIApp, handlers: dict[str, Handler], is_chunk: Chunk,
                 limits: BodyLimits, max_body: int, api_keys: tuple[str, ...],
                 fingerprint: Callable[[], str | None]) -> None:
        self.app = app
        self.handlers = handlers
        self.is_chunk = is_chunk
        self.limits = limits
        self.max_body = max_body
        self.auth = ApiKeyAuth(app, api_keys) if api_keys else None
        self.fingerprint = fingerprint
        self._tallies: dict[str, metrics.AnswerTally] = {}
        self._fingerprint_bytes = ("", b"")

    def _tally(self, path: str) -> metrics.AnswerTally:
        tally = self._tallies.get(path)
        if tally is None:
            tally = self._tallies[path] = metrics.AnswerTally(path)
        return tally

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        handler = self.handlers.get(scope.get("path", "")) if scope["type"] == "http" else None
        fp = self.fingerprint() if handler is not None else None
        if handler is None or fp is None or scope.get("method") != "POST" or scope.get("root_path") \
                or declared_over(scope, self.max_body):
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        raw, stopped = await _read_body(receive, self.max_body)
        result = self._answer(scope, handler, raw) if stopped is None else None
        if result is None:
            await self.app(scope, _replay(raw, stopped, receive), send)
            return
        payload, tokens = result
        path = scope["path"]
        tally = self._tally(path)
        tally.started()
        given = client_request_id(scope)
        request_id = given or new_request_id()
        try:
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-length", str(len(payload)).encode()),
                (b"content-type", b"application/json"),
                (_REQUEST_ID, request_id.encode()),
                (_FINGERPRINT, self._encoded(fp)),
            ]})
            await send({"type": "http.response.body", "body": payload})
        finally:
            elapsed = time.perf_counter() - start
            tally.answered(elapsed, tokens)
            log_post(path, 200, request_id, elapsed)

    def _encoded(self, fingerprint: str) -> bytes:
        """``fingerprint`` as header bytes (encoded once: it changes only with a reload)."""
        last = self._fingerprint_bytes
        if last[0] != fingerprint:
            last = self._fingerprint_bytes = (fingerprint, fingerprint.encode())
        return last[1]

    def _answer(self, scope: Scope, handler: Handler, raw: bytes) -> tuple[bytes, int] | None:
        """The answer bytes and token count, or ``None`` to leave the request to the full app."""
        body = accepted_json(scope, raw, self.auth)
        try:
            if not self.is_chunk(body):
                return None
            check_body(body, self.limits)
            result = handler(body)
            # is_chunk checked the shape; a non-integer id would have failed the handler
            tokens = sum(len(c["token_ids"]) for c in body["generate_chunk"]["choices"])
            return _dumps(result), tokens
        except Exception:  # noqa: BLE001 - the full app answers every failure in its own shape
            return None


def _dumps(result: Any) -> bytes:
    """``result`` as JSON; plain ``orjson.dumps`` first (every key of a chunk answer is a string,
    and ``OPT_NON_STR_KEYS`` doubles the cost), the full app's non-string-key option otherwise
    (the same bytes)."""
    try:
        return orjson.dumps(result)
    except TypeError:
        return orjson.dumps(result, option=orjson.OPT_NON_STR_KEYS)


_REQUEST_ID, _FINGERPRINT = REQUEST_ID_HEADER.encode(), FINGERPRINT_HEADER.encode()
_WANTED = {b"authorization": "authorization", b"content-type": "content-type"}


def accepted_json(scope: Scope, raw: bytes, auth: ApiKeyAuth | None, guarded: bool = True) -> Any:
    """The parsed JSON body of a request a lane may answer, or ``None`` to leave it to the full app
    (whose middleware answers it in its own shape): a missing or wrong API key where ``auth`` is
    set and the path is ``guarded``, a media type other than JSON, or bad JSON."""
    headers = _wanted_headers(scope)
    if auth is not None and guarded and not auth.authorized(headers):
        return None
    ctype = headers.get("content-type", "")
    if ctype and not ctype.split(";")[0].strip().lower().endswith("json"):
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def log_post(path: str, status: int, request_id: str, elapsed: float) -> None:
    """The access-log line of a ``POST`` a lane answered (the fields :mod:`.observe` logs)."""
    if access_log.isEnabledFor(20):  # INFO
        access_log.info("%s %s %d", "POST", path, status, extra={
            "request_id": request_id, "method": "POST", "path": path, "status": status,
            "duration_ms": round(elapsed * 1000, 3)})


def whole_app(app: FastAPI) -> ASGIApp:
    """``app``'s own FastAPI entry (its middleware stack and routes), bypassing :class:`LaneApp`'s
    lanes: where a lane sends what it leaves."""

    async def entry(scope: Scope, receive: Receive, send: Send) -> None:
        await FastAPI.__call__(app, scope, receive, send)

    return entry


def _wanted_headers(scope: Scope) -> dict[str, str]:
    """The ``Authorization`` and ``Content-Type`` request headers (first of each, as Starlette's
    ``Headers.get``), read in one pass over the raw list without building a ``Headers``."""
    found: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        key = _WANTED.get(name)
        if key is not None and key not in found:
            found[key] = value.decode("latin-1")
    return found


async def _read_body(receive: Receive, limit: int) -> tuple[bytes, Message | None]:
    """The request body read up to ``limit`` bytes, and ``None`` when it is complete, else the
    message that stopped the read (a chunk past the limit, or a disconnect), to be replayed."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(parts), message
        chunk = message.get("body", b"")
        size += len(chunk)
        if limit > 0 and size > limit:
            return b"".join(parts), message
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts), None


def _replay(raw: bytes, stopped: Message | None, receive: Receive) -> Receive:
    """A ``receive`` that yields the already-read bytes (and the message that stopped the read),
    then the original stream."""
    queue: list[Message] = [{"type": "http.request", "body": raw, "more_body": stopped is not None}]
    if stopped is not None:
        queue.append(stopped)

    async def replayed() -> Message:
        if queue:
            return queue.pop(0)
        return await receive()

    return replayed


class LaneApp(FastAPI):
    """A FastAPI app whose ASGI entry hands the fast lane's paths to its :class:`FastLane`
    (:func:`install`) before FastAPI's own entry (telemetry checks, Starlette's app scope and
    middleware stack), which serves everything else and whatever the lane leaves."""

    lane: FastLane | None = None
    render_lane: Any = None  # a render_lane.RenderLane (that module imports this one)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        lane = self.lane
        if lane is not None and scope["type"] == "http" and scope["path"] in lane.handlers:
            await lane(scope, receive, send)
            return
        render = self.render_lane
        if render is not None and scope["type"] == "http" and scope["path"] in render.paths:
            await render(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def install(app: LaneApp, paths: dict[str, Callable[[Any, Any, Any], Any]], settings: Any,
            limits: BodyLimits, is_chunk: Chunk) -> None:
    """Give ``app`` a :class:`FastLane` for the derender ``paths``
    (``path -> handler(bundle, settings, body)``); the lane leaves to the whole app (FastAPI's
    entry and its middleware stack) whatever it does not answer."""

    # the app state's own dict, read directly: ``app.state.x`` goes through Starlette's
    # ``State.__getattr__`` (a Python call, ~1.3 µs), twice per chunk otherwise
    values: dict[str, Any] = app.state._state

    def bound(handler: Callable[[Any, Any, Any], Any]) -> Handler:
        return lambda body: handler(values["bundle"], settings, body)

    handlers = {path: bound(h) for path, h in paths.items()}
    app.lane = FastLane(whole_app(app), handlers, is_chunk, limits, settings.max_request_body_bytes,
                        settings.api_keys, lambda: values.get("fingerprint"))
