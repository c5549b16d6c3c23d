"""Request limits and load shedding: body size (413), body shape bounds (400), worker queue (503).

* :class:`BodySizeLimit` is a pure ASGI middleware: a ``Content-Length`` above the limit is refused
  before the body is read; a streamed (chunked) body is counted as it arrives and refused as soon as
  it passes the limit. Either way the client gets 413 in the upstream error shape.
* :func:`check_body` bounds the parsed JSON body generically (``messages``, ``tools``, ``n``,
  ``stream_state``), at the top level and inside nested ``*_request`` objects (derender bodies carry
  ``chat_request`` / ``completion_request``), before a handler sees it.
* :class:`WorkerPool` runs handlers on a bounded thread pool with a bounded wait queue; a full queue
  or a wait longer than ``queue_timeout`` is a 503 instead of a request that hangs until a proxy's
  hard-coded timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import InvalidRequest, PayloadTooLarge, RenderServiceError, to_error_body
from ..settings import Settings

T = TypeVar("T")


class Overloaded(RenderServiceError):
    """The worker queue is full or the wait for a worker thread timed out (retry elsewhere)."""

    status_code = 503
    error_type = "ServiceUnavailableError"


def too_large_message(limit: int) -> str:
    """The 413 message for a body over ``limit`` bytes."""
    return f"Request body exceeds the limit of {limit} bytes (--max-request-body-bytes)."


class BodySizeLimit:
    """ASGI middleware refusing HTTP bodies larger than ``limit`` bytes with a 413.

    A declared ``Content-Length`` above the limit is answered at once; otherwise ``receive`` is
    wrapped and raises :class:`~render_service.errors.PayloadTooLarge` when the running total passes
    the limit, which the app's error handler maps to the same 413 body.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.limit <= 0:
            await self.app(scope, receive, send)
            return
        if declared_over(scope, self.limit):
            await send_error(send, PayloadTooLarge(too_large_message(self.limit)))
            return
        seen = 0

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise PayloadTooLarge(too_large_message(self.limit))
            return message

        await self.app(scope, counting_receive, send)


def declared_over(scope: Scope, limit: int) -> bool:
    """Whether the request declares (``Content-Length``) a body over ``limit`` bytes (0: no limit):
    the lanes in front of the app then hand it on unread, so the app's body-size limit answers
    413 at once instead of after the lane read the body up to the limit."""
    declared = _content_length(scope) if limit > 0 else None
    return declared is not None and declared > limit


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def send_error(send: Send, exc: RenderServiceError) -> None:
    """Answer an ASGI request directly with ``exc``'s status and upstream error body."""
    body = orjson.dumps(to_error_body(exc))
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": exc.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@dataclass(frozen=True, slots=True)
class BodyLimits:
    """Bounds on a parsed request body (see :class:`~render_service.settings.Settings`)."""

    max_messages: int
    max_tools: int
    max_n: int
    max_stream_state_bytes: int

    @classmethod
    def from_settings(cls, settings: Settings) -> BodyLimits:
        """The limits configured in ``settings``."""
        return cls(settings.max_messages, settings.max_tools, settings.max_n, settings.max_stream_state_bytes)


def check_body(body: Any, limits: BodyLimits) -> None:
    """Bound ``messages``/``tools`` length, ``n`` and ``stream_state`` size in a parsed body.

    Checked at the top level and in nested ``*_request`` objects; ``param`` is the dotted path.
    Non-dict bodies and fields of the wrong type are left to the handler's validation.

    Raises:
        InvalidRequest: a bound is exceeded (400, ``param`` names the field).
    """
    if not isinstance(body, dict):
        return
    _check_object(body, limits, "")
    for key, value in body.items():
        if isinstance(key, str) and key.endswith("_request") and isinstance(value, dict):
            _check_object(value, limits, f"{key}.")


def _check_object(obj: dict[str, Any], limits: BodyLimits, prefix: str) -> None:
    _check_items(obj.get("messages"), "messages", limits.max_messages, prefix)
    _check_items(obj.get("tools"), "tools", limits.max_tools, prefix)
    n = obj.get("n")
    if isinstance(n, int) and not isinstance(n, bool) and n > limits.max_n:
        raise InvalidRequest(f"`n` is {n}; at most {limits.max_n} is allowed (--max-n).", param=prefix + "n")
    state = obj.get("stream_state")
    if state is not None:
        size = _serialized_size(state)
        if size > limits.max_stream_state_bytes:
            raise InvalidRequest(
                f"`stream_state` is {size} bytes; at most {limits.max_stream_state_bytes} are allowed "
                "(--max-stream-state-bytes).", param=prefix + "stream_state"
            )


def _check_items(value: Any, field: str, bound: int, prefix: str) -> None:
    if isinstance(value, list) and len(value) > bound:
        raise InvalidRequest(
            f"`{field}` has {len(value)} items; at most {bound} are allowed "
            f"(--max-{field}).", param=prefix + field
        )


def _serialized_size(value: Any) -> int:
    if isinstance(value, str):  # an ASCII string (every state this server makes) is its length
        return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    try:
        return len(orjson.dumps(value))
    except TypeError:
        return 0


class WorkerPool:
    """A bounded thread pool for CPU work with a bounded, timed wait queue.

    ``busy`` threads run handlers (at most ``threads``); ``queued`` requests wait for one (at most
    ``max_queued``, each for at most ``queue_timeout`` seconds). ``on_change(busy, queued)`` is
    called whenever either changes (metrics).
    """

    def __init__(self, threads: int, max_queued: int, queue_timeout: float,
                 on_change: Callable[[int, int], None] = lambda busy, queued: None) -> None:
        self.threads = max(1, threads)
        self.max_queued = max(0, max_queued)
        self.queue_timeout = queue_timeout
        self.busy = 0
        self.queued = 0
        self._gate = anyio.Semaphore(self.threads)
        self._limiter = anyio.CapacityLimiter(self.threads)
        self._on_change = on_change

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` in a worker thread.

        Raises:
            Overloaded: the queue is full, or no thread freed up within ``queue_timeout``.
        """
        await self._acquire()
        self._update(busy=1)
        try:
            return await anyio.to_thread.run_sync(fn, *args, limiter=self._limiter)
        finally:
            self._update(busy=-1)
            self._gate.release()

    def run_here(self, fn: Callable[..., T], *args: Any) -> tuple[bool, T | None]:
        """Run ``fn(*args)`` on the calling thread (the event loop) if a worker slot is free at
        once, holding that slot meanwhile (``busy`` counts it; :meth:`run` callers queue behind it
        as behind a thread): ``(True, result)``; ``(False, None)`` without running it when no slot
        is free (call :meth:`run`). For work that costs less than the hand-off to a thread and
        back."""
        try:
            self._gate.acquire_nowait()
        except anyio.WouldBlock:
            return False, None
        self._update(busy=1)
        try:
            return True, fn(*args)
        finally:
            self._update(busy=-1)
            self._gate.release()

    async def _acquire(self) -> None:
        if self._gate.value > 0:
            await self._gate.acquire()
            return
        if self.queued >= self.max_queued:
            raise Overloaded(f"Server busy: {self.queued} requests already waiting for a worker "
                             "(--max-queued-requests); retry on another replica.")
        self._update(queued=1)
        try:
            with anyio.fail_after(self.queue_timeout):
                await self._gate.acquire()
        except TimeoutError:
            raise Overloaded(f"Server busy: no worker thread free within {self.queue_timeout:g} s "
                             "(--queue-timeout); retry on another replica.") from None
        finally:
            self._update(queued=-1)

    def _update(self, busy: int = 0, queued: int = 0) -> None:
        self.busy += busy
        self.queued += queued
        self._on_change(self.busy, self.queued)
