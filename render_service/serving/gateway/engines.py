"""HTTP calls to tokens-only engines: pools of URLs, balancing, errors, SSE, abort.

One :class:`httpx.AsyncClient` (connection pooling, connect/read timeouts) serves every engine.
A :class:`EnginePool` ("prefill" or "decode") picks the URL with the fewest requests in flight
(ties: round robin) and, when an engine refuses the connection, tries the next one.

Errors, as an OpenAI client sees them (upstream error body):

* engine unreachable (every URL of the pool refused) → :class:`EngineUnavailable`, 502;
* engine silent longer than ``--engine-timeout`` → :class:`EngineTimeout`, 504;
* engine 400, 413 or 422 (the engine refused what the client asked: prompt too long, bad
  sampling values...) → :class:`EngineRejected`, 400 with the engine's own message;
* any other engine 4xx (401/403: wrong ``--engine-api-key``; 404/405: a URL that is no
  tokens-only engine; 408, 409, 429...) is the deployment's fault, not the client's →
  :class:`EngineUnavailable`, 502 naming the engine, its status and its message;
* engine 5xx or an unreadable answer → :class:`EngineUnavailable`, 502 with its message.

With ``--engine-api-key`` every call (generate and abort) carries ``Authorization: Bearer <key>``,
as a vLLM engine started with ``--api-key`` requires on ``/inference/*``.

Engine routes (upstream-render-api.md §1, §4): ``POST {url}/inference/v1/generate``,
``POST {url}/inference/v1/abort_requests`` with ``{"request_ids": [...]}``. The engine names
a request ``generate-tokens-<X-Request-Id>`` (the header wins over the body's ``request_id``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from ...errors import RenderServiceError
from ...render.multimodal.serde import json_default
from ...settings import Settings
from . import metrics

logger = logging.getLogger(__name__)

GENERATE = "/inference/v1/generate"
ABORT = "/inference/v1/abort_requests"
ENGINE_ID_PREFIX = "generate-tokens-"
CLIENT_ERRORS = frozenset({400, 413, 422})
"""Engine statuses caused by the client's own request: passed on as 400 with the engine's message."""


class EngineUnavailable(RenderServiceError):
    """No engine of the pool could be reached, or it failed (5xx)."""

    status_code = 502
    error_type = "BadGatewayError"


class EngineTimeout(RenderServiceError):
    """The engine did not answer within ``--engine-timeout``."""

    status_code = 504
    error_type = "GatewayTimeoutError"


class EngineOverloaded(RenderServiceError):
    """The engine said it is full (429 / 503 in a stream's error event); retry later."""

    status_code = 503
    error_type = "ServiceUnavailableError"


class EngineRejected(RenderServiceError):
    """The engine refused the request (4xx); the message is the engine's."""

    status_code = 400
    error_type = "BadRequestError"


def engine_request_id(request_id: str) -> str:
    """The id the engine gives a request sent with ``X-Request-Id: request_id``."""
    return ENGINE_ID_PREFIX + request_id


def _message(response: httpx.Response, raw: bytes) -> str:
    try:
        body = orjson.loads(raw)
        message = body["error"]["message"] if isinstance(body.get("error"), dict) else body["detail"]
        return str(message)
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return raw[:500].decode("utf-8", "replace") or response.reason_phrase


@dataclass
class EnginePool:
    """The URLs of one pool and their in-flight counts (least in flight, ties round robin)."""

    name: str
    urls: tuple[str, ...]
    in_flight: dict[str, int] = field(default_factory=dict)
    _turn: itertools.count = field(default_factory=itertools.count)

    def order(self) -> list[str]:
        """The URLs to try, best first."""
        start = next(self._turn) % len(self.urls)
        rotated = self.urls[start:] + self.urls[:start]
        return sorted(rotated, key=lambda u: self.in_flight.get(u, 0))

    def enter(self, url: str) -> None:
        self.in_flight[url] = self.in_flight.get(url, 0) + 1

    def leave(self, url: str) -> None:
        self.in_flight[url] = self.in_flight.get(url, 1) - 1


@dataclass
class EngineStream:
    """An open streaming generate call: iterate :meth:`events`, then :meth:`close`."""

    pool: EnginePool
    url: str
    response: httpx.Response
    started: float
    closed: bool = False
    ended: bool = False

    async def events(self) -> AsyncIterator[list[bytes]]:
        """The ``data:`` payloads of the SSE stream, up to (not including) ``[DONE]``, in batches:
        every complete event of one network read (so the client gets them in one write).

        Raises:
            EngineTimeout: a gap between events longer than ``--engine-timeout``.
            EngineUnavailable: the connection broke mid-stream.
        """
        buffer = b""
        try:
            async for piece in self.response.aiter_raw():
                buffer += piece
                end = buffer.rfind(b"\n\n")
                if end < 0:
                    continue
                complete, buffer = buffer[:end], buffer[end + 2 :]
                batch = []
                for line in complete.split(b"\n"):
                    if not line.startswith(b"data:"):
                        continue
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        self.ended = True
                        break
                    batch.append(data)
                if batch:
                    yield batch
                if self.ended:
                    return
        except httpx.TimeoutException:
            metrics.ENGINE_ERRORS.labels(self.pool.name, "timeout").inc()
            raise EngineTimeout(f"engine {self.url} sent nothing for too long (--engine-timeout)") from None
        except httpx.TransportError as exc:
            metrics.ENGINE_ERRORS.labels(self.pool.name, "stream").inc()
            raise EngineUnavailable(f"engine {self.url} broke the stream: {exc}") from None
        self.ended = True

    async def close(self) -> None:
        """Release the connection (idempotent) and record the call's duration."""
        if self.closed:
            return
        self.closed = True
        self.pool.leave(self.url)
        metrics.ENGINE_CALL.labels(self.pool.name, "stream").observe(time.perf_counter() - self.started)
        await self.response.aclose()


class Engines:
    """The engine pools of a gateway and the one HTTP client they share."""

    def __init__(self, settings: Settings) -> None:
        self.decode = EnginePool("decode", settings.engine_urls)
        self.prefill = EnginePool("prefill", settings.prefill_urls) if settings.prefill_urls else None
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=settings.engine_max_connections)
        timeout = httpx.Timeout(settings.engine_timeout, connect=settings.engine_connect_timeout,
                                pool=settings.engine_timeout)
        self.client = httpx.AsyncClient(limits=limits, timeout=timeout)
        self.max_connections = settings.engine_max_connections
        self.headers = {"content-type": "application/json"}
        if settings.engine_api_key:
            self.headers["authorization"] = f"Bearer {settings.engine_api_key}"
        self._background: set[asyncio.Task[None]] = set()

    async def aclose(self) -> None:
        """Wait for pending aborts (briefly) and close the client."""
        if self._background:
            await asyncio.wait(self._background, timeout=2)
        await self.client.aclose()

    async def _send(self, pool: EnginePool, body: dict[str, Any], request_id: str,
                    stream: bool, where: list[str] | None = None) -> tuple[str, httpx.Response]:
        content = orjson.dumps(body, default=json_default)  # media tensors (B64Payload) as strings
        headers = {**self.headers, "x-request-id": request_id}
        last: Exception | None = None
        for url in pool.order():
            pool.enter(url)
            if where is not None:
                where.append(url)
            try:
                response = await self._post(url, content, headers, stream)
            except httpx.TimeoutException:
                pool.leave(url)
                metrics.ENGINE_ERRORS.labels(pool.name, "timeout").inc()
                raise EngineTimeout(f"engine {url} did not answer in time (--engine-timeout)") from None
            except httpx.TransportError as exc:  # refused, reset, DNS: try the next engine
                pool.leave(url)
                metrics.ENGINE_ERRORS.labels(pool.name, "unreachable").inc()
                logger.warning("engine %s unreachable: %s", url, exc)
                last = exc
                continue
            except BaseException:
                pool.leave(url)
                raise
            if response.status_code >= 400:
                raw = await response.aread()
                await response.aclose()
                pool.leave(url)
                message = _message(response, raw)
                if response.status_code in CLIENT_ERRORS:
                    metrics.ENGINE_ERRORS.labels(pool.name, "rejected").inc()
                    raise EngineRejected(message)
                metrics.ENGINE_ERRORS.labels(pool.name, "failed").inc()
                raise EngineUnavailable(f"engine {url} answered {response.status_code}: {message}")
            return url, response
        raise EngineUnavailable(f"no {pool.name} engine reachable ({', '.join(pool.urls)}): {last}")

    async def _post(self, url: str, content: bytes, headers: dict[str, str], stream: bool) -> httpx.Response:
        """One generate POST. A connection the engine closed while it sat in the keep-alive pool
        (uvicorn closes it after a handler raised, even though it answered 500) fails with a
        read/write/protocol error before any answer byte, while the engine itself is up: that
        send is made once more, on a new connection, before the engine counts as unreachable.
        A refused connection (``ConnectError``) is not retried here: the next engine is tried."""
        for attempt in (0, 1):
            request = self.client.build_request("POST", url + GENERATE, content=content, headers=headers)
            try:
                return await self.client.send(request, stream=stream)
            except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError):
                if attempt:
                    raise
                logger.info("engine %s closed a pooled connection; sending again", url)
        raise AssertionError("unreachable")

    async def generate(self, pool: EnginePool, body: dict[str, Any], request_id: str,
                       where: list[str] | None = None) -> dict[str, Any]:
        """A non-streaming generate call; the engine's ``GenerateResponse`` as a dict.
        ``where`` collects the URL the call went to (for an abort)."""
        started = time.perf_counter()
        url, response = await self._send(pool, body, request_id, stream=False, where=where)
        try:
            result = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            metrics.ENGINE_ERRORS.labels(pool.name, "failed").inc()
            raise EngineUnavailable(f"engine {url} answered with invalid JSON") from None
        finally:
            pool.leave(url)
            metrics.ENGINE_CALL.labels(pool.name, "json").observe(time.perf_counter() - started)
        if not isinstance(result, dict):
            raise EngineUnavailable(f"engine {url} answered with a non-object")
        return result

    async def open_stream(self, pool: EnginePool, body: dict[str, Any], request_id: str,
                          where: list[str] | None = None) -> EngineStream:
        """A streaming generate call whose status was 200 (errors raised before any event)."""
        started = time.perf_counter()
        url, response = await self._send(pool, body, request_id, stream=True, where=where)
        return EngineStream(pool, url, response, started)

    def abort(self, pool: EnginePool, url: str, engine_ids: list[str], reason: str) -> None:
        """Ask ``url`` to abort ``engine_ids`` in the background (never delays the client)."""
        metrics.ABORTS.labels(pool.name, reason).inc()
        task = asyncio.get_running_loop().create_task(self._abort(pool, url, engine_ids))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _abort(self, pool: EnginePool, url: str, engine_ids: list[str]) -> None:
        try:
            response = await self.client.post(url + ABORT, content=orjson.dumps({"request_ids": engine_ids}),
                                              headers=self.headers, timeout=10)
            if response.status_code >= 400:
                raise httpx.HTTPStatusError("abort refused", request=response.request, response=response)
        except httpx.HTTPError as exc:
            metrics.ENGINE_ERRORS.labels(pool.name, "abort").inc()
            logger.warning("abort of %s at %s failed: %s", engine_ids, url, exc)
