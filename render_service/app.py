"""HTTP wiring: ``create_app(settings) -> FastAPI``. Routes only validate, call the core, return.

Every route body is parsed with orjson and handed as a plain ``dict`` to a pure core function
(``render.py``, ``derender.py``) that validates it against its pydantic wire model and returns
a JSON-ready value. CPU work runs in a thread pool, off the event loop. Errors of every kind are
mapped once, here, to the upstream body ``{"error": {"message", "type", "param", "code"}}``:
pydantic validation → 400 ``"Bad Request"`` (never 422), our own errors → their status, anything
unexpected → 500 ``"InternalServerError"``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from . import derender, render
from .errors import InvalidRequest, RenderServiceError, error_body, to_error_body
from .models import ModelBundle, load_bundle
from .settings import Settings

logger = logging.getLogger(__name__)

Handler = Callable[[ModelBundle, Settings, Any], Any]


def json_response(content: Any, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    """Serialise with orjson (non-str dict keys allowed)."""
    body = orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS)
    return Response(body, status_code=status_code, media_type="application/json", headers=headers)


def validation_message(exc: ValidationError | RequestValidationError) -> tuple[str, str | None]:
    """Upstream-style message ``"N validation error(s):\\n  {...}"`` and the dotted ``param``."""
    errors = exc.errors()
    lines = []
    for err in errors[:10]:
        loc = ".".join(str(p) for p in err.get("loc", ()))
        inp = repr(err.get("input"))[:200]
        lines.append(f"  {{'loc': {loc!r}, 'msg': {err.get('msg')!r}, 'input': {inp}}}")
    noun = "error" if len(errors) == 1 else "errors"
    param = ".".join(str(p) for p in errors[0].get("loc", ())) if errors else None
    return f"{len(errors)} validation {noun}:\n" + "\n".join(lines), param


async def read_json(request: Request) -> Any:
    """Parse the body as JSON; wrong media type or bad JSON → 400 in the upstream shape."""
    ctype = request.headers.get("content-type", "")
    if ctype and not ctype.split(";")[0].strip().lower().endswith("json"):
        raise InvalidRequest("Unsupported Media Type: Only 'application/json' is allowed")
    raw = await request.body()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"Request body is not valid JSON: {exc}") from None


def create_app(settings: Settings, bundle: ModelBundle | None = None) -> FastAPI:
    """Build the app. ``bundle`` may be passed pre-loaded (tests); else it loads at start-up."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):  # type: ignore[no-untyped-def]
        if getattr(app.state, "bundle", None) is None:
            app.state.bundle = await run_in_threadpool(load_bundle, settings)
        app.state.ready = True
        yield
        app.state.ready = False

    app = FastAPI(title="render-service", lifespan=lifespan)
    app.state.settings = settings
    app.state.bundle = bundle
    app.state.ready = False
    app.state.started = int(time.time())

    @app.exception_handler(RenderServiceError)
    async def _service_error(_: Request, exc: RenderServiceError) -> Response:
        return json_response(to_error_body(exc), exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def _request_validation(_: Request, exc: RequestValidationError) -> Response:
        message, param = validation_message(exc)
        return json_response(error_body(message, "Bad Request", 400, param), 400)

    @app.exception_handler(ValidationError)
    async def _validation(_: Request, exc: ValidationError) -> Response:
        message, param = validation_message(exc)
        return json_response(error_body(message, "Bad Request", 400, param), 400)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> Response:
        logger.exception("unhandled error")
        return json_response(error_body(f"{type(exc).__name__}: {exc}", "InternalServerError", 500), 500)

    def post(path: str, handler: Handler) -> None:
        async def route(request: Request) -> Response:
            body = await read_json(request)
            result = await run_in_threadpool(handler, request.app.state.bundle, settings, body)
            return json_response(result)

        app.add_api_route(path, route, methods=["POST"], name=path)

    post("/v1/chat/completions/render", render.render_chat)
    post("/v1/completions/render", render.render_completion)
    post("/v1/chat/completions/derender", derender.derender_chat)
    post("/v1/completions/derender", derender.derender_completion)
    post("/tokenize", render.tokenize)
    post("/detokenize", render.detokenize)

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=200)

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
            }
            for name in b.names
        ]
        return json_response({"object": "list", "data": cards})

    return app
