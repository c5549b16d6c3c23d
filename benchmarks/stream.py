"""Streaming derender sections (in-process ``derender_chat``): CPU per 1-token chunk by output position,
whole stream vs one batch derender, and the request-body size of a later chunk by prompt length.

Model output used: ``<think>\\n`` + a long reasoning text + ``</think>\\n\\n<tool_call>{get_weather}``
``</tool_call><|im_end|>`` (qwen3 reasoning parser + hermes tool parser), one token per chunk.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Any

import orjson

from .data import template_text
from .table import Results, not_implemented

TARGET_CHUNK_MS = ("<=", 0.3)
TARGET_FLAT = ("<=", 1.2)
TARGET_STREAM_VS_BATCH = ("<=", 1.5)
TARGET_BODY_B = ("<=", 1024.0)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
SENTENCE = (
    "The user wants the weather in Paris, so I should consider which tool applies, what the "
    "arguments are, and whether any detail is missing before calling it. "
)
TAIL = (
    '\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
    "</tool_call><|im_end|>"
)


def parser_settings(settings: Any, max_model_len: int | None = None) -> Any:
    """The run's settings with qwen3 + hermes parsers (and optionally a larger max_model_len)."""
    over = dict(reasoning_parser="qwen3", tool_call_parser="hermes", enable_auto_tool_choice=True)
    if max_model_len:
        over["max_model_len"] = max_model_len
    return dataclasses.replace(settings, **over)


def chat_request(user_text: str = "What's the weather in Paris?") -> dict[str, Any]:
    """The chat request both render and derender see."""
    return {"messages": [{"role": "user", "content": user_text}], "tools": TOOLS, "stream": True}


def output_ids(encode: Any, think_tokens: int) -> list[int]:
    """Ids of the model output: a reasoning block of at least ``think_tokens`` tokens, then a tool call."""
    repeats = think_tokens // len(encode(SENTENCE)) + 1
    while True:
        ids = encode("<think>\n" + SENTENCE * repeats + TAIL)
        if len(ids) >= think_tokens:
            return ids
        repeats += repeats // 8 + 1


def chunk_body(
    token_ids: list[int],
    state: Any,
    *,
    finish: str | None = None,
    prompt_ids: list[int] | None = None,
    request: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A streaming derender body for one generate chunk (fields left out when ``None``)."""
    choice = {
        "index": 0,
        "finish_reason": finish,
        "stop_reason": None,
        "token_ids": token_ids,
        "routed_experts": None,
        "sampling_mask": None,
        "weight_versions": None,
        "logprobs": None,
    }
    body: dict[str, Any] = {
        "stream": True,
        "generate_chunk": {
            "request_id": "generate-tokens-chatcmpl-bench",
            "usage": None,
            "output_mode": "tokens",
            "choices": [choice],
        },
        "stream_state": state,
    }
    if prompt_ids is not None:
        body["prompt_token_ids"] = prompt_ids
    if request is not None:
        body["chat_request"] = request
    return body


def _derender() -> Any:
    from render_service.derender import derender_chat

    return derender_chat


def _skip_all(res: Results, exc: BaseException, names: list[tuple[str, Any, str]]) -> None:
    reason = (
        "derender_chat raises NotImplementedError" if not_implemented(exc) else f"{type(exc).__name__}: {exc}"
    )
    for name, target, unit in names:
        res.skip("stream", name, reason, target, unit)


def stream(res: Results, ctx: Any) -> None:
    """Per-chunk CPU at output positions, flatness, and whole stream vs batch."""
    positions = ctx.stream_positions
    names = [(f"derender chunk @ {p}", TARGET_CHUNK_MS, "ms") for p in positions]
    names += [
        (f"chunk@{positions[-1]} / chunk@{positions[0]}", TARGET_FLAT, "x"),
        ("whole stream / one batch derender", TARGET_STREAM_VS_BATCH, "x"),
    ]
    settings = parser_settings(ctx.settings)
    request = chat_request()
    prompt_ids = ctx.encode(template_text(ctx.bundle.tokenizer, request))
    ids = output_ids(ctx.encode, positions[-1] + 40)
    derender = _derender()
    cpu, state, t_start = [], None, time.perf_counter()
    try:
        for warm in range(3):  # first calls pay one-off set-up (parser tables, imports): not per-chunk cost
            warm_body = chunk_body(ids[warm : warm + 1], None, prompt_ids=prompt_ids, request=request)
            derender(ctx.bundle, settings, warm_body)
        for i, tid in enumerate(ids):
            body = chunk_body(
                [tid],
                state,
                finish="stop" if i == len(ids) - 1 else None,
                prompt_ids=prompt_ids,
                request=request,
            )
            t0 = time.process_time()
            out = derender(ctx.bundle, settings, body)
            cpu.append(time.process_time() - t0)
            state = out["stream_state"]
            if time.perf_counter() - t_start > ctx.stream_budget:
                break
    except Exception as exc:  # noqa: BLE001 - reported as skip rows
        _skip_all(res, exc, names)
        return
    at = {}
    for p in positions:
        window = cpu[p : p + 21]
        if window:
            at[p] = statistics.median(window) * 1e3
            res.add("stream", f"derender chunk @ {p}", at[p], target=TARGET_CHUNK_MS)
        else:
            res.skip(
                "stream",
                f"derender chunk @ {p}",
                f"stream stopped at {len(cpu)} of {len(ids)} tokens (--stream-budget {ctx.stream_budget:g}s)",
                TARGET_CHUNK_MS,
            )
    if positions[0] in at and positions[-1] in at:
        res.add(
            "stream",
            f"chunk@{positions[-1]} / chunk@{positions[0]}",
            at[positions[-1]] / at[positions[0]],
            "x",
            TARGET_FLAT,
        )
    if len(cpu) < len(ids):
        res.skip(
            "stream",
            "whole stream / one batch derender",
            "stream not finished within budget",
            TARGET_STREAM_VS_BATCH,
            "x",
        )
        return
    _stream_vs_batch(res, ctx, settings, request, prompt_ids, ids, sum(cpu))


def _stream_vs_batch(
    res: Results,
    ctx: Any,
    settings: Any,
    request: dict[str, Any],
    prompt_ids: list[int],
    ids: list[int],
    stream_cpu: float,
) -> None:
    batch_request = dict(request, stream=False)
    body = {
        "generate_response": {
            "request_id": "generate-tokens-chatcmpl-bench",
            "choices": [{"index": 0, "token_ids": ids, "finish_reason": "stop", "stop_reason": None}],
        },
        "prompt_token_ids": prompt_ids,
        "chat_request": batch_request,
    }
    derender = _derender()
    try:
        samples = []
        for _ in range(max(3, ctx.repeat // 2)):
            t0 = time.process_time()
            derender(ctx.bundle, settings, body)
            samples.append(time.process_time() - t0)
    except Exception as exc:  # noqa: BLE001
        _skip_all(res, exc, [("whole stream / one batch derender", TARGET_STREAM_VS_BATCH, "x")])
        return
    batch = statistics.median(samples)
    res.add(
        "stream",
        "whole stream / one batch derender",
        stream_cpu / batch,
        "x",
        TARGET_STREAM_VS_BATCH,
        note=f"{len(ids)} tokens: stream {stream_cpu * 1e3:.0f} ms CPU, batch {batch * 1e3:.1f} ms",
    )


def _later_chunk_body(ctx: Any, settings: Any, prompt_tokens: int) -> tuple[int, str]:
    """Bytes of the smallest accepted body for chunk 3 of a stream whose prompt has ~``prompt_tokens``."""
    per = len(ctx.encode(SENTENCE))
    request = chat_request(SENTENCE * (prompt_tokens // per + 1))
    prompt_ids = ctx.encode(template_text(ctx.bundle.tokenizer, request))
    ids = output_ids(ctx.encode, 20)
    derender, state = _derender(), None
    for tid in ids[:2]:
        state = derender(
            ctx.bundle, settings, chunk_body([tid], state, prompt_ids=prompt_ids, request=request)
        )["stream_state"]
    variants = [
        ("generate_chunk + stream_state", {}),
        ("+ chat_request", {"request": request}),
        ("+ chat_request + prompt_token_ids", {"request": request, "prompt_ids": prompt_ids}),
    ]
    last: BaseException | None = None
    for label, extra in variants:
        body = chunk_body([ids[2]], state, **extra)
        try:
            derender(ctx.bundle, settings, body)
        except Exception as exc:  # noqa: BLE001 - try the next, larger body
            if not_implemented(exc):
                raise
            last = exc
            continue
        return len(orjson.dumps(body)), f"{len(prompt_ids)}-token prompt; fields: {label}"
    raise RuntimeError(f"no body variant accepted: {last}")


def body_size(res: Results, ctx: Any) -> None:
    """Request-body bytes of a later streaming chunk for short and very long prompts."""
    settings = parser_settings(ctx.settings, max_model_len=ctx.body_prompts[-1] * 2 + 4096)
    bundle = ctx.bundle
    ctx.bundle = dataclasses.replace(bundle, max_model_len=settings.max_model_len)
    try:
        for n in ctx.body_prompts:
            name = f"later-chunk body, {n // 1000}k-token prompt"
            target = TARGET_BODY_B if n >= 100_000 else None
            try:
                size, note = _later_chunk_body(ctx, settings, n)
            except Exception as exc:  # noqa: BLE001 - reported as a skip row
                reason = (
                    "derender_chat raises NotImplementedError" if not_implemented(exc) else str(exc)[:120]
                )
                res.skip("body", name, reason, target, "B")
                continue
            res.add("body", name, float(size), "B", target, note)
    finally:
        ctx.bundle = bundle
