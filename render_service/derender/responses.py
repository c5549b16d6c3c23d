"""OpenAI Responses derender: engine output token ids → a ``Response`` (batch) or the Responses
stream events of one engine chunk (streaming), through the chat derender's pipeline and its
signed ``stream_state``. vLLM 0.33 has no such endpoint; the shapes are OpenAI's Responses API.

* ``output`` items in order: ``reasoning`` (``content: [{type: reasoning_text}]``), ``message``
  (``content: [{type: output_text}]``), ``function_call`` (``call_id``, ``name``, ``arguments``);
  item ids are deterministic (``rs_`` / ``msg_`` / ``fc_`` + the request id + the item index).
* ``status``: ``completed``, or ``incomplete`` with ``incomplete_details.reason:
  "max_output_tokens"`` when the engine stopped for length.
* ``usage``: ``input_tokens``, ``output_tokens``, ``total_tokens``;
  ``output_tokens_details.reasoning_tokens`` counted on the output ids as vLLM 0.33's Responses
  serving counts them (:mod:`.reasoning_tokens`; batch and stream by the same step).

Streaming answer: ``{"events": [{"event": type, "data": {..., "sequence_number"}}...],
"stream_state", "stop_generation"}``: ``response.created`` and ``response.in_progress`` on the
first call; per item ``response.output_item.added``, ``response.content_part.added`` (reasoning
and message), the deltas (``response.reasoning_text.delta``, ``response.output_text.delta``,
``response.function_call_arguments.delta``), then on close the ``.done`` events and
``response.output_item.done``; the last call ends with ``response.completed``, or
``response.incomplete`` when the engine stopped for length (vLLM 0.33 and OpenAI: status
``incomplete``, the last item ``incomplete``). ``sequence_number`` continues across calls.

Every event is complete as OpenAI and vLLM 0.33 send it: the done events repeat the item's whole
text and the terminal event carries the whole ``output``, so a client (the ``openai`` SDK's
``ResponseStreamState``, which takes the terminal event's ``response`` as the final response)
needs nothing but the events. For that the ``stream_state`` keeps each item's text so far
(``items``), so it grows with the output; it is zlib-compressed above 512 bytes (chat and
Messages states stay flat: they have no ``items``).
"""

from __future__ import annotations

from typing import Any

from ..api_tools import responses_tool_choice, responses_tools
from ..errors import InvalidRequest
from ..models import ModelBundle, check_model
from ..protocol.derender import ChatRequestFields, GenerateChoice, StreamState
from ..protocol.responses import DerenderResponsesRequest, DerenderResponsesStreamRequest, ResponsesRequest
from ..settings import Settings
from .blocks import Piece, events_reply, input_tokens, opens_block, pieces
from .chat import derender_chat
from .flow import ChoiceShape, LiveStream, is_stream, open_live, parse_context, run_stream
from .pipeline import Pipeline, StepOutput, pipeline_for
from .reasoning_tokens import count as reasoning_count
from .reasoning_tokens import initial as counting_initial
from .reasoning_tokens import step as counting_step

NEEDS_REQUEST = (
    "responses_request is required when a tool or reasoning parser is configured (on the first "
    "call of a stream); later streaming calls may omit it."
)
ITEM_TYPES = {"thinking": "reasoning", "text": "message", "tool": "function_call"}
PREFIX = {"reasoning": "rs", "message": "msg", "function_call": "fc"}


def chat_fields(req: ResponsesRequest | None) -> ChatRequestFields | None:
    """What the pipeline reads of the chat form of a Responses request."""
    if req is None:
        return None
    tools = responses_tools(req.tools)
    effort = req.reasoning.effort if req.reasoning else None
    return ChatRequestFields(
        model=req.model,
        stop=req.stop,
        include_stop_str_in_output=req.include_stop_str_in_output,
        stop_token_ids=req.stop_token_ids,
        ignore_eos=req.ignore_eos,
        tools=tools,
        tool_choice=responses_tool_choice(req.tool_choice) if tools else None,
        parallel_tool_calls=req.parallel_tool_calls,
        include_reasoning=req.include_reasoning,
        chat_template_kwargs=req.chat_template_kwargs,
        reasoning_effort=effort,
    )


def _item(
    kind: str,
    item_id: str,
    text: str,
    name: str = "",
    call_id: str = "",
    status: str = "completed",
) -> dict[str, Any]:
    """One output item; ``status`` ``in_progress`` is the item as ``output_item.added`` shows it
    (no content yet)."""
    opened = status == "in_progress"
    if kind == "reasoning":
        content = [] if opened else [{"type": "reasoning_text", "text": text}]
        return {"type": "reasoning", "id": item_id, "summary": [], "content": content, "status": status}
    if kind == "message":
        content = [] if opened else [_text_part(text)]
        return {"type": "message", "id": item_id, "role": "assistant", "status": status, "content": content}
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": text,
        "status": status,
    }


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def response_status(finish: str | None) -> str:
    """``Response.status`` of a finish reason: ``incomplete`` for ``length`` (vLLM 0.33
    ``response_item_status``; OpenAI ``incomplete_details.reason: "max_output_tokens"``),
    ``in_progress`` before the end, else ``completed``."""
    return "in_progress" if finish is None else "incomplete" if finish == "length" else "completed"


def _response(
    rid: str,
    model: str,
    created: int,
    output: list[dict[str, Any]],
    finish: str | None,
    usage: tuple[int, int, int] | None,
    req: ResponsesRequest | None,
) -> dict[str, Any]:
    """``usage``: (input, output, reasoning) tokens."""
    status = response_status(finish)
    return {
        "id": rid,
        "object": "response",
        "created_at": created,
        "model": model,
        "status": status,
        "output": output,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "error": None,
        "instructions": req.instructions if req is not None else None,
        "metadata": req.metadata if req is not None else None,
        "parallel_tool_calls": req.parallel_tool_calls is not False if req is not None else True,
        "temperature": req.temperature if req is not None else None,
        "top_p": req.top_p if req is not None else None,
        "tool_choice": (req.tool_choice if req is not None else "auto"),
        "tools": req.tools if req is not None else [],
        "max_output_tokens": req.max_output_tokens if req is not None else None,
        "usage": None
        if usage is None
        else {
            "input_tokens": usage[0],
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": usage[1],
            "output_tokens_details": {"reasoning_tokens": usage[2]},
            "total_tokens": usage[0] + usage[1],
        },
    }


# --- batch ----------------------------------------------------------------------------------


def counter_start(
    pipe: Pipeline, settings: Settings, fields: ChatRequestFields | None, prompt_ids: list[int] | None
) -> list[int]:
    """The reasoning-token counter's state before the output (``[]``: nothing counted): the
    parser's start state tells whether the prompt left reasoning open; the effective
    ``chat_template_kwargs`` (server defaults, request, ``reasoning.effort``) pick the mode."""
    if pipe.parser is None or fields is None or pipe.counting.kind == "none":
        return []
    ctx = parse_context(fields, settings)
    start = pipe.parser.start(ctx, prompt_ids)
    return counting_initial(pipe.counting, settings.reasoning_parser, ctx.chat_template_kwargs,
                            pipe.parser.reasoning_ended(start) is False)


def _batch(bundle: ModelBundle, settings: Settings, req: DerenderResponsesRequest) -> dict[str, Any]:
    name = check_model(bundle, req.model)
    if req.responses_request is None and pipeline_for(bundle, settings).parser is not None:
        raise InvalidRequest(NEEDS_REQUEST, param="responses_request")
    if len(req.generate_response.choices) != 1:
        raise InvalidRequest(
            "a Responses derender takes exactly one choice", param="generate_response.choices"
        )
    fields = chat_fields(req.responses_request)
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
    choice = chat["choices"][0]
    msg = choice["message"]
    rid = chat["id"]
    output: list[dict[str, Any]] = []
    if msg.get("reasoning"):
        output.append(_item("reasoning", f"rs_{rid}_{len(output)}", msg["reasoning"]))
    if msg.get("content"):
        output.append(_item("message", f"msg_{rid}_{len(output)}", msg["content"]))
    for call in msg.get("tool_calls") or ():
        fn = call["function"]
        output.append(
            _item("function_call", f"fc_{rid}_{len(output)}", fn["arguments"], fn["name"], call["id"])
        )
    if output and choice["finish_reason"] == "length":  # only the last item was cut short
        output[-1]["status"] = "incomplete"
    usage = chat["usage"]
    pipe = pipeline_for(bundle, settings)
    gen = req.generate_response
    prompt_ids = req.prompt_token_ids if req.prompt_token_ids is not None else gen.prompt_token_ids
    counter = counter_start(pipe, settings, fields, prompt_ids)
    counter, _ = counting_step(pipe.counting, counter, [], req.generate_response.choices[0].token_ids or ())
    return _response(
        rid,
        name,
        chat["created"],
        output,
        choice["finish_reason"],
        (usage["prompt_tokens"], usage["completion_tokens"], reasoning_count(counter)),
        req.responses_request,
    )


# --- streaming ------------------------------------------------------------------------------


def _stored_item(state: StreamState, index: int, status: str = "completed") -> dict[str, Any]:
    """Output item ``index`` as the state keeps it (``state.items``), whole: the item of its
    ``response.output_item.done`` event and of the terminal ``response.output``."""
    blk, text, *call = state.items[index]
    kind = ITEM_TYPES[blk]
    name, call_id = call if call else ("", "")
    return _item(kind, f"{PREFIX[kind]}_{state.rid}_{index}", text, name, call_id, status)


class _Events:
    """The events of one step; reads and updates the state (open item kind, the items so far with
    their text, ``sequence_number``)."""

    def __init__(self, state: StreamState) -> None:
        self.state = state
        self.events: list[dict[str, Any]] = []

    def emit(self, kind: str, **data: Any) -> None:
        self.events.append({"event": kind, "data": {"type": kind, **data, "sequence_number": self.state.seq}})
        self.state.seq += 1

    def close(self, status: str = "completed") -> None:
        """The done events of the open item, each with the item's whole text (as OpenAI and
        vLLM 0.33 send them)."""
        st = self.state
        if not st.blk:
            return
        index = st.nblk - 1
        item = _stored_item(st, index, status)
        kind, text = item["type"], st.items[index][1]
        ids = {"item_id": item["id"], "output_index": index}
        if kind == "reasoning":
            self.emit("response.reasoning_text.done", **ids, content_index=0, text=text)
            self.emit("response.content_part.done", **ids, content_index=0,
                      part={"type": "reasoning_text", "text": text})
        elif kind == "message":
            self.emit("response.output_text.done", **ids, content_index=0, text=text, logprobs=[])
            self.emit("response.content_part.done", **ids, content_index=0, part=_text_part(text))
        else:
            self.emit("response.function_call_arguments.done", **ids, arguments=text, name=item["name"])
        self.emit("response.output_item.done", output_index=index, item=item)
        st.blk = ""

    def open(self, piece: Piece) -> None:
        self.close()
        st = self.state
        index = st.nblk
        st.blk, st.nblk = piece.kind, index + 1
        if piece.kind == "tool":
            st.items.append([piece.kind, "", piece.name or "", piece.call_id or ""])
        else:
            st.items.append([piece.kind, ""])
        item = _stored_item(st, index, "in_progress")
        self.emit("response.output_item.added", output_index=index, item=item)
        if item["type"] == "reasoning":
            self.emit("response.content_part.added", item_id=item["id"], output_index=index, content_index=0,
                      part={"type": "reasoning_text", "text": ""})
        elif item["type"] == "message":
            self.emit("response.content_part.added", item_id=item["id"], output_index=index, content_index=0,
                      part=_text_part(""))

    def delta(self, piece: Piece) -> None:
        st = self.state
        index = st.nblk - 1
        current = st.items[index]
        current[1] += piece.text
        kind = ITEM_TYPES[current[0]]
        ids = {"item_id": f"{PREFIX[kind]}_{st.rid}_{index}", "output_index": index}
        if kind == "reasoning":
            self.emit("response.reasoning_text.delta", **ids, content_index=0, delta=piece.text)
        elif kind == "message":
            self.emit("response.output_text.delta", **ids, content_index=0, delta=piece.text, logprobs=[])
        else:
            self.emit("response.function_call_arguments.delta", **ids, delta=piece.text)


def _step_events(
    out: StepOutput,
    choice: GenerateChoice,
    state: StreamState,
    req: ResponsesRequest | None,
    input_tokens: int,
    pipe: Pipeline,
) -> list[dict[str, Any]]:
    ev = _Events(state)
    state.nout += len(choice.token_ids or ())
    state.rtok, state.rhdr = counting_step(pipe.counting, state.rtok, state.rhdr, choice.token_ids or ())
    if not state.role:
        state.role = True
        first = _response(state.rid, state.model, state.created, [], None, None, req)
        ev.emit("response.created", response=first)
        ev.emit("response.in_progress", response=first)
    for piece in pieces(out):
        if opens_block(state, piece):
            ev.open(piece)
        if piece.text:
            ev.delta(piece)
    if out.finish_reason is not None:
        status = response_status(out.finish_reason)
        last = "incomplete" if status == "incomplete" else "completed"  # only the last item was cut
        ev.close(last)
        n = len(state.items)
        output = [_stored_item(state, i, last if i == n - 1 else "completed") for i in range(n)]
        final = _response(
            state.rid,
            state.model,
            state.created,
            output,
            out.finish_reason,
            (input_tokens, state.nout, reasoning_count(state.rtok)),
            req,
        )
        ev.emit(TERMINAL[status], response=final)
    return ev.events


TERMINAL = {"completed": "response.completed", "incomplete": "response.incomplete"}
"""The last event of a stream by the response's ``status`` (as vLLM 0.33 and OpenAI)."""


def _shape(
    req: ResponsesRequest | None, first_tokens: int | None, pipe: Pipeline, counter: list[int] | None
) -> ChoiceShape:
    """The step shape of a Responses stream: ``{"events": [...]}`` (per call and live alike);
    ``first_tokens`` (first call) sets the state's prompt token count, ``counter`` (first call)
    the reasoning-token counter (:func:`counter_start`)."""

    def shape(out: StepOutput, choice: GenerateChoice, st: StreamState) -> dict[str, Any]:
        if first_tokens is not None:
            st.ptoks = first_tokens
        if counter is not None and not st.role:
            st.rtok = list(counter)
        return {"events": _step_events(out, choice, st, req, st.ptoks or 0, pipe)}

    return shape


def open_responses_stream(
    bundle: ModelBundle, settings: Settings, responses_request: Any, prompt_token_ids: list[int], rid: str
) -> LiveStream:
    """An in-memory Responses stream (the gateway's ``POST /v1/responses``): each
    :meth:`LiveStream.step` chunk has at most one choice whose ``events`` are the Responses
    stream events of that engine event, built by the same code as the per-call streaming derender
    (its in-memory state keeps the items' texts the done events repeat, as the per-call state).

    Raises:
        UnknownModel: ``model`` is not served. ValidationError: a malformed request.
    """
    req = ResponsesRequest.model_validate(responses_request)
    opts = chat_fields(req)
    assert opts is not None
    pipe = pipeline_for(bundle, settings)
    counter = counter_start(pipe, settings, opts, prompt_token_ids)
    return open_live(bundle, settings, req.model, opts, prompt_token_ids, rid, object_name="response",
                     shape=_shape(req, None, pipe, counter), extra={}, prompt_tokens=len(prompt_token_ids))


def _stream(bundle: ModelBundle, settings: Settings, req: DerenderResponsesStreamRequest) -> dict[str, Any]:
    check_model(bundle, req.model)
    pipe = pipeline_for(bundle, settings)
    if req.stream_state is None and pipe.parser is not None and req.responses_request is None:
        raise InvalidRequest(NEEDS_REQUEST, param="responses_request")
    first_tokens = input_tokens(req)
    fields = chat_fields(req.responses_request)
    first = req.stream_state is None
    prompt_ids = req.prompt_token_ids
    if prompt_ids is None:
        prompt_ids = req.generate_chunk.prompt_token_ids
    counter = counter_start(pipe, settings, fields, prompt_ids) if first else None

    reply = run_stream(
        bundle,
        settings,
        pipe,
        req,
        fields,
        None,
        object_name="response",
        shape=_shape(req.responses_request, first_tokens if first else None, pipe, counter),
        extra={},
    )
    return events_reply(reply)


def derender_responses(bundle: ModelBundle, settings: Settings, body: Any) -> dict[str, Any]:
    """Responses derender; dispatches on ``body["stream"]`` (see the module docstring)."""
    if is_stream(body):
        return _stream(bundle, settings, DerenderResponsesStreamRequest.model_validate(body))
    return _batch(bundle, settings, DerenderResponsesRequest.model_validate(body))
