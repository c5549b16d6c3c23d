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
that engine stream and sends the engine an abort for it (``/inference/v1/abort_requests``). A
JSON request with stop strings is decoded as a stream too (:func:`collect`) for that reason.
The events of one network read are merged per choice before their derender step
(:func:`merge_events`).
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
from ...errors import RenderServiceError, to_error_body
from ...models import ModelBundle
from ...protocol.anthropic import error_type as anthropic_error_type
from ...protocol.derender import GenerateTokensStreamResponse, Usage
from ...settings import Settings
from . import metrics
from .engines import (
    CLIENT_ERRORS,
    EngineOverloaded,
    EngineRejected,
    Engines,
    EngineStream,
    EngineTimeout,
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
    each: ``i * n``); ``live`` is its in-memory derender stream (streaming only); ``sent_to`` the
    decode URLs its call was sent to (the last one in use), so that a call cut before the engine
    answered its status line can still be aborted (:func:`_abort_leg`).
    """

    rendered: dict[str, Any]
    offset: int = 0
    live: LiveStream | None = None
    stream: EngineStream | None = None
    reader: AsyncIterator[list[bytes]] | None = None
    first: list[bytes] | None = None
    engine_ids: set[str] = field(default_factory=set)
    sent_to: list[str] = field(default_factory=list)
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
    stops = not stream and has_stop_strings(body)
    for i, leg_body in enumerate(rendered):
        leg = Leg(leg_body)
        leg.offset = i * leg.n
        if stream or stops:  # without a stream: to spot the stop string (:func:`collect`)
            leg.live = opener(bundle, settings, body, leg_body["token_ids"], base)
            if stops and not leg.live.start.stops:
                leg.live = None
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


# --- engine events ----------------------------------------------------------------------------


def merge_events(batch: list[bytes]) -> list[dict[str, Any]]:
    """The ``data:`` payloads of one network read as engine events, consecutive events of one
    choice merged into one (token ids and logprobs concatenated, the last event's finish and stop
    reason, metrics and ``kv_transfer_params``), as vLLM's ``RequestOutputCollector`` merges the
    outputs a consumer has not taken yet: the same text, one derender step instead of many.
    Usage-only events stay as they are. Events are JSON objects, not yet validated.

    Raises:
        RenderServiceError: an error event (:func:`engine_stream_error`), or
            ``EngineUnavailable`` for a payload that is not a JSON object.
    """
    out: list[dict[str, Any]] = []
    open_: dict[int, dict[str, Any]] = {}  # index → its merged choice still open (no finish yet)
    for data in batch:
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            event = None
        if not isinstance(event, dict):
            metrics.ENGINE_ERRORS.labels("decode", "stream").inc()
            raise EngineUnavailable(f"engine sent an invalid stream event: {data[:100]!r}")
        if "error" in event:
            metrics.ENGINE_ERRORS.labels("decode", "stream").inc()
            raise engine_stream_error(event)
        choices = event.get("choices")
        if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
            out.append(event)  # usage-only (or malformed: the step says so)
            open_.clear()
            continue
        choice = choices[0]
        index = choice.get("index", 0)
        into = open_.get(index) if isinstance(index, int) else None
        if into is None:
            out.append(event)
            if choice.get("finish_reason") is None:
                open_[index] = event
            continue
        _extend(into, event)
        if choice.get("finish_reason") is not None:
            del open_[index]
    return out


def _extend(into: dict[str, Any], event: dict[str, Any]) -> None:
    """Append the one choice of ``event`` to the one choice of ``into`` (same index)."""
    a, b = into["choices"][0], event["choices"][0]
    into["choices"][0] = {**a, **b, "token_ids": (a.get("token_ids") or []) + (b.get("token_ids") or [])}
    la, lb = a.get("logprobs"), b.get("logprobs")
    if isinstance(la, dict) or isinstance(lb, dict):
        content = ((la or {}).get("content") or []) + ((lb or {}).get("content") or [])
        into["choices"][0]["logprobs"] = {**(lb or la or {}), "content": content}
    for key in ("usage", "metrics", "kv_transfer_params"):
        if event.get(key) is not None:
            into[key] = event[key]


def parse_event(event: dict[str, Any]) -> GenerateTokensStreamResponse:
    """Validate one (merged) engine event.

    Raises:
        EngineUnavailable: the event does not have the upstream stream shape.
    """
    try:
        return GenerateTokensStreamResponse.model_validate(event)
    except ValidationError as exc:
        metrics.ENGINE_ERRORS.labels("decode", "stream").inc()
        raise EngineUnavailable(f"engine sent an invalid stream event: {exc.errors()[:1]}") from None


def engine_events(batch: list[bytes]) -> list[GenerateTokensStreamResponse]:
    """The validated engine events of one network read (:func:`merge_events`); one payload alone,
    the common case of a gateway that keeps up with its engine, is validated straight from its
    bytes (pydantic's JSON parser: no intermediate dict).

    Raises:
        EngineUnavailable: an error event or an event not in the upstream stream shape.
    """
    if len(batch) == 1 and not batch[0].startswith(b'{"error"'):
        try:
            return [GenerateTokensStreamResponse.model_validate_json(batch[0])]
        except ValidationError:
            pass  # not the shape: say why as the merged path does
    return [parse_event(raw) for raw in merge_events(batch)]


def has_stop_strings(body: dict[str, Any]) -> bool:
    """Whether a client request names stop strings (``stop``; Anthropic ``stop_sequences``)."""
    return bool(body.get("stop") or body.get("stop_sequences"))


# --- non-streaming ----------------------------------------------------------------------------


async def generate_all(engines: Engines, legs: list[Leg]) -> list[dict[str, Any]]:
    """Prefill and decode every leg concurrently; the engines' responses in leg order.
    Each leg's ``sent_to`` collects the URLs of its decode call, for aborts. A leg with stop strings
    (``leg.live`` set by :func:`prepare`) is decoded as a stream (:func:`collect`), so the
    engine request is aborted as soon as its stop string shows."""

    async def one(leg: Leg) -> dict[str, Any]:
        body = await decode_body(engines, leg)
        if leg.live is not None:
            return await collect(engines, leg, body)
        return await engines.generate(engines.decode, body, leg.request_id, leg.sent_to)

    return list(await asyncio.gather(*(one(leg) for leg in legs)))


async def collect(engines: Engines, leg: Leg, body: dict[str, Any]) -> dict[str, Any]:
    """Decode one leg as a stream (for a client that did not ask for one) and return what the
    engine's JSON answer would have been, up to the stop string: the events read through the
    leg's in-memory derender only to spot the stop; once every choice has ended, the reading
    stops and the engine request is aborted (``stop_string``). The answer holds each choice's
    token ids read so far (a choice cut by its stop string: no ``finish_reason``; the batch
    derender finds the stop string in them again and ends it as ``stop``) and a usage block over
    those ids.

    Raises:
        EngineUnavailable, EngineTimeout, EngineRejected: as the JSON call.
    """
    live = leg.live
    assert live is not None
    stream_body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    stream = leg.stream = await engines.open_stream(engines.decode, stream_body, leg.request_id, leg.sent_to)
    choices: dict[int, dict[str, Any]] = {}
    usage: dict[str, Any] | None = None
    try:
        async for batch in stream.events():
            for event in engine_events(batch):
                if event.request_id:
                    leg.engine_ids.add(event.request_id)
                if event.usage is not None:
                    usage = event.usage.model_dump()
                if not event.choices:
                    continue
                got = event.choices[0]
                c = choices.setdefault(got.index, {"index": got.index, "token_ids": [], "finish_reason": None,
                                                   "stop_reason": None, "logprobs": None})
                c["token_ids"] += got.token_ids or ()
                c["finish_reason"], c["stop_reason"] = got.finish_reason, got.stop_reason
                if got.logprobs is not None:
                    c["logprobs"] = {"content": (c["logprobs"] or {"content": []})["content"]
                                     + got.logprobs.model_dump()["content"]}
                _, stop = live.step(event)
                if stop and live.finished(leg.n) and not stream.ended:
                    leg.stopped = True
                    _abort_leg(engines, leg, "stop_string")
                    break
            if leg.stopped:
                break
    finally:
        await stream.close()
        leg.live = None
    received = sum(len(c["token_ids"]) for c in choices.values())
    if leg.stopped or usage is None:
        usage = usage_block(len(leg.rendered["token_ids"]), received)
    return {"request_id": next(iter(sorted(leg.engine_ids)), leg.request_id), "usage": usage,
            "choices": [choices[i] for i in sorted(choices)], "prompt_logprobs": None,
            "prompt_token_ids": None, "kv_transfer_params": None}


UNANSWERED_ABORTS = ("client_disconnect", "timeout")
"""Reasons that abort a decode call sent but not answered yet (no status line): the engine may
hold the request. An error there (refused connection, an engine's error status) left none."""


def _abort_leg(engines: Engines, leg: Leg, reason: str) -> None:
    """Abort a leg's engine request once (its engine ids, or the one its request id gives) at the
    engine its stream reads from, or, for a decode call cut (``reason`` in
    :data:`UNANSWERED_ABORTS`) while it waited for the engine's status line, at the URL it was
    sent to: the engine may already run it (and an abort of an id it does not know is a no-op)."""
    if leg.aborted:
        return
    if leg.stream is not None:
        pool, url = leg.stream.pool, leg.stream.url
    elif leg.sent_to and reason in UNANSWERED_ABORTS:
        pool, url = engines.decode, leg.sent_to[-1]
    else:
        return
    leg.aborted = True
    ids = sorted(leg.engine_ids) or [engine_request_id(leg.request_id)]
    engines.abort(pool, url, ids, reason)


def abort_unanswered(engines: Engines, legs: list[Leg], reason: str) -> None:
    """Abort every leg whose decode call was sent and has not ended (:func:`_abort_leg`)."""
    for leg in legs:
        if leg.stream is None or not leg.stream.ended:
            _abort_leg(engines, leg, reason)


def derender_batch(bundle: ModelBundle, settings: Settings, body: dict[str, Any], legs: list[Leg],
                   results: list[dict[str, Any]], api: str) -> dict[str, Any]:
    """Batch derender of the engines' answers (worker thread); ids are the rendered ones.
    ``usage.prompt_tokens`` is the length of each rendered prompt (the gateway rendered it; as
    vLLM's serve counts ``len(prompt_token_ids)``; the bare derender counts only what its caller
    sends)."""
    for result in results:
        result["request_id"] = response_id(body, api)
    if api == "completions":
        return derender_completion(bundle, settings, {
            "model": body.get("model"), "generate_responses": results, "completion_request": body,
            "prompt_token_ids": [leg.rendered["token_ids"] for leg in legs],
            "prompt_tokens": [len(leg.rendered["token_ids"]) for leg in legs]})
    common = {"model": body.get("model"), "generate_response": results[0],
              "prompt_token_ids": legs[0].rendered["token_ids"],
              "prompt_tokens": len(legs[0].rendered["token_ids"])}
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
    full engine (429, 503) is :class:`EngineOverloaded`, a refusal of the client's own request
    (400, 413, 422, as for an engine's HTTP status: :data:`engines.CLIENT_ERRORS`)
    :class:`EngineRejected`, anything else :class:`EngineUnavailable` (502); the message is the
    engine's."""
    err = payload.get("error") if isinstance(payload, dict) else None
    message = str(err.get("message", payload)) if isinstance(err, dict) else str(payload)
    code = err.get("code") if isinstance(err, dict) else None
    if code in (429, 503):
        return EngineOverloaded(message)
    if code in CLIENT_ERRORS:
        return EngineRejected(message)
    return EngineUnavailable(message)


def failure_reason(exc: BaseException) -> str:
    """The ``engine_aborts_total`` reason of a stream ended by ``exc``."""
    if isinstance(exc, asyncio.CancelledError):
        return "client_disconnect"
    return "timeout" if isinstance(exc, EngineTimeout) else "error"


async def _all(coros: list[Any]) -> None:
    """Run ``coros`` concurrently; on the first failure cancel (and wait for) the rest, re-raise."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


class GatewayStream:
    """One client stream over its legs' engine streams. :meth:`open` (prefill, decode call, the
    first engine chunk of every leg: errors until then are plain HTTP errors), iterate
    :meth:`events` (SSE bytes), then always :meth:`close` (stops reading, aborts engine requests
    not finished, frees the state)."""

    def __init__(self, engines: Engines, legs: list[Leg], endpoint: str, arrived: float,
                 include_usage: bool, api: str = "chat") -> None:
        self.engines = engines
        self.named = api in NAMED_EVENTS
        self.api = api
        self.legs = legs
        self.endpoint = endpoint
        self.arrived = arrived
        self.include_usage = include_usage
        self.failure: str | None = None  # abort reason once an error ended the stream
        self._tasks: list[asyncio.Task[None]] = []
        self._agen: AsyncIterator[bytes] | None = None
        self._open = False
        self._head = b""
        self._last: float | None = None
        self._ttft = metrics.TTFT.labels(endpoint)
        self._itl = metrics.ITL.labels(endpoint)

    async def open(self) -> None:
        """Prefill, open every leg's decode stream and derender its first engine chunk.

        Raises:
            EngineUnavailable, EngineTimeout, EngineRejected, RenderServiceError: before any byte
            went to the client (the stream is closed, the engine requests aborted).
        """

        async def one(leg: Leg) -> None:
            body = await decode_body(self.engines, leg)
            engines = self.engines
            leg.stream = await engines.open_stream(engines.decode, body, leg.request_id, leg.sent_to)
            leg.reader = leg.stream.events()
            leg.first = await anext(leg.reader, None)  # type: ignore[arg-type]

        metrics.STREAMS.inc()
        self._open = True
        try:
            await _all([one(leg) for leg in self.legs])
            self._head = b"".join(self._render(leg, leg.first) for leg in self.legs if leg.first)
        except BaseException as exc:
            self.failure = failure_reason(exc)
            await self.close(disconnected=False)
            raise

    def events(self) -> AsyncIterator[bytes]:
        """The client's SSE events, ending with ``data: [DONE]`` (errors as an error event)."""
        self._agen = self._events()
        return self._agen

    async def _source(self) -> AsyncIterator[tuple[Leg, list[bytes]]]:
        live = [leg for leg in self.legs if not leg.stopped and leg.reader is not None]
        if len(live) == 1:
            leg = live[0]
            agen = leg.reader
            assert agen is not None
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
            assert leg.reader is not None
            try:
                async for data in leg.reader:
                    await queue.put((leg, data))
                    if leg.stopped:
                        break
            except RenderServiceError as exc:
                await queue.put((leg, exc))
            await queue.put(None)

        self._tasks = [asyncio.get_running_loop().create_task(pump(leg)) for leg in live]
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
        try:
            if self._head:
                yield self._head
            async for leg, batch in self._source():
                out = self._render(leg, batch)
                if out:
                    yield out
            if self.include_usage and not self.named:
                yield sse(self._usage_chunk())
        except RenderServiceError as exc:
            self.failure = failure_reason(exc)
            yield self._error(to_error_body(exc))
        if not self.named:
            yield DONE

    def _render(self, leg: Leg, batch: list[bytes]) -> bytes:
        """The SSE bytes of one network read of a leg's engine stream (its events merged per
        choice, one derender step each); sets ``leg.stopped`` (and aborts) at a stop string."""
        out: list[bytes] = []
        for event in engine_events(batch):
            chunk = self._step(leg, event)
            if chunk is None:
                continue
            if chunk["choices"]:
                now = time.perf_counter()
                if self._last is None:
                    self._ttft.observe(now - self.arrived)
                else:
                    self._itl.observe(now - self._last)
                self._last = now
            if self.named:
                out.extend(named_sse(c["events"]) for c in chunk["choices"])
            else:
                out.append(sse(chunk))
            if leg.stopped:
                break
        return b"".join(out)

    def _error(self, body: dict[str, Any]) -> bytes:
        return named_error(self.api, body) if self.named else sse(body)

    def _step(self, leg: Leg, event: GenerateTokensStreamResponse) -> dict[str, Any] | None:
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
            _abort_leg(self.engines, leg, "stop_string")
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

    async def close(self, disconnected: bool) -> None:
        """Stop reading; abort what the engines still generate (reason: the error that ended the
        stream, else ``client_disconnect`` or ``stop_string``); release connections and state."""
        if self._open:
            self._open = False
            metrics.STREAMS.dec()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)  # a reader runs in no pump now
        if self._agen is not None:
            await self._agen.aclose()  # type: ignore[attr-defined]
        reason = self.failure or ("client_disconnect" if disconnected else "stop_string")
        abort_unanswered(self.engines, self.legs, reason)  # also a call cut before its status line
        for leg in self.legs:
            if leg.stream is None:
                continue
            if leg.reader is not None:
                await leg.reader.aclose()  # type: ignore[attr-defined]
            await leg.stream.close()
            leg.live = None
