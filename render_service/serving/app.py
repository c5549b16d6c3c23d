"""HTTP wiring: ``create_app(settings) -> FastAPI``. Routes only validate, call the core, return.

Every route body is parsed with orjson and handed as a plain ``dict`` to a pure core function
(``render.py``, ``derender.py``) that validates it against its pydantic wire model and returns
a JSON-ready value. CPU work runs in a thread pool, off the event loop. Errors of every kind are
mapped once, here, to the upstream body ``{"error": {"message", "type", "param", "code"}}``:
pydantic validation → 400 ``"Bad Request"`` (never 422), our own errors → their status, anything
unexpected → 500 ``"InternalServerError"``, ``NotImplementedError`` → 501 (as upstream).

Operations (see the README, "Operations"): middleware for the request id, metrics and access log
(:mod:`.observe`), API keys (:mod:`.auth`) and the body size limit (:mod:`.limits`); parsed bodies
are bounded by :func:`.limits.check_body` before the handler runs; handlers run on a bounded
:class:`.limits.WorkerPool`; ``/ready``, ``/metrics`` and the configuration fingerprint (header
``X-Render-Config-Fingerprint`` and a ``/v1/models`` card field).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from .. import derender, render
from ..derender.pipeline import pipeline_for
from ..errors import (MalformedBody, RenderServiceError, RequestErrors, error_body, to_error_body,
                      union_errors)
from ..fingerprint import config_fingerprint
from ..models import ModelBundle, load_bundle
from ..render.multimodal.serde import json_default
from ..settings import Settings
from . import fastlane, metrics, render_lane
from . import openapi as openapi_bodies
from .auth import ApiKeyAuth, ensure_stream_state_keys
from .lifecycle import install_drain_handler, install_startup_exit, settings_from_env
from .limits import BodyLimits, BodySizeLimit, WorkerPool, check_body
from .media_body import media_response
from .observe import Observe, is_minted

logger = logging.getLogger(__name__)

Handler = Callable[[ModelBundle, Settings, Any], Any]


def json_response(content: Any, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    """Serialise with orjson (non-str dict keys allowed); an answer nested deeper than orjson
    writes (254 levels: a request's own tools or template kwargs echoed in ``parse_context``) is
    written by the standard library instead, so it is answered, not a 500."""
    try:
        body = orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS, default=json_default)
    except orjson.JSONEncodeError:
        body = json.dumps(content, ensure_ascii=False, separators=(",", ":"), default=json_default).encode()
    return Response(body, status_code=status_code, media_type="application/json", headers=headers)


#: pydantic-core's schema-kind names that appear in an error's ``loc`` but name no request field
#: (union branches and validator wrappers); vLLM 0.33's validation handler drops them, and every
#: segment holding a bracket (``function-wrap[...]``), from ``loc`` and ``param``.
_INTERNAL_LOC = frozenset((
    "function-wrap function-after function-before function-plain json-or-python lax-or-strict chain "
    "default nullable tagged-union union call arguments is-instance is-subclass callable str int "
    "float bool bytes bytearray list tuple dict set frozenset complex none nonetype"
).split())
_BRACKETS = re.compile(r"[\[\]{}()]")
_MAX_ERRORS, _MAX_INPUT, _MAX_ERROR = 10, 200, 1000


def clean_loc(loc: tuple[Any, ...]) -> str:
    """``loc`` as vLLM 0.33's ``param``: dotted, internal schema markers dropped (all of it if
    only markers are left)."""
    parts = [str(p) for p in loc if not (_BRACKETS.search(str(p)) or str(p).lower() in _INTERNAL_LOC)]
    return ".".join(parts or [str(p) for p in loc])


def _summary(value: Any) -> Any:
    """An error's ``input`` as vLLM 0.33 prints it: strings cut at 200 characters, containers as
    ``<list of N items>``, bytes as ``<bytes of N bytes>``, anything else as its ``str``."""
    if isinstance(value, str):
        return value if len(value) <= _MAX_INPUT else value[:_MAX_INPUT] + "...[truncated]"
    if isinstance(value, (bytes, bytearray)):
        return f"<{type(value).__name__} of {len(value)} bytes>"
    if isinstance(value, dict) and is_minted(value.get("request_id")):
        # a render body: the route added its ``request_id``; vLLM's error counts the body as sent
        return f"<dict of {len(value) - 1} items>"
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        return f"<{type(value).__name__} of {len(value)} items>"
    try:
        text = str(value)
    except ValueError:  # an int too long for str()
        return f"<{type(value).__name__}>"
    return text if len(text) <= _MAX_INPUT else text[:_MAX_INPUT] + "...[truncated]"


def _one_error(err: dict[str, Any]) -> str:
    err = dict(err)
    if "input" in err:
        err["input"] = _summary(err["input"])
    err["loc"] = clean_loc(tuple(err.get("loc", ())))
    text = str(err)
    return text if len(text) <= _MAX_ERROR else text[:_MAX_ERROR] + "...[truncated]"


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+>")
_TRACE = re.compile(r'\n?\s*File "[^"]+", line \d+, in \S+(\n\s+.*)?')
_SYSTEM_PATH = re.compile(r"/(?:home|usr|opt|var|tmp|root|lib|mnt|srv)(?:/[\w.\-]+)+")
_FILE_PATH = re.compile(r"(?:/[\w\-]+)+/[\w\-]+\.\w+")


def sanitize(message: str) -> str:
    """Strip object addresses, traceback lines and file paths (``<path>``), as vLLM 0.33 does to
    the messages of its validation errors."""
    for pattern, repl in ((_ADDRESS, ">"), (_TRACE, ""), (_SYSTEM_PATH, "<path>"), (_FILE_PATH, "<path>")):
        message = pattern.sub(repl, message)
    return message.strip()


def validation_message(
    exc: ValidationError | RequestValidationError | RequestErrors,
) -> tuple[str, str | None]:
    """The message and ``param`` of a 400 for pydantic errors, as vLLM 0.33's validation handler
    writes them (``vllm/entrypoints/serve/exception_handling/handlers/validation.py``)::

        N validation error(s):
          {'type': 'int_parsing', 'loc': 'body.max_tokens', 'msg': ..., 'input': 'x'}
          ...and M more errors

    Each error is pydantic's dict (``type``, ``loc``, ``msg``, ``input``, ``ctx`` when present, no
    ``url``) with ``loc`` cleaned by :func:`clean_loc` and ``input`` summarised; at most 10 are
    listed, each cut at 1,000 characters. ``param`` is the first error's cleaned ``loc``. Bodies
    validated from the parsed dict get the ``body`` prefix FastAPI's own errors carry.
    """
    if isinstance(exc, RequestErrors):
        errors = exc.errors
    elif isinstance(exc, RequestValidationError):
        errors = [dict(e) for e in exc.errors()]
    else:
        errors = union_errors(exc).errors
    if not errors:
        return "Validation error", None
    noun = "error" if len(errors) == 1 else "errors"
    lines = [f"{len(errors)} validation {noun}:"]
    lines += [f"  {_one_error(e)}" for e in errors[:_MAX_ERRORS]]
    if len(errors) > _MAX_ERRORS:
        lines.append(f"  ...and {len(errors) - _MAX_ERRORS} more {noun}")
    return sanitize("\n".join(lines)), clean_loc(tuple(errors[0].get("loc", ())))


async def read_json(request: Request) -> Any:
    """Parse the body as JSON; wrong media type or bad JSON → 400 in the upstream shape."""
    ctype = request.headers.get("content-type", "")
    if ctype and not ctype.split(";")[0].strip().lower().endswith("json"):
        raise MalformedBody(
            "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed"
        )
    raw = await request.body()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        try:  # FastAPI's error (vLLM 0.33): the standard library's reason and character offset
            json.loads(raw)
        except json.JSONDecodeError as std:
            raise RequestValidationError([{
                "type": "json_invalid", "loc": ("body", std.pos), "msg": "JSON decode error",
                "input": {}, "ctx": {"error": std.msg}}]) from None
        except (ValueError, RecursionError):
            # UnicodeDecodeError, or an integer of more than 4,300 digits (int's conversion limit)
            pass
        # valid only to the standard library (NaN, Infinity, integers past 64 bits): not JSON
        # orjson reads, refused as before
        raise MalformedBody(f"1 validation error:\n  JSON decode error: {exc}") from None


def create_app(settings: Settings, bundle: ModelBundle | None = None) -> FastAPI:
    """Build the app. ``bundle`` may be passed pre-loaded (tests); else it loads at start-up."""

    settings = ensure_stream_state_keys(settings)
    limits = BodyLimits.from_settings(settings)

    async def start_up(app: FastAPI) -> None:
        if getattr(app.state, "bundle", None) is None:
            app.state.bundle = await run_in_threadpool(load_bundle, settings)
        # Build the derender pipeline now: an unknown parser name fails start-up (not every
        # request), and the first derender does not pay for the parser and detokenizer tables.
        await run_in_threadpool(pipeline_for, app.state.bundle, settings)
        encoder = app.state.bundle.prompt_encoder
        if encoder is not None and hasattr(encoder, "observer"):
            cache = metrics.register_cache("prompt_prefix")

            def observe_cache(hits: int, misses: int) -> None:
                cache.hit(hits)
                cache.miss(misses)

            encoder.observer = observe_cache
        install_multimodal_cache_metrics(app.state.bundle, settings)
        app.state.fingerprint = config_fingerprint(app.state.bundle, settings)
        app.state.pool = new_pool(settings)
        metrics.forget_dead_processes()

    @asynccontextmanager
    async def lifespan(app: FastAPI):  # type: ignore[no-untyped-def]
        starting = install_startup_exit()  # a SIGTERM before ready: exit now, not after the load
        try:
            await start_up(app)
        finally:
            starting()
        restore = install_drain_handler(app.state, settings.shutdown_delay)
        app.state.ready = True
        yield
        app.state.ready = False
        restore()

    app = fastlane.LaneApp(title="render-service", lifespan=lifespan)
    app.state.settings = settings
    app.state.bundle = bundle
    app.state.ready = False
    app.state.draining = False
    app.state.fingerprint = None
    app.state.started = int(time.time())
    add_middleware(app, settings)
    body_paths: list[str] = []  # the POST routes' bodies: described when /openapi.json is first built
    openapi_bodies.install(app, body_paths)

    @app.exception_handler(RenderServiceError)
    async def _service_error(_: Request, exc: RenderServiceError) -> Response:
        return json_response(to_error_body(exc), exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def _request_validation(_: Request, exc: RequestValidationError) -> Response:
        message, param = validation_message(exc)
        return json_response(error_body(message, "Bad Request", 400, param), 400)

    @app.exception_handler(RequestErrors)
    @app.exception_handler(ValidationError)
    async def _validation(_: Request, exc: ValidationError | RequestErrors) -> Response:
        message, param = validation_message(exc)
        return json_response(error_body(message, "Bad Request", 400, param), 400)

    @app.exception_handler(StarletteHTTPException)
    async def _http_exception(_: Request, exc: StarletteHTTPException) -> Response:
        phrase = HTTPStatus(exc.status_code).phrase
        return json_response(error_body(str(exc.detail), phrase, exc.status_code), exc.status_code,
                             headers=getattr(exc, "headers", None))

    @app.exception_handler(NotImplementedError)
    async def _not_implemented(_: Request, exc: NotImplementedError) -> Response:
        return json_response(error_body(f"Not implemented: {exc}", "NotImplementedError", 501), 501)

    @app.exception_handler(RecursionError)
    async def _too_deep(_: Request, exc: RecursionError) -> Response:
        message = f"the input is nested too deeply to process ({exc})"
        return json_response(error_body(message, "BadRequestError", 400), 400)

    @app.exception_handler(ClientDisconnect)
    async def _client_gone(_: Request, exc: ClientDisconnect) -> Response:
        # the client closed the connection before sending its whole body: nobody to answer, and
        # not a server error (it was logged and counted as a 500 with two tracebacks)
        logger.info("client disconnected before sending the whole request body")
        return json_response(error_body("client disconnected before sending the whole request body",
                                        "Bad Request", 400), 400)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> Response:
        logger.exception("unhandled error")
        return json_response(error_body(f"{type(exc).__name__}: {exc}", "InternalServerError", 500), 500)

    def post(path: str, handler: Handler) -> None:
        rendering = path.endswith("/render") or path == "/tokenize"

        async def route(request: Request) -> Response:
            body = await read_json(request)
            check_body(body, limits)
            if path.endswith("/render") and isinstance(body, dict) and (
                    request.state.request_id_from_client or not body.get("request_id")):
                # upstream: X-Request-Id, else the body's request_id, else a fresh id is the base
                # id; the fresh one is the X-Request-Id we answer with, so header and body agree
                # (a Responses id is ``resp_<id>`` as vLLM's default, chat/completions prefix theirs)
                fresh = not request.state.request_id_from_client and path == "/v1/responses/render"
                body["request_id"] = ("resp_" if fresh else "") + request.state.request_id
            if not rendering and is_small_stream_chunk(body):  # ~50 µs: cheaper than a thread hop
                result, tokens = call_counting(handler, request.app.state.bundle, settings, body, False)
            else:
                result, tokens = await request.app.state.pool.run(
                    call_counting, handler, request.app.state.bundle, settings, body, rendering
                )
            counter = metrics.TOKENS_RENDERED if rendering else metrics.TOKENS_DERENDERED
            counter.labels(path).inc(tokens)
            return (media_response(result) if rendering else None) or json_response(result)

        app.add_api_route(path, route, methods=["POST"], name=path)
        body_paths.append(path)

    post("/v1/chat/completions/render", render.render_chat)
    post("/v1/completions/render", render.render_completion)
    post("/v1/messages/render", render.render_messages)
    post("/v1/responses/render", render.render_responses)
    post("/v1/chat/completions/derender", derender.derender_chat)
    post("/v1/completions/derender", derender.derender_completion)
    post("/v1/messages/derender", derender.derender_messages)
    post("/v1/responses/derender", derender.derender_responses)
    post("/tokenize", render.tokenize)
    post("/detokenize", render.detokenize)
    fastlane.install(app, {"/v1/chat/completions/derender": derender.derender_chat,
                           "/v1/completions/derender": derender.derender_completion},
                     settings, limits, is_small_stream_chunk)
    render_lane.install(app, {"/v1/chat/completions/render": render.render_chat,
                              "/v1/completions/render": render.render_completion,
                              "/v1/messages/render": render.render_messages,
                              "/v1/responses/render": render.render_responses},
                        settings, limits, call_counting,
                        lambda result: media_response(result) or json_response(result))

    if settings.engine_urls:  # gateway mode: OpenAI endpoints over tokens-only engines (README "Gateway")
        from .gateway import install_gateway

        async def read_bounded(request: Request) -> Any:
            body = await read_json(request)
            check_body(body, limits)
            return body

        install_gateway(app, settings, read_bounded, json_response)

    @app.get("/health")
    async def health() -> Response:
        """Liveness: 200 while the process serves HTTP at all."""
        return Response(status_code=200)

    @app.get("/ready")
    async def ready(request: Request) -> Response:
        """Readiness: 200 once the model is loaded, 503 while loading or draining."""
        state = request.app.state
        if state.ready and not state.draining:
            return json_response({"status": "ready", "config_fingerprint": state.fingerprint})
        reason = "draining" if state.draining else "loading"
        return json_response(error_body(f"Not ready: {reason}", "ServiceUnavailableError", 503), 503)

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        """Prometheus text exposition, aggregated over worker processes."""
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type)

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        b: ModelBundle = request.app.state.bundle
        cards = [
            {
                "id": name,
                "object": "model",
                "created": app.state.started,
                "owned_by": "render-service",
                "root": b.root,
                "parent": None,
                "max_model_len": b.max_model_len,
                "permission": [],
                "config_fingerprint": request.app.state.fingerprint,
            }
            for name in b.names
        ]
        return json_response({"object": "list", "data": cards})

    return app


def install_multimodal_cache_metrics(bundle: ModelBundle, settings: Settings) -> None:
    """Count the processed-media cache's hits and misses as cache ``multimodal`` (vision models)."""
    from ..render.multimodal import state_for

    state = state_for(bundle, settings)
    if state is None:
        return
    cache = metrics.register_cache("multimodal")

    def observe(hits: int, misses: int) -> None:
        cache.hit(hits)
        cache.miss(misses)

    state.cache.observer = observe


def call_counting(handler: Handler, bundle: ModelBundle, settings: Settings, body: Any,
                  rendering: bool) -> tuple[Any, int]:
    """Run ``handler(bundle, settings, body)`` and count its tokens (worker thread side).

    Rendering routes count token ids in the result, derendering routes those in the request body
    (see :func:`.metrics.count_tokens`).
    """
    result = handler(bundle, settings, body)
    if rendering and isinstance(result, dict) and isinstance(result.get("token_ids"), list):
        return result, len(result["token_ids"])  # a GenerateRequest: its ids are ints we made
    return result, metrics.count_tokens(result if rendering else body)


INLINE_CHUNK_TOKENS = 16
"""A later streaming derender chunk with at most this many token ids (and no prompt) runs on the
event loop: its work (tens of µs, proportional to the new tokens) costs less than the hand-off to a
worker thread and back."""


def is_small_stream_chunk(body: Any) -> bool:
    """Whether ``body`` is a later streaming derender chunk (``stream_state`` set, no
    ``prompt_token_ids``) carrying at most :data:`INLINE_CHUNK_TOKENS` token ids in total."""
    if not isinstance(body, dict) or not isinstance(body.get("stream_state"), str):
        return False
    if body.get("prompt_token_ids") is not None or body.get("prompt_logprobs") is not None:
        return False
    chunk = body.get("generate_chunk")
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    if not isinstance(choices, list) or len(choices) > 4:
        return False
    total = 0
    for choice in choices:
        ids = choice.get("token_ids") if isinstance(choice, dict) else None
        if not isinstance(ids, list):
            return False
        total += len(ids)
    return total <= INLINE_CHUNK_TOKENS


def new_pool(settings: Settings) -> WorkerPool:
    """The worker pool for ``settings``, publishing its load to the pool metrics."""
    threads = max(1, settings.renderer_threads)
    metrics.set_pool(threads, 0, 0)
    return WorkerPool(threads, settings.max_queued_requests, settings.queue_timeout,
                      on_change=lambda busy, queued: metrics.set_pool(threads, busy, queued))


def add_middleware(app: FastAPI, settings: Settings) -> None:
    """Body size limit (innermost), API-key auth, then observation (outermost: sees every answer)."""
    app.add_middleware(BodySizeLimit, limit=settings.max_request_body_bytes)
    app.add_middleware(ApiKeyAuth, keys=settings.api_keys)
    app.add_middleware(Observe, endpoints=lambda: known_routes(app),
                       fingerprint=lambda: app.state.fingerprint)


def known_routes(app: FastAPI) -> frozenset[str]:
    """Paths of the app's routes (metric labels)."""
    cached = getattr(app.state, "route_paths", None)
    if cached is None:
        cached = frozenset(getattr(r, "path", "") for r in app.routes)
        app.state.route_paths = cached
    return cached


def app_from_env() -> FastAPI:
    """App factory for worker processes: settings from ``RENDER_SERVICE_SETTINGS_JSON`` (set by the CLI).

    Used as ``uvicorn render_service.serving.app:app_from_env --factory``.
    """
    return create_app(settings_from_env())
