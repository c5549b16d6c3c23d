"""Per-request observation middleware: request id, response headers, metrics and the access log.

For every HTTP request (pure ASGI, so streamed bodies and early refusals are covered too):

* ``X-Request-Id``: taken from the request when given (at most 128 printable ASCII characters),
  else a random hex id; stored in ``scope["state"]["request_id"]`` (with
  ``scope["state"]["request_id_from_client"]``) and echoed in the response.
* ``X-Render-Config-Fingerprint``: added to every response once the model is loaded.
* metrics: ``requests_total``, ``request_duration_seconds``, ``requests_in_flight`` labelled by the
  route path (unknown paths are labelled ``other`` to bound cardinality).
* one access-log line: ``request_id``, ``method``, ``path``, ``status``, ``duration_ms``.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import metrics
from .logging_setup import ACCESS_LOGGER

REQUEST_ID_HEADER = "x-request-id"
FINGERPRINT_HEADER = "x-render-config-fingerprint"
_MAX_ID_LEN = 128

access_log = logging.getLogger(ACCESS_LOGGER)

_ID_PREFIX = secrets.token_hex(8)
_ID_COUNTER = itertools.count()


def new_request_id() -> str:
    """A fresh 32-hex request id: a random per-process prefix and a counter (unique per process
    and, with 64 random bits, across processes; no system call per request, unlike uuid4)."""
    return f"{_ID_PREFIX}{next(_ID_COUNTER) & 0xFFFFFFFFFFFFFFFF:016x}"


def is_minted(value: object) -> bool:
    """Whether ``value`` is a request id this process minted (:func:`new_request_id`): the
    ``request_id`` the chat, completions and Messages render routes write into a body the client
    sent without one (the Responses route's ``resp_<id>`` is not: vLLM 0.33 adds one too)."""
    return isinstance(value, str) and len(value) == 32 and value.startswith(_ID_PREFIX)


def client_request_id(scope: Scope) -> str | None:
    """The ``X-Request-Id`` header if present and sane (1–128 printable ASCII chars), else ``None``."""
    for name, value in scope.get("headers", ()):
        if name == REQUEST_ID_HEADER.encode():
            text = value.decode("latin-1").strip()
            if 0 < len(text) <= _MAX_ID_LEN and text.isascii() and text.isprintable():
                return text
            return None
    return None


class Observe:
    """ASGI middleware implementing the module's per-request behaviour.

    ``endpoints()`` returns the known route paths (metric labels); ``fingerprint()`` the current
    configuration fingerprint or ``None`` while loading.
    """

    def __init__(self, app: ASGIApp, endpoints: Callable[[], frozenset[str]],
                 fingerprint: Callable[[], str | None]) -> None:
        self.app = app
        self.endpoints = endpoints
        self.fingerprint = fingerprint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = client_request_id(scope)
        request_id = given or new_request_id()
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        state["request_id_from_client"] = given is not None
        path = scope["path"]
        endpoint = path if path in self.endpoints() else "other"
        status = 500
        start = time.perf_counter()

        async def send_with_headers(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER.encode(), request_id.encode()))
                fp = self.fingerprint()
                if fp:
                    headers.append((FINGERPRINT_HEADER.encode(), fp.encode()))
                message = {**message, "headers": headers}
            await send(message)

        in_flight = metrics.IN_FLIGHT.labels(endpoint)
        in_flight.inc()
        try:
            await self.app(scope, receive, send_with_headers)
        finally:
            in_flight.dec()
            elapsed = time.perf_counter() - start
            method = scope.get("method", "")
            metrics.REQUESTS.labels(endpoint, method, str(status)).inc()
            metrics.LATENCY.labels(endpoint, method, str(status)).observe(elapsed)
            access_log.info(
                "%s %s %d", method, path, status,
                extra={"request_id": request_id, "method": method, "path": path, "status": status,
                       "duration_ms": round(elapsed * 1000, 3)},
            )
