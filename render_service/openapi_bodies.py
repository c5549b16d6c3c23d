"""OpenAPI request-body schemas for the POST routes (so schema-driven fuzzers send real shapes).

Hook: :data:`BODY_MODELS` maps each route to the dotted name of its pydantic request model in
``render_service.protocol``. While a model is not there yet (or fails to import), the route is
described as a generic JSON object. Union models (stream / non-stream) are fine: the schema is
whatever ``TypeAdapter(model).json_schema`` produces, with its ``$defs`` moved to
``components/schemas``.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

logger = logging.getLogger(__name__)

GENERIC_OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": True}

#: route path -> "module:attribute" of its request model (a pydantic model or a type alias).
BODY_MODELS: dict[str, str] = {
    "/v1/chat/completions/render": "render_service.protocol.chat:ChatCompletionRequest",
    "/v1/completions/render": "render_service.protocol.completion:CompletionRequest",
    "/v1/chat/completions/derender": "render_service.protocol.derender:DerenderChatRequestBody",
    "/v1/completions/derender": "render_service.protocol.derender:DerenderCompletionRequestBody",
    "/tokenize": "render_service.protocol.tokenize:TokenizeRequest",
    "/detokenize": "render_service.protocol.tokenize:DetokenizeRequest",
}


def body_schema(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(schema, defs)`` for ``path``'s request body; the generic object when no model is known."""
    target = BODY_MODELS.get(path)
    if not target:
        return GENERIC_OBJECT, {}
    module, _, name = target.partition(":")
    try:
        from pydantic import TypeAdapter

        model = getattr(importlib.import_module(module), name)
        schema = TypeAdapter(model).json_schema(ref_template="#/components/schemas/{model}")
    except Exception as exc:  # not written yet, or not schema-able: stay generic
        logger.debug("no request model for %s (%s): generic object schema", path, exc)
        return GENERIC_OBJECT, {}
    defs = schema.pop("$defs", {})
    return schema, defs


def request_body(path: str) -> dict[str, Any]:
    """The ``openapi_extra`` for a POST route: a required JSON body with :func:`body_schema`."""
    schema, _ = body_schema(path)
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def install(app: FastAPI) -> None:
    """Make ``app.openapi()`` include the request models' ``$defs`` under ``components/schemas``."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = get_openapi(title=app.title, version=app.version, routes=app.routes)
            components = spec.setdefault("components", {}).setdefault("schemas", {})
            for path in BODY_MODELS:
                components.update(body_schema(path)[1])
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
