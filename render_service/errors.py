"""Errors of the service, each carrying its HTTP meaning; mapped to a body once, at the edge.

Hierarchy::

    RenderServiceError (500, "InternalServerError")
    ├── InvalidRequest (400, "BadRequestError")      also a ValueError
    │   ├── TemplateRenderError                      chat template failed or over budget
    │   ├── ContextLengthExceeded                    prompt longer than max_model_len
    │   ├── InvalidStreamState                       malformed, foreign or tampered stream_state
    │   └── MalformedBody ("Bad Request")            not JSON, or not application/json
    ├── PayloadTooLarge (413, "PayloadTooLargeError")
    ├── Unauthorized (401, "AuthenticationError")
    └── UnknownModel (404, "NotFoundError")

The body is the upstream (vLLM 0.33) shape:
``{"error": {"message": str, "type": str, "param": str | None, "code": int}}``.
"""

from __future__ import annotations

from typing import Any

from pydantic_core import InitErrorDetails, ValidationError


class RenderServiceError(Exception):
    """Root of the service's errors. ``param`` names the offending request field, if any."""

    status_code: int = 500
    error_type: str = "InternalServerError"

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class InvalidRequest(RenderServiceError, ValueError):
    """The request is well-formed JSON but cannot be served as asked."""

    status_code = 400
    error_type = "BadRequestError"


class TemplateRenderError(InvalidRequest):
    """The chat template raised, or exceeded its time or size budget."""


class ContextLengthExceeded(InvalidRequest):
    """The prompt (or prompt plus output) is longer than ``max_model_len``."""


class InvalidStreamState(InvalidRequest):
    """``stream_state`` is malformed, of another version or configuration, or tampered with."""

    def __init__(self, message: str, param: str | None = "stream_state") -> None:
        super().__init__(message, param)


class MalformedBody(InvalidRequest):
    """The body is not JSON or not ``application/json``; typed like upstream's FastAPI body errors."""

    error_type = "Bad Request"


class NotImplementedFeature(RenderServiceError):
    """A request form upstream refuses as not implemented (vLLM 0.33 answers its
    ``NotImplementedError`` with 501 ``NotImplementedError``, e.g. a data URL that is not base64)."""

    status_code = 501
    error_type = "NotImplementedError"


class PayloadTooLarge(RenderServiceError):
    """The request body exceeds the configured limit."""

    status_code = 413
    error_type = "PayloadTooLargeError"


class Unauthorized(RenderServiceError):
    """Missing or wrong ``Authorization: Bearer`` key."""

    status_code = 401
    error_type = "AuthenticationError"


class UnknownModel(RenderServiceError):
    """The request names a model this server does not serve."""

    status_code = 404
    error_type = "NotFoundError"


def error_body(message: str, error_type: str, code: int, param: str | None = None) -> dict[str, Any]:
    """Build the upstream error body ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def to_error_body(exc: RenderServiceError) -> dict[str, Any]:
    """The upstream error body for one of our exceptions."""
    return error_body(exc.message, exc.error_type, exc.status_code, exc.param)


def not_an_object(body: Any, *branches: tuple[str, ...]) -> ValidationError:
    """The pydantic error vLLM 0.33 (FastAPI) answers a body that is not a JSON object with: one
    ``model_attributes_type`` error per member of the route's body type, at ``branches`` (``()`` for
    the body itself, ``("DerenderChatStreamRequest",)`` for a union member pydantic names). Raise it;
    the app's validation handler writes it with the ``body`` prefix."""
    return ValidationError.from_exception_data(
        "body", [InitErrorDetails(type="model_attributes_type", loc=loc, input=body) for loc in branches or [()]]
    )


_UNSET: Any = object()


def vllm_error(message: str, parameter: str | None = None, value: Any = _UNSET) -> InvalidRequest:
    """A 400 worded as vLLM 0.33's ``VLLMValidationError`` prints itself: ``message``, then
    ``(parameter=P, value=V)`` naming what is set (``param`` is ``parameter``). Raise it."""
    extras = ([f"parameter={parameter}"] if parameter is not None else []) + (
        [f"value={value}"] if value is not _UNSET and value is not None else [])
    return InvalidRequest(f"{message} ({', '.join(extras)})" if extras else message, param=parameter)


class RequestErrors(Exception):
    """Pydantic-style errors gathered by hand (the members of a union body validated one by
    one): ``errors`` are pydantic's error dicts, ``loc`` starting at ``"body"``. Answered as the
    app answers a ``ValidationError`` (400 ``"Bad Request"``, vLLM 0.33's wording)."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(f"{len(errors)} validation errors")
        self.errors = errors


def union_errors(*failures: ValidationError) -> RequestErrors:
    """The errors a union of body models answers when every member fails: each member's errors,
    in member order, as ``body.<loc>`` (members named by no ``loc`` segment, as vLLM's
    validator-wrapped request models are)."""
    return RequestErrors([{**e, "loc": ("body", *e["loc"])} for exc in failures
                          for e in exc.errors(include_url=False)])
