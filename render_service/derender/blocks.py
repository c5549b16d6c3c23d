"""One derender step's output as a sequence of typed pieces, shared by the Anthropic Messages and
OpenAI Responses derenders, which both cut the output into blocks / items by kind.

A step's pieces come in the order ``thinking`` (reasoning), ``text`` (content), then its tool-call
pieces in call order; a piece of another kind than the open block closes it and opens a new one.
Batch derender is one step, so a stream gives the same blocks as the batch answer whenever the
model's output itself runs reasoning → content → tool calls (the shape of every supported
parser's output); an output that interleaves them (content after a tool call) streams into more
blocks than its batch answer has.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic_core import from_json

from ..protocol.derender import StreamState
from .pipeline import StepOutput


@dataclass(frozen=True, slots=True)
class Piece:
    """``kind``: ``thinking``, ``text`` or ``tool``. ``text``: the new text or argument characters.
    ``call_id`` / ``name``: set on the piece that starts a tool call."""

    kind: str
    text: str
    call_id: str | None = None
    name: str | None = None


def pieces(out: StepOutput) -> Iterator[Piece]:
    """The step's pieces in block order (see the module docstring)."""
    if out.reasoning:
        yield Piece("thinking", out.reasoning)
    if out.content:
        yield Piece("text", out.content)
    for call in out.tool_calls:
        fn = call.get("function") or {}
        if fn.get("name") is not None:
            yield Piece("tool", fn.get("arguments") or "", call.get("id"), fn["name"])
        elif fn.get("arguments"):
            yield Piece("tool", fn["arguments"])


def opens_block(state: StreamState, piece: Piece) -> bool:
    """Whether ``piece`` starts a new block (another kind, or a new tool call)."""
    return piece.kind != state.blk or piece.name is not None


def tool_input(arguments: str, cut: bool = False) -> dict[str, Any]:
    """A call's arguments as the object Anthropic's ``input`` is: parsed JSON, ``{}`` for empty
    arguments; arguments that are not a JSON object are kept under ``"_raw"`` (never lost).

    ``cut``: the call was cut by ``max_tokens``; its arguments are a JSON prefix, read as the
    ``anthropic`` SDK's stream accumulator reads the same ``input_json_delta``s (partial JSON:
    complete values kept, an unfinished trailing key, string or literal dropped; pydantic-core's
    ``from_json(allow_partial=True)``, the jiter parse the SDK runs), so a batch answer and a
    streamed one give the client the same ``input``; ``"_raw"`` only if it is no JSON prefix."""
    if not arguments.strip():
        return {}
    try:
        value = from_json(arguments, allow_partial=True) if cut else json.loads(arguments)
    except ValueError:  # json.JSONDecodeError is a ValueError
        return {"_raw": arguments}
    return value if isinstance(value, dict) else {"_raw": arguments}


def input_tokens(req: Any) -> int:
    """``usage.input_tokens`` of a Messages / Responses derender (batch, or a stream's first
    call): the body's ``prompt_tokens``, else the length of its prompt ids (the body's, else the
    engine output's ``prompt_token_ids``), else 0. (The chat derender counts only what the caller
    sent, as vLLM 0.33; these APIs have no vLLM counterpart and count the prompt they were given.)"""
    if req.prompt_tokens is not None:
        return int(req.prompt_tokens)
    gen = req.generate_chunk if hasattr(req, "generate_chunk") else req.generate_response
    prompt = req.prompt_token_ids if req.prompt_token_ids is not None else gen.prompt_token_ids
    return len(prompt or ())


def events_reply(reply: dict[str, Any]) -> dict[str, Any]:
    """A :func:`~render_service.derender.flow.run_stream` reply whose one choice carries the
    API's events → ``{"events", "stream_state", "stop_generation"}`` (no events for a chunk
    without a choice)."""
    choices = reply["chunk"]["choices"]
    return {
        "events": choices[0]["events"] if choices else [],
        "stream_state": reply["stream_state"],
        "stop_generation": reply["stop_generation"],
    }
