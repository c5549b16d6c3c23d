"""Anthropic Messages derender: engine output token ids → an Anthropic ``Message`` (batch) or the
Anthropic SSE events of one engine chunk (streaming), through the chat derender's pipeline
(detokenizer, stop strings, reasoning and tool parsers) and its signed ``stream_state``.

vLLM 0.33 has no such endpoint (its derender speaks chat completions only); the shapes follow
Anthropic's API and vLLM's own ``/v1/messages`` converters (``messages_full_converter``,
``message_stream_converter``, ``_to_anthropic_stop_reason``):

* blocks ``thinking`` (reasoning; ``signature`` empty), ``text``, ``tool_use`` (``input`` the
  parsed arguments); an output with no block gets one empty ``text`` block;
* ``stop_reason``: ``max_tokens`` for ``length``; ``tool_use`` when a tool call was made;
  ``stop_sequence`` with ``stop_sequence`` when one of ``stop_sequences`` ended the output (then
  ``stop_generation`` is true: abort the engine request); else ``end_turn``;
* ``usage``: ``input_tokens`` (``prompt_tokens`` or the prompt ids' length), ``output_tokens``.

Streaming answer: ``{"events": [{"event": type, "data": {...}}...], "stream_state",
"stop_generation"}``; write each as ``event: <type>\\ndata: <json>\\n\\n``. The first call's events
start with ``message_start``; block indices continue across calls through the state; the call
with the engine's finish (or a stop sequence) ends with ``content_block_stop``,
``message_delta`` and ``message_stop``.

Errors: as the chat derender (400; 404 unknown model), and ``messages_request`` missing when a
parser is configured (batch, or the first streaming call).
"""

from __future__ import annotations

from typing import Any

from ..api_tools import anthropic_tool_fields
from ..errors import InvalidRequest
from ..models import ModelBundle, check_model
from ..protocol.anthropic import (
    AnthropicMessagesRequest,
    DerenderMessagesRequest,
    DerenderMessagesStreamRequest,
)
from ..protocol.derender import ChatRequestFields, GenerateChoice, StreamState
from ..settings import Settings
from .blocks import Piece, events_reply, input_tokens, opens_block, pieces, tool_input
from .chat import derender_chat
from .flow import ChoiceShape, LiveStream, is_stream, open_live, run_stream
from .pipeline import StepOutput, pipeline_for

NEEDS_REQUEST = (
    "messages_request is required when a tool or reasoning parser is configured (on the first "
    "call of a stream); later streaming calls may omit it."
)


def chat_fields(req: AnthropicMessagesRequest | None, settings: Settings) -> ChatRequestFields | None:
    """What the pipeline reads of the chat form of an Anthropic request (tools, tool choice,
    ``stop_sequences`` → ``stop``, the thinking switch)."""
    if req is None:
        return None
    tools = anthropic_tool_fields(req)
    effort: str | None = req.output_config.effort if req.output_config is not None else None
    if req.thinking is not None and req.thinking.type == "disabled":
        flag = settings.anthropic_disabled_thinking_effort
        effort = "none" if flag == "auto" else flag
    history = [
        {"role": "assistant", "tool_calls": [b for b in m.content if b.type == "tool_use"]}
        for m in req.messages
        if m.role == "assistant" and not isinstance(m.content, str)
    ]
    return ChatRequestFields(
        model=req.model,
        messages=history,
        stop=req.stop_sequences,
        tools=tools.get("tools"),
        tool_choice=tools.get("tool_choice"),
        parallel_tool_calls=tools.get("parallel_tool_calls", True),
        chat_template_kwargs=req.chat_template_kwargs,
        reasoning_effort=effort,
    )


def stop_reason(finish: str | None, stop: int | str | None, tool_used: bool) -> tuple[str | None, str | None]:
    """Anthropic ``(stop_reason, stop_sequence)`` of a chat finish (vLLM 0.33
    ``_to_anthropic_stop_reason``, parsed calls counted complete)."""
    if finish == "length":
        return "max_tokens", None
    if finish not in ("stop", "tool_calls"):
        return None, None
    if tool_used or finish == "tool_calls":
        return "tool_use", None
    if isinstance(stop, str):
        return "stop_sequence", stop
    return "end_turn", None


def _usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens}


# --- batch ----------------------------------------------------------------------------------


def _message(chat: dict[str, Any], model: str) -> dict[str, Any]:
    choice = chat["choices"][0]
    msg = choice["message"]
    calls = msg.get("tool_calls") or []
    content: list[dict[str, Any]] = []
    if msg.get("reasoning"):
        content.append({"type": "thinking", "thinking": msg["reasoning"], "signature": ""})
    if msg.get("content"):
        content.append({"type": "text", "text": msg["content"]})
    for n, call in enumerate(calls, 1):
        fn = call["function"]
        cut = n == len(calls) and choice["finish_reason"] == "length"  # only the last call was cut
        content.append({"type": "tool_use", "id": call["id"], "name": fn["name"],
                        "input": tool_input(fn["arguments"], cut)})
    if not content:
        content.append({"type": "text", "text": ""})
    reason, sequence = stop_reason(choice["finish_reason"], choice["stop_reason"], bool(calls))
    usage = chat["usage"]
    return {
        "id": chat["id"],
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reason,
        "stop_sequence": sequence,
        "usage": _usage(usage["prompt_tokens"], usage["completion_tokens"]),
    }


def _batch(bundle: ModelBundle, settings: Settings, req: DerenderMessagesRequest) -> dict[str, Any]:
    name = check_model(bundle, req.model)
    if req.messages_request is None and pipeline_for(bundle, settings).parser is not None:
        raise InvalidRequest(NEEDS_REQUEST, param="messages_request")
    if len(req.generate_response.choices) != 1:
        raise InvalidRequest(
            "a Messages derender takes exactly one choice", param="generate_response.choices"
        )
    fields = chat_fields(req.messages_request, settings)
    chat = derender_chat(
        bundle,
        settings,
        {
            "model": req.model,
            "generate_response": req.generate_response.model_dump(),
            "prompt_tokens": input_tokens(req),
            "prompt_token_ids": req.prompt_token_ids,
            "chat_request": fields.model_dump() if fields is not None else None,
        },
    )
    return _message(chat, name)


# --- streaming ------------------------------------------------------------------------------


def _event(kind: str, **data: Any) -> dict[str, Any]:
    return {"event": kind, "data": {"type": kind, **data}}


def _close(state: StreamState, events: list[dict[str, Any]]) -> None:
    if state.blk:
        events.append(_event("content_block_stop", index=state.nblk - 1))
        state.blk = ""


def _open(state: StreamState, piece: Piece, events: list[dict[str, Any]]) -> None:
    _close(state, events)
    block: dict[str, Any]
    if piece.kind == "thinking":
        block = {"type": "thinking", "thinking": "", "signature": ""}
    elif piece.kind == "text":
        block = {"type": "text", "text": ""}
    else:
        block = {"type": "tool_use", "id": piece.call_id, "name": piece.name, "input": {}}
    events.append(_event("content_block_start", index=state.nblk, content_block=block))
    state.blk, state.nblk = piece.kind, state.nblk + 1


_DELTAS = {
    "thinking": ("thinking_delta", "thinking"),
    "text": ("text_delta", "text"),
    "tool": ("input_json_delta", "partial_json"),
}


def _events(
    out: StepOutput, choice: GenerateChoice, state: StreamState, input_tokens: int
) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    state.nout += len(choice.token_ids or ())
    if not state.role:
        state.role = True
        message: dict[str, Any] = {
            "id": state.rid,
            "type": "message",
            "role": "assistant",
            "model": state.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": _usage(input_tokens, 0),
        }
        events.append(_event("message_start", message=message))
    for piece in pieces(out):
        if opens_block(state, piece):
            _open(state, piece, events)
        if piece.text:
            kind, key = _DELTAS[piece.kind]
            events.append(
                _event("content_block_delta", index=state.nblk - 1, delta={"type": kind, key: piece.text})
            )
    if out.finish_reason is not None:
        if state.nblk == 0:
            _open(state, Piece("text", ""), events)
        _close(state, events)
        reason, sequence = stop_reason(out.finish_reason, out.stop_reason, state.tools)
        events.append(
            _event(
                "message_delta",
                delta={"stop_reason": reason, "stop_sequence": sequence},
                usage={"output_tokens": state.nout},
            )
        )
        events.append(_event("message_stop"))
    return events


def _shape(input_tokens: int) -> ChoiceShape:
    """The step shape of a Messages stream: ``{"events": [...]}`` (per call and live alike)."""
    return lambda out, choice, st: {"events": _events(out, choice, st, input_tokens)}


def open_messages_stream(
    bundle: ModelBundle, settings: Settings, messages_request: Any, prompt_token_ids: list[int], rid: str
) -> LiveStream:
    """An in-memory Messages stream (the gateway's ``POST /v1/messages``): each
    :meth:`LiveStream.step` chunk has at most one choice whose ``events`` are the Anthropic SSE
    events of that engine event, built by the same code as the per-call streaming derender.

    Raises:
        UnknownModel: ``model`` is not served. ValidationError: a malformed request.
    """
    req = AnthropicMessagesRequest.model_validate(messages_request)
    opts = chat_fields(req, settings)
    assert opts is not None
    return open_live(bundle, settings, req.model, opts, prompt_token_ids, rid, object_name="message",
                     shape=_shape(len(prompt_token_ids)), extra={})


def _stream(bundle: ModelBundle, settings: Settings, req: DerenderMessagesStreamRequest) -> dict[str, Any]:
    check_model(bundle, req.model)
    pipe = pipeline_for(bundle, settings)
    if req.stream_state is None and pipe.parser is not None and req.messages_request is None:
        raise InvalidRequest(NEEDS_REQUEST, param="messages_request")
    prompt = input_tokens(req)
    reply = run_stream(
        bundle,
        settings,
        pipe,
        req,
        chat_fields(req.messages_request, settings),
        None,
        object_name="message",
        shape=_shape(prompt),
        extra={},
    )
    return events_reply(reply)


def derender_messages(bundle: ModelBundle, settings: Settings, body: Any) -> dict[str, Any]:
    """Messages derender; dispatches on ``body["stream"]`` (see the module docstring)."""
    if is_stream(body):
        return _stream(bundle, settings, DerenderMessagesStreamRequest.model_validate(body))
    return _batch(bundle, settings, DerenderMessagesRequest.model_validate(body))
