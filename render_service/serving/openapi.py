"""OpenAPI request-body schemas for the POST routes (so schema-driven fuzzers send real shapes).

Hook: :data:`BODY_MODELS` maps each route to its pydantic request model(s) in
``render_service.protocol`` (``"module:Name"``; several names joined by ``|`` for a body that is
one of several shapes, e.g. derender's batch and streaming bodies). Several models, or a model that
is itself a union, are described as ``oneOf`` (the shapes are exclusive: ``stream`` tells them
apart). The schema is what ``TypeAdapter(model).json_schema`` produces, with its ``$defs`` moved
to ``components/schemas``. A model that fails to import leaves the route a generic JSON object.
"""

from __future__ import annotations

import copy
import functools
import importlib
import logging
from collections.abc import Iterable
from typing import Any, Union

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from ..render.messages import ROLES

logger = logging.getLogger(__name__)

GENERIC_OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": True}

#: route path -> "module:attribute" of its request model (a pydantic model or a type alias).
BODY_MODELS: dict[str, str] = {
    "/v1/chat/completions/render": "render_service.protocol.chat:ChatCompletionRequest",
    "/v1/completions/render": "render_service.protocol.completion:CompletionRequest",
    "/v1/chat/completions/derender":
        "render_service.protocol.derender:DerenderChatRequest|DerenderChatStreamRequest",
    "/v1/completions/derender":
        "render_service.protocol.derender:DerenderCompletionRequest|DerenderCompletionStreamRequest",
    "/v1/messages/render": "render_service.protocol.anthropic:AnthropicMessagesRequest",
    "/v1/responses/render": "render_service.protocol.responses:ResponsesRequest",
    "/v1/messages/derender":
        "render_service.protocol.anthropic:DerenderMessagesRequest|DerenderMessagesStreamRequest",
    "/v1/responses/derender":
        "render_service.protocol.responses:DerenderResponsesRequest|DerenderResponsesStreamRequest",
    "/tokenize": "render_service.protocol.tokenize:TokenizeRequest",
    "/detokenize": "render_service.protocol.tokenize:DetokenizeRequest",
}


#: One chat message as :mod:`render_service.render.messages` accepts it (the wire model keeps
#: ``messages`` as plain JSON; this gives its items their OpenAI shape in the spec).
MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["role"],
    "properties": {
        "role": {"type": "string", "enum": sorted(ROLES)},
        "content": {"anyOf": [
            {"type": "string"}, {"type": "null"},
            {"type": "array", "items": {"type": "object", "required": ["type"], "properties": {
                "type": {"type": "string", "enum": ["text"]}, "text": {"type": "string"}}}},
        ]},
        "name": {"type": "string"},
        "tool_call_id": {"type": "string"},
        "reasoning_content": {"type": "string"},
    },
}


def _describe_messages(schema: dict[str, Any], defs: dict[str, Any]) -> None:
    """Give untyped ``messages`` items (``list[Any]``) :data:`MESSAGE_SCHEMA`, in place."""
    for node in [schema, *defs.values()]:
        messages = node.get("properties", {}).get("messages")
        if messages is not None and messages.get("type") == "array" and not messages.get("items"):
            messages["items"] = MESSAGE_SCHEMA
            messages.setdefault("minItems", 1)


def body_schema(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(schema, defs)`` for ``path``'s request body; the generic object when no model is known.

    Built once per path and process (pydantic's schema generation costs ~10 ms a route, paid by
    every app created, e.g. each test server); each call returns its own deep copy, so a caller
    (FastAPI merging ``openapi_extra``) may change it without changing another app's spec."""
    return copy.deepcopy(_body_schema(path))


@functools.cache
def _body_schema(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    target = BODY_MODELS.get(path)
    if not target:
        return GENERIC_OBJECT, {}
    module, _, names = target.partition(":")
    try:
        from pydantic import TypeAdapter

        models = [getattr(importlib.import_module(module), name) for name in names.split("|")]
        model = models[0] if len(models) == 1 else Union[tuple(models)]  # noqa: UP007
        schema = TypeAdapter(model).json_schema(ref_template="#/components/schemas/{model}")
    except Exception as exc:  # not schema-able: stay generic
        logger.warning("no request model for %s (%s): generic object schema", path, exc)
        return GENERIC_OBJECT, {}
    defs = schema.pop("$defs", {})
    _describe_messages(schema, defs)
    if "anyOf" in schema and set(schema) <= {"anyOf", "title", "description"}:
        schema["oneOf"] = schema.pop("anyOf")  # exclusive shapes (stream true / false)
    return schema, defs


def request_body(path: str) -> dict[str, Any]:
    """The ``openapi_extra`` for a POST route: a required JSON body with :func:`body_schema`."""
    schema, _ = body_schema(path)
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def install(app: FastAPI, body_paths: Iterable[str] = ()) -> None:
    """Make ``app.openapi()`` give each POST route in ``body_paths`` its :func:`request_body` and
    include the request models' ``$defs`` under ``components/schemas``.

    The bodies are described when the spec is first built, not when the routes are added: a server
    that is never asked for ``/openapi.json`` does not pay pydantic's schema generation (~0.2-0.8
    CPU-s at each start). ``body_paths`` may still grow after this call (it is read then)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            wanted = set(body_paths)
            for route in app.routes:
                if (isinstance(route, APIRoute) and route.path in wanted
                        and "POST" in (route.methods or ()) and route.openapi_extra is None):
                    route.openapi_extra = request_body(route.path)
            spec = get_openapi(title=app.title, version=app.version, routes=app.routes)
            components = spec.setdefault("components", {}).setdefault("schemas", {})
            for path in BODY_MODELS:
                components.update(body_schema(path)[1])
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
