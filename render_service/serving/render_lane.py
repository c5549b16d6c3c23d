"""The render lane: one pure-ASGI step for ``POST /v1/*/render`` in front of the app.

A render's own work is about a millisecond; through the whole stack it paid as much again for
FastAPI's and Starlette's entry, the three middleware (:mod:`.observe`, :mod:`.auth`,
:mod:`.limits`), routing, dependency solving and the request/response classes. The lane does for
a render what that stack does and nothing else, in the same order: the request id
(``X-Request-Id`` or a fresh one), the API-key check, the body-size limit, the media-type check
and the orjson parse, :func:`.limits.check_body`, the body's ``request_id``, the handler on the
worker pool, the answer (the app's own ``answer(result)``: the same bytes and headers), the
``X-Request-Id`` and fingerprint headers, the request/latency/in-flight/token metrics (a 200
answer's kept as plain numbers, :class:`.metrics.AnswerTally`, as the chunk lane's) and the
access-log line.

An error the handler (or the pool, or the body limits) raises is answered by the app's own
exception handler for its class (``app.exception_handlers``), so its status and body are the full
stack's. A request the lane does not take on (not ``POST``, a ``root_path``, still loading, a
missing key, a body over the limit or cut short, another media type, bad JSON) and an exception no
specific handler claims (a bug: the full stack logs it and answers 500) go to the full app, the
already-read body replayed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import anyio

from ..render.multimodal import NeedsWorker, cached_only, loading_only, reusing_plan, state_for
from . import metrics
from .auth import GUARDED_PREFIXES, ApiKeyAuth
from .fastlane import LaneApp, _read_body, _replay, accepted_json, log_post, whole_app
from .limits import BodyLimits, WorkerPool, check_body, declared_over
from .media_body import PiecesResponse, corked
from .observe import FINGERPRINT_HEADER, REQUEST_ID_HEADER, client_request_id, new_request_id

#: ``(path, body, pool, body bytes) -> (result, token count)``, awaited: runs the render handler.
Run = Callable[[str, Any, WorkerPool, int], Any]

INLINE_RENDER_BYTES = 16_384
"""A render of a text-only model whose body is at most this many bytes runs on the event loop:
its work (about 0.1 ms for a short chat) costs less than the hand-off to a worker thread and
back (~0.08 ms of CPU). Larger bodies run on the worker pool (up to :data:`INLINE_SLOT_BYTES`
only when no slot is free), and so does a vision-language model's render of media not cached."""
INLINE_SLOT_BYTES = 65_536
"""A text-only render whose body is at most this many bytes (a 9k-token conversation: 59 KB, about
1.2 ms of work) also runs on the event loop, but only holding a free worker slot
(:meth:`.limits.WorkerPool.run_here`), so the pool's thread count, queue and 503s bound it as
before: the hand-off to a thread and back cost ~0.3 ms of CPU per chat_9k render on this
2-core machine under load (``python -m benchmarks.run --only hotpaths``), a quarter of the render.
A vision-language model's render of such a body runs there too, but only while its media is in
the processed-media cache (a conversation's later turn: a lookup); an item to fetch, read or
process raises :class:`NeedsWorker` before that work, and the render runs again on the pool."""
Answer = Callable[[Any], Response]
LOADING_THREADS = 64
"""I/O threads per process that load media a render must fetch or read (:func:`_loading`), outside
the worker pool: a media server that answers slowly (or never, up to ``--media-fetch-timeout``)
holds one of these, not a ``--renderer-threads`` slot; more loads than this wait for one
without holding a thread."""

_REQUEST_ID = REQUEST_ID_HEADER.encode()
_FINGERPRINT = FINGERPRINT_HEADER.encode()


class RenderLane:
    """ASGI step answering the render ``paths`` (see the module docstring); the rest goes to ``app``.

    ``run(path, body, pool, body bytes)`` is awaited for the result and its token count; ``answer(result)``
    builds the 200 response; ``state`` is the app's state (``fingerprint``, ``pool``);
    ``exception_handlers`` the app's handler table (class → ``handler(request, exc)``).
    """

    def __init__(self, app: ASGIApp, paths: frozenset[str], run: Run, answer: Answer,
                 state: Any, exception_handlers: dict[Any, Any], limits: BodyLimits,
                 max_body: int, api_keys: tuple[str, ...]) -> None:
        self.app = app
        self.paths = paths
        self.run = run
        self.answer = answer
        self.state = state
        self.exception_handlers = exception_handlers
        self.limits = limits
        self.max_body = max_body
        self.auth = ApiKeyAuth(app, api_keys) if api_keys else None
        self._tallies: dict[str, metrics.AnswerTally] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        fp = self.state.fingerprint
        if fp is None or scope.get("method") != "POST" or scope.get("root_path") \
                or declared_over(scope, self.max_body):
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        raw, stopped = await _read_body(receive, self.max_body)
        body = self._parsed(scope, raw) if stopped is None else None
        if body is None:
            await self.app(scope, _replay(raw, stopped, receive), send)
            return
        path = scope["path"]
        given = client_request_id(scope)
        request_id = given or new_request_id()
        tally = self._tally(path)
        tally.started()
        status, tokens, replayed = 500, 0, False
        try:
            try:
                response, tokens = await self._render(path, body, given is not None, request_id, len(raw))
            except Exception as exc:  # noqa: BLE001 - answered by the app's handler for its class
                handler = self._handler_for(exc)
                if handler is None:  # a bug: the full stack logs it and answers 500, as without the lane
                    replayed = True
                    await self.app(scope, _replay(raw, None, receive), send)
                    return
                response = await handler(Request(scope, receive), exc)
            status = response.status_code
            extra = [(_REQUEST_ID, request_id.encode()), (_FINGERPRINT, fp.encode())]
            if type(response) is Response and response.background is None:
                # what Response.__call__ sends (no background task), with the two headers added
                await send({"type": "http.response.start", "status": status,
                            "headers": [*response.raw_headers, *extra]})
                await send({"type": "http.response.body", "body": response.body})
            else:
                async def with_headers(message: Message) -> None:
                    if message["type"] == "http.response.start":
                        message = {**message, "headers": [*message.get("headers", ()), *extra]}
                    await send(message)

                if isinstance(response, PiecesResponse):
                    with corked(send):
                        await response(scope, receive, with_headers)
                else:
                    await response(scope, receive, with_headers)
        finally:
            elapsed = time.perf_counter() - start
            if status == 200 and not replayed:
                tally.answered(elapsed, tokens)
            else:
                tally.left()
                if not replayed:
                    metrics.REQUESTS.labels(path, "POST", str(status)).inc()
                    metrics.LATENCY.labels(path, "POST", str(status)).observe(elapsed)
            if not replayed:
                log_post(path, status, request_id, elapsed)

    def _tally(self, path: str) -> metrics.AnswerTally:
        """The 200 answers' metrics of ``path`` (``tokens_rendered``), made on first use."""
        tally = self._tallies.get(path)
        if tally is None:
            tally = self._tallies[path] = metrics.AnswerTally(path, metrics.TOKENS_RENDERED)
        return tally

    def _parsed(self, scope: Scope, raw: bytes) -> Any:
        """The parsed body, or ``None`` when the full app must answer (key, media type, JSON)."""
        return accepted_json(scope, raw, self.auth, scope["path"].startswith(GUARDED_PREFIXES))

    async def _render(self, path: str, body: Any, id_from_client: bool, request_id: str,
                      size: int) -> tuple[Response, int]:
        """What the app's render route does with a parsed body (see ``create_app``'s ``post``):
        the response and the token count."""
        check_body(body, self.limits)
        if isinstance(body, dict) and (id_from_client or not body.get("request_id")):
            fresh = not id_from_client and path == "/v1/responses/render"
            body["request_id"] = ("resp_" if fresh else "") + request_id
        result, tokens = await self.run(path, body, self.state.pool, size)
        return self.answer(result), tokens

    def _handler_for(self, exc: Exception) -> Any:
        """The app's handler for ``exc``'s nearest class, ``None`` for the catch-all ``Exception``."""
        for cls in type(exc).__mro__:
            if cls is Exception:
                return None
            handler = self.exception_handlers.get(cls)
            if handler is not None:
                return handler
        return None


def _from_cache(call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)`` with media served only from the processed-media cache
    (:func:`~render_service.render.multimodal.cached_only`: else :class:`NeedsWorker`)."""
    with cached_only():
        return call(*args)


def _loading(call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)`` loading its media and stopping there
    (:func:`~render_service.render.multimodal.loading_only`: :class:`NeedsWorker` with the plan)."""
    with loading_only():
        return call(*args)


def _with_plan(plan: Any, call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)`` reusing the media parts a refused :func:`_from_cache` attempt planned
    (:func:`~render_service.render.multimodal.reusing_plan`: its decoded data URLs and keys)."""
    with reusing_plan(plan):
        return call(*args)


def install(app: LaneApp, handlers: dict[str, Callable[[Any, Any, Any], Any]], settings: Any,
            limits: BodyLimits, call: Callable[..., Any], answer: Answer) -> None:
    """Give the :class:`~.fastlane.LaneApp` ``app`` a :class:`RenderLane` for the render
    ``handlers`` (``path -> handler(bundle, settings, body)``), each run on the app's pool as
    ``call(handler, bundle, settings, body, True)`` (the app's ``call_counting``)."""

    loader: anyio.CapacityLimiter | None = None  # made on the event loop, at the first load

    async def run(path: str, body: Any, pool: WorkerPool, size: int) -> Any:
        nonlocal loader
        bundle = app.state.bundle
        plan, load = None, False
        if size <= INLINE_SLOT_BYTES:
            if state_for(bundle, settings) is None:
                if size <= INLINE_RENDER_BYTES:
                    return call(handlers[path], bundle, settings, body, True)
                ran, result = pool.run_here(call, handlers[path], bundle, settings, body, True)
            else:
                try:
                    ran, result = pool.run_here(_from_cache, call, handlers[path], bundle, settings,
                                                body, True)
                except NeedsWorker as refused:  # media to fetch or process: a worker renders it
                    ran, plan, load = False, refused.plan, refused.must_load
                else:
                    load = not ran  # no slot free at once: load its media off the pool first
            if ran:
                return result
        elif state_for(bundle, settings) is not None:
            load = True  # a large vision render (over INLINE_SLOT_BYTES): its media loads off the pool
        if load:  # fetch / read on an I/O thread first, so a slow media server holds no worker slot
            if loader is None:
                loader = anyio.CapacityLimiter(LOADING_THREADS)
            try:
                return await anyio.to_thread.run_sync(_loading, call, handlers[path], bundle, settings,
                                                      body, True, limiter=loader)
            except NeedsWorker as loaded:
                plan = loaded.plan
        if plan is not None:  # the parts the attempt loaded and keyed are not loaded again
            return await pool.run(_with_plan, plan, call, handlers[path], bundle, settings, body, True)
        return await pool.run(call, handlers[path], bundle, settings, body, True)

    app.render_lane = RenderLane(whole_app(app), frozenset(handlers), run, answer, app.state,
                                 app.exception_handlers, limits, settings.max_request_body_bytes,
                                 settings.api_keys)
