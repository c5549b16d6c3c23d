"""Gateway mode: plain OpenAI ``POST /v1/chat/completions`` and ``POST /v1/completions``, the
Anthropic ``POST /v1/messages`` and OpenAI ``POST /v1/responses`` in front of tokens-only engines
(``render-service serve ... --engine-url URL [--prefill-url URL]``).

Part of the serving wing (may import everything of ours). :func:`install_gateway` adds the two
routes to the app; :mod:`.hops` drives render → prefill → decode → derender, :mod:`.engines`
makes the engine calls, :mod:`.metrics` holds the gateway's Prometheus series.

Responses: JSON (``stream`` false) or SSE (``data: {chunk}`` events, ``data: [DONE]``) with the
chunks streaming derender produces. Errors before the stream starts (up to and including the
engine's first chunk) are plain HTTP errors in the upstream shape (engine down 502, timeout 504,
engine 400/413/422 → 400 with its message, other engine 4xx 502: see :mod:`.engines`); after it
started, an SSE ``data: {"error": ...}`` event then ``data: [DONE]`` (as upstream). Messages and
Responses stream named events (``event: <type>``, no ``[DONE]``) and end an error with an
``event: error``.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.types import Receive, Scope, Send

from ...errors import InvalidRequest
from ...settings import Settings
from .engines import Engines, EngineTimeout
from .hops import GatewayStream, abort_unanswered, derender_batch, generate_all, prepare

__all__ = ["install_gateway"]

ReadBody = Callable[[Request], Awaitable[Any]]


class EventStream(Response):
    """SSE response of a :class:`GatewayStream` that watches for the client going away while it
    waits on the engine (not only when a write fails), then closes the stream either way."""

    media_type = "text/event-stream"

    def __init__(self, stream: GatewayStream, headers: dict[str, str] | None = None) -> None:
        self.stream = stream
        self.status_code = 200
        self.background = None
        self.init_headers({"cache-control": "no-cache", **(headers or {})})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        disconnected = False
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        try:
            async with anyio.create_task_group() as tg:

                async def watch() -> None:
                    nonlocal disconnected
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    disconnected = True
                    tg.cancel_scope.cancel()

                async def pump() -> None:
                    nonlocal disconnected
                    try:
                        async for data in self.stream.events():
                            await send({"type": "http.response.body", "body": data, "more_body": True})
                        await send({"type": "http.response.body", "body": b"", "more_body": False})
                    except OSError:  # the client went away during a write
                        disconnected = True
                    tg.cancel_scope.cancel()

                tg.start_soon(watch)
                tg.start_soon(pump)
        finally:
            with anyio.CancelScope(shield=True):
                await self.stream.close(disconnected)


async def _unless_disconnected(request: Request, work: Awaitable[Any]) -> tuple[bool, Any]:
    """Run ``work`` unless the client disconnects first: ``(True, result)`` or ``(False, None)``."""
    task = asyncio.ensure_future(work)

    async def gone() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.ensure_future(gone())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if task.done():
        return True, task.result()
    task.cancel()  # it still cleans up (aborts, closes): held until then (the loop only weakly)
    _cleaning.add(task)
    task.add_done_callback(_cleaning.discard)
    return False, None


_cleaning: set[asyncio.Future[Any]] = set()


def install_gateway(app: FastAPI, settings: Settings, read_body: ReadBody,
                    respond: Callable[[Any], Response]) -> None:
    """Add ``/v1/chat/completions``, ``/v1/completions``, ``/v1/messages`` (Anthropic) and
    ``/v1/responses`` (OpenAI Responses), and the engine client's lifetime.

    ``read_body(request)`` parses and bounds a JSON body (400/413 as the other routes);
    ``respond(value)`` makes the JSON response.
    """
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app_: Any):  # type: ignore[no-untyped-def]
        async with inner(app_) as state:
            app_.state.engines = Engines(settings)
            # The model, tables and app built at start-up live as long as the process: move them
            # out of the collector's reach, or each full collection walks them all, which a
            # stream's per-event allocations trigger every few hundred events (halved the
            # in-memory derender step; README "Gateway", measured).
            gc.freeze()
            try:
                yield state
            finally:
                await app_.state.engines.aclose()

    app.router.lifespan_context = lifespan

    async def handle(request: Request, api: str) -> Response:
        arrived = time.perf_counter()
        body = await read_body(request)
        if not isinstance(body, dict):
            raise InvalidRequest("request body must be a JSON object")
        if request.state.request_id_from_client or not isinstance(body.get("request_id"), str):
            body["request_id"] = request.state.request_id
        state = request.app.state
        engines: Engines = state.engines
        legs = await state.pool.run(prepare, state.bundle, settings, body, api)
        endpoint = request.url.path
        if body.get("stream") is True:
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            stream = GatewayStream(engines, legs, endpoint, arrived, include_usage, api)
            opened, _ = await _unless_disconnected(request, stream.open())
            if not opened:  # gone while waiting for the first chunk: open() aborts and closes
                return Response(status_code=499)
            return EventStream(stream)
        try:
            finished, results = await _unless_disconnected(request, generate_all(engines, legs))
        except EngineTimeout:  # the engine may still run it: as for a stream, abort it
            abort_unanswered(engines, legs, "timeout")
            raise
        if not finished:
            abort_unanswered(engines, legs, "client_disconnect")
            return Response(status_code=499)
        result = await state.pool.run(derender_batch, state.bundle, settings, body, legs, results, api)
        return respond(result)

    def route(path: str, api: str) -> None:
        async def endpoint(request: Request) -> Response:
            return await handle(request, api)

        app.add_api_route(path, endpoint, methods=["POST"], name=path)

    route("/v1/chat/completions", "chat")
    route("/v1/completions", "completions")
    route("/v1/messages", "messages")
    route("/v1/responses", "responses")
