"""The four hops of one OpenAI request: render → (prefill) → decode → derender.

* render: :func:`render_service.render.render_chat` / ``render_completion`` in-process (one
  ``GenerateRequest`` per prompt, a *leg*);
* prefill (a prefill pool is configured): the leg with ``max_tokens: 1``, ``stream: false``, no
  ``min_tokens`` / ``stream_options`` and ``kv_transfer_params: {"do_remote_decode": true, ...}``,
  sent with the same ``X-Request-Id`` as the decode call (vLLM's P/D proxy handshake);
* decode: the leg with the prefill's ``kv_transfer_params``, streamed when the client streams;
* derender: in-process, batch (:func:`render_service.derender.derender_chat`) or one engine event at
  a time through a :class:`~render_service.derender.flow.LiveStream` held for the stream's life.

A stop string that ends every choice of a leg, or a client that goes away, stops the reading of
that engine stream and sends the engine an abort for it (``/inference/v1/abort_requests``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import ValidationError

from ... import render
from ...derender import derender_chat, derender_completion, derender_messages, derender_responses
from ...derender.anthropic import open_messages_stream
from ...derender.chat import open_chat_stream
from ...derender.completions import open_completion_stream
from ...derender.flow import LiveStream, usage_block
from ...derender.responses import open_responses_stream
from ...errors import RenderServiceError, error_body, to_error_body
from ...models import ModelBundle
from ...protocol.anthropic import error_type as anthropic_error_type
from ...protocol.derender import GenerateTokensStreamResponse, Usage
from ...settings import Settings
from . import metrics
from .engines import (
    EngineOverloaded,
    EngineRejected,
    Engines,
    EngineStream,
    EngineUnavailable,
    engine_request_id,
)

PREFILL_KV = {
    "do_remote_decode": True,
    "do_remote_prefill": False,
    "remote_engine_id": None,
    "remote_block_ids": None,
    "remote_host": None,
    "remote_port": None,
}
"""``kv_transfer_params`` of the prefill call (as vLLM's P/D proxy sends them)."""


@dataclass
class Leg:
    """One engine request of a client request (chat: one; completions: one per prompt).

    ``offset`` shifts its choice indexes in the client's response (prompt ``i`` of ``n`` choices
    each: ``i * n``); ``live`` is its in-memory derender stream (streaming only).
    """

    rendered: dict[str, Any]
    offset: int = 0
    live: LiveStream | None = None
    stream: EngineStream | None = None
    engine_ids: set[str] = field(default_factory=set)
    stopped: bool = False
    aborted: bool = False
    usage: Usage | None = None
    completion_tokens: int = 0

    @property
    def request_id(self) -> str:
        return str(self.rendered["request_id"])

    @property
    def n(self) -> int:
        return int(self.rendered["sampling_params"].get("n") or 1)


API_PREFIX = {"chat": "chatcmpl-", "completions": "cmpl-", "messages": "msg_", "responses": "resp_"}
"""Client API of a gateway request → the prefix of its response id."""
NAMED_EVENTS = ("messages", "responses")
"""APIs whose stream is named SSE events (``event: <type>``) built by their derender."""


def response_id(body: dict[str, Any], api: str) -> str:
    return f"{API_PREFIX[api]}{body['request_id']}"


def prepare(bundle: ModelBundle, settings: Settings, body: dict[str, Any], api: str) -> list[Leg]:
    """Render (CPU, worker thread) and, for a stream, open each leg's in-memory derender state.
    ``api``: ``chat``, ``completions``, ``messages`` (Anthropic) or ``responses`` (OpenAI)."""
    if api == "completions":
        rendered = render.render_completion(bundle, settings, body)
    else:
        one = {"chat": render.render_chat, "messages": render.render_messages,
               "responses": render.render_responses}[api]
        rendered = [one(bundle, settings, body)]
    stream = body.get("stream") is True
    legs = []
    base = response_id(body, api)
    opener = {"chat": open_chat_stream, "completions": open_completion_stream,
              "messages": open_messages_stream, "responses": open_responses_stream}[api]
    for i, leg_body in enumerate(rendered):
        leg = Leg(leg_body)
        leg.offset = i * leg.n
        if stream:
            leg.live = opener(bundle, settings, body, leg_body["token_ids"], base)
        legs.append(leg)
    return legs


def prefill_body(rendered: dict[str, Any]) -> dict[str, Any]:
    """The prefill call of a leg (vLLM P/D proxy: one token, no stream, remote decode)."""
    params = {k: v for k, v in rendered["sampling_params"].items() if k != "min_tokens"}
    params["max_tokens"] = 1
    return {**rendered, "sampling_params": params, "stream": False, "stream_options": None,
            "kv_transfer_params": dict(PREFILL_KV)}


async def decode_body(engines: Engines, leg: Leg) -> dict[str, Any]:
    """The decode call of a leg: after the prefill (if configured), with its ``kv_transfer_params``."""
    if engines.prefill is None:
        return leg.rendered
    result = await engines.generate(engines.prefill, prefill_body(leg.rendered), leg.request_id)
    kv = result.get("kv_transfer_params")
    return {**leg.rendered, "kv_transfer_params": kv} if kv else leg.rendered


# --- non-streaming ----------------------------------------------------------------------------


async def generate_all(engines: Engines, legs: list[Leg], where: list[str]) -> list[dict[str, Any]]:
    """Prefill and decode every leg concurrently; the engines' responses in leg order.
    ``where`` collects ``(url)`` of the decode calls, for aborts."""

    async def one(leg: Leg) -> dict[str, Any]:
        body = await decode_body(engines, leg)
        return await engines.generate(engines.decode, body, leg.request_id, where)

    return list(await asyncio.gather(*(one(leg) for leg in legs)))


def derender_batch(bundle: ModelBundle, settings: Settings, body: dict[str, Any], legs: list[Leg],
                   results: list[dict[str, Any]], api: str) -> dict[str, Any]:
    """Batch derender of the engines' answers (worker thread); ids are the rendered ones."""
    for result in results:
        result["request_id"] = response_id(body, api)
    if api == "completions":
        return derender_completion(bundle, settings, {
            "model": body.get("model"), "generate_responses": results, "completion_request": body,
            "prompt_token_ids": [leg.rendered["token_ids"] for leg in legs]})
    common = {"model": body.get("model"), "generate_response": results[0],
              "prompt_token_ids": legs[0].rendered["token_ids"]}
    if api == "messages":
        return derender_messages(bundle, settings, {**common, "messages_request": body})
    if api == "responses":
        return derender_responses(bundle, settings, {**common, "responses_request": body})
    return derender_chat(bundle, settings, {**common, "chat_request": body})


# --- streaming ------------------------------------------------------------------------------


def sse(value: Any) -> bytes:
    """One SSE event ``data: <json>\\n\\n``."""
    return b"data: " + orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS) + b"\n\n"


DONE = b"data: [DONE]\n\n"


def named_sse(events: list[dict[str, Any]]) -> bytes:
    """Named SSE events ``event: <type>\\ndata: <json>\\n\\n`` (Anthropic / Responses streams)."""
    return b"".join(b"event: " + e["event"].encode() + b"\ndata: " + orjson.dumps(e["data"]) + b"\n\n"
                    for e in events)


def named_error(api: str, body: dict[str, Any]) -> bytes:
    """An error after a named-event stream started: Anthropic's ``error`` event
    (``{"type": "error", "error": {"type", "message"}}``, ``type`` from the error's status:
    ``invalid_request_error``, ``overloaded_error``, ``timeout_error``, ``api_error``...) or the
    Responses ``error`` event (``{"type": "error", "code", "message", "param"}``)."""
    err = body["error"]
    data: dict[str, Any]
    if api == "messages":
        kind = anthropic_error_type(err["code"]) if isinstance(err.get("code"), int) else "api_error"
        data = {"type": "error", "error": {"type": kind, "message": err["message"]}}
    else:
        data = {"type": "error", "code": str(err.get("code")), "message": err["message"],
                "param": err.get("param"), "sequence_number": 0}
    return named_sse([{"event": "error", "data": data}])


def engine_stream_error(payload: Any) -> RenderServiceError:
    """The error of an engine's ``data: {"error": {...}}`` event, by the engine's ``code``: a
    full engine (429, 503) is :class:`EngineOverloaded`, another 4xx :class:`EngineRejected` (the
    request was refused), anything else :class:`EngineUnavailable` (502); the message is the
    engine's."""
    err = payload.get("error") if isinstance(payload, dict) else None
    message = str(err.get("message", payload)) if isinstance(err, dict) else str(payload)
    code = err.get("code") if isinstance(err, dict) else None
    if code in (429, 503):
        return EngineOverloaded(message)
    if isinstance(code, int) and 400 <= code < 500:
        return EngineRejected(message)
    return EngineUnavailable(message)


class GatewayStream:
    """One client stream over its legs' engine streams. Iterate :meth:`events` (SSE bytes), then
    always :meth:`close` (stops reading, aborts engine requests not finished, frees the state)."""

    def __init__(self, engines: Engines, legs: list[Leg], endpoint: str, arrived: float,
                 include_usage: bool, api: str = "chat") -> None:
        self.engines = engines
        self.named = api in NAMED_EVENTS
        self.api = api
        self.legs = legs
        self.endpoint = endpoint
        self.arrived = arrived
        self.include_usage = include_usage
        self._tasks: list[asyncio.Task[None]] = []
        self._agen: AsyncIterator[bytes] | None = None
        self._open = False

    async def open(self) -> None:
        """Prefill and open every leg's decode stream (errors here are plain HTTP errors)."""

        async def one(leg: Leg) -> None:
            body = await decode_body(self.engines, leg)
            leg.stream = await self.engines.open_stream(self.engines.decode, body, leg.request_id)

        metrics.STREAMS.inc()
        self._open = True
        try:
            await asyncio.gather(*(one(leg) for leg in self.legs))
        except BaseException:
            await self.close(disconnected=False, error=True)
            raise

    def events(self) -> AsyncIterator[bytes]:
        """The client's SSE events, ending with ``data: [DONE]`` (errors as an error event)."""
        self._agen = self._events()
        return self._agen

    async def _source(self) -> AsyncIterator[tuple[Leg, list[bytes]]]:
        if len(self.legs) == 1:
            leg = self.legs[0]
            assert leg.stream is not None
            agen = leg.stream.events()
            try:
                async for data in agen:
                    yield leg, data
                    if leg.stopped:
                        return
            finally:
                await agen.aclose()  # type: ignore[attr-defined]
            return
        queue: asyncio.Queue[tuple[Leg, list[bytes]] | tuple[Leg, BaseException] | None] = asyncio.Queue(64)

        async def pump(leg: Leg) -> None:
            assert leg.stream is not None
            try:
                async for data in leg.stream.events():
                    await queue.put((leg, data))
                    if leg.stopped:
                        break
            except RenderServiceError as exc:
                await queue.put((leg, exc))
            await queue.put(None)

        self._tasks = [asyncio.get_running_loop().create_task(pump(leg)) for leg in self.legs]
        running = len(self._tasks)
        while running:
            item = await queue.get()
            if item is None:
                running -= 1
                continue
            if isinstance(item[1], BaseException):
                raise item[1]
            yield item  # type: ignore[misc]

    async def _events(self) -> AsyncIterator[bytes]:
        last: float | None = None
        ttft, itl = metrics.TTFT.labels(self.endpoint), metrics.ITL.labels(self.endpoint)
        try:
            async for leg, batch in self._source():
                out: list[bytes] = []
                for data in batch:
                    chunk = self._step(leg, data)
                    if chunk is None:
                        continue
                    if chunk["choices"]:
                        now = time.perf_counter()
                        if last is None:
                            ttft.observe(now - self.arrived)
                        else:
                            itl.observe(now - last)
                        last = now
                    if self.named:
                        out.extend(named_sse(c["events"]) for c in chunk["choices"])
                    else:
                        out.append(sse(chunk))
                    if leg.stopped:
                        break
                if out:
                    yield b"".join(out)
            if self.include_usage and not self.named:
                yield sse(self._usage_chunk())
        except RenderServiceError as exc:
            yield self._error(to_error_body(exc))
        except ValidationError as exc:
            metrics.ENGINE_ERRORS.labels("decode", "stream").inc()
            yield self._error(error_body(f"engine sent an invalid stream event: {exc.errors()[:1]}",
                                         EngineUnavailable.error_type, 502))
        if not self.named:
            yield DONE

    def _error(self, body: dict[str, Any]) -> bytes:
        return named_error(self.api, body) if self.named else sse(body)

    def _step(self, leg: Leg, data: bytes) -> dict[str, Any] | None:
        if data.startswith(b'{"error"'):
            metrics.ENGINE_ERRORS.labels("decode", "stream").inc()
            raise engine_stream_error(orjson.loads(data))
        event = GenerateTokensStreamResponse.model_validate_json(data)
        if event.request_id:
            leg.engine_ids.add(event.request_id)
        if not event.choices:
            if event.usage is not None:
                leg.usage = event.usage
            return None
        leg.completion_tokens += len(event.choices[0].token_ids or ())
        assert leg.live is not None
        chunk, stop = leg.live.step(event)
        if stop and leg.live.finished(leg.n) and leg.stream is not None and not leg.stream.ended:
            leg.stopped = True
            self._abort(leg, "stop_string")
        if not chunk["choices"] and chunk["usage"] is None:
            return None
        if leg.offset:
            for choice in chunk["choices"]:
                choice["index"] += leg.offset
        return chunk

    def _usage_chunk(self) -> dict[str, Any]:
        prompt = completion = 0
        for leg in self.legs:
            finished = leg.usage is not None and not leg.stopped
            prompt += leg.usage.prompt_tokens if leg.usage is not None else len(leg.rendered["token_ids"])
            completion += (leg.usage.completion_tokens or 0) if finished else leg.completion_tokens  # type: ignore[union-attr]
        block = usage_block(prompt, completion)
        live = self.legs[0].live
        assert live is not None
        chunk, _ = live.step(GenerateTokensStreamResponse(usage=Usage(**block)))
        return chunk

    def _abort(self, leg: Leg, reason: str) -> None:
        if leg.aborted or leg.stream is None:
            return
        leg.aborted = True
        ids = sorted(leg.engine_ids) or [engine_request_id(leg.request_id)]
        self.engines.abort(leg.stream.pool, leg.stream.url, ids, reason)

    async def close(self, disconnected: bool, error: bool = False) -> None:
        """Stop reading; abort what the engines still generate; release connections and state."""
        if self._open:
            self._open = False
            metrics.STREAMS.dec()
        for task in self._tasks:
            task.cancel()
        if self._agen is not None:
            await self._agen.aclose()  # type: ignore[attr-defined]
        for leg in self.legs:
            if leg.stream is None:
                continue
            if not leg.stream.ended:
                self._abort(leg, "client_disconnect" if disconnected else "error" if error else "stop_string")
            await leg.stream.close()
            leg.live = None
