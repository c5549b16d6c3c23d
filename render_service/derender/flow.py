"""The derender request flow shared by chat and completions: bound checks, the parser's
``ParseContext``, the initial state, and the whole streaming call (:func:`run_stream`: open or
resume the state, advance the chunk's one choice, shape it, encode the next state).

The endpoint modules (:mod:`.chat`, :mod:`.completions`) only validate their body and say how a
step's output becomes their choice shape.

Source of the checks: upstream §6.1/§6.2 error list (token lists longer than
``max_model_len``, ``top_logprobs`` longer than ``max_logprobs``, empty batch ``token_ids``,
more than one choice per stream chunk).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..errors import InvalidRequest, InvalidStreamState, RenderServiceError
from ..models import ModelBundle, check_model
from ..parsing import drops_special_text
from ..protocol.chat import history_tool_calls
from ..protocol.common import asks_structured_output
from ..protocol.derender import (
    ChatRequestFields,
    GenerateChoice,
    GenerateTokensStreamResponse,
    OutputOptions,
    PerRequestMetrics,
    StreamState,
    Usage,
)
from ..settings import Settings
from . import detokenize, logprobs, stop_strings
from .pipeline import Pipeline, StepOutput, advance, pipeline_for
from .stream_state import decode_state, encode_state

logger = logging.getLogger(__name__)

# --- request facts → initial state ---------------------------------------------------------


def check_len(bundle: ModelBundle, settings: Settings, what: str, items: Sequence[Any] | None) -> None:
    if items is not None and len(items) > bundle.max_model_len:
        raise InvalidRequest(
            f"{what} has {len(items)} entries, more than max_model_len={bundle.max_model_len}"
        )


def check_prompt_ids(bundle: ModelBundle, settings: Settings, ids: Sequence[int] | None) -> None:
    """``prompt_token_ids`` no longer than ``max_model_len``. Ids past the vocabulary are not
    refused: they decode to nothing, as vLLM 0.33's derender drops them (its recorded answers)."""
    check_len(bundle, settings, "prompt_token_ids", ids)


def check_choice(bundle: ModelBundle, settings: Settings, choice: GenerateChoice, batch: bool) -> None:
    if batch and not choice.token_ids:
        raise InvalidRequest(f"choice {choice.index} has empty or null token_ids")
    limit = bundle.max_model_len
    if choice.token_ids is not None and len(choice.token_ids) > limit:  # message built on failure only
        check_len(bundle, settings, f"choice {choice.index} token_ids", choice.token_ids)
    content = choice.logprobs.content if choice.logprobs else None
    if content is not None and len(content) > limit:
        check_len(bundle, settings, f"choice {choice.index} logprobs.content", content)
    for entry in content or ():
        if len(entry.top_logprobs) > settings.max_logprobs + 1:
            raise InvalidRequest(f"top_logprobs has more than max_logprobs={settings.max_logprobs} entries")


def parse_context(chat: ChatRequestFields, settings: Settings) -> Any:
    """The parser library's ``ParseContext`` for a chat request (server template kwargs under
    the request's; ``tool_choice`` defaults to ``auto`` with tools, else ``none``).

    Raises:
        pydantic.ValidationError: an assistant message's ``tool_calls`` of a wrong shape
            (:func:`~render_service.protocol.chat.history_tool_calls`, as render answers it).
    """
    from parsers.types import ParseContext

    kwargs = {**settings.default_chat_template_kwargs, **(chat.chat_template_kwargs or {})}
    if chat.reasoning_effort is not None:
        kwargs.setdefault("reasoning_effort", chat.reasoning_effort)
        # as render (vLLM 0.33 ``build_chat_params``, whose kwargs the parser is built with): an
        # effort switches ``enable_thinking`` unless the request's own kwargs set it
        if "enable_thinking" not in (chat.chat_template_kwargs or {}):
            kwargs["enable_thinking"] = chat.reasoning_effort != "none"
    # vLLM 0.33 validates the whole chat request: a history call of a wrong shape (``true``, a
    # number, a string) is its 400, as render answers it, not a count of characters
    history = history_tool_calls(chat.messages)
    return ParseContext(
        tools=tuple(chat.tools) if chat.tools else None,
        tool_choice=chat.tool_choice or ("auto" if chat.tools else "none"),
        parallel_tool_calls=chat.parallel_tool_calls is not False,
        include_reasoning=chat.include_reasoning,
        chat_template_kwargs=kwargs,
        history_tool_call_cnt=history,
        enable_auto_tool_choice=settings.enable_auto_tool_choice,
        structured_output=asks_structured_output(chat.response_format, chat.structured_outputs),
    )


def initial_state(
    pipe: Pipeline,
    settings: Settings,
    *,
    rid: str,
    model: str,
    opts: OutputOptions | None,
    prompt_ids: Sequence[int] | None,
    lp_limit: int | None,
    prompt_tokens: int | None = None,
) -> StreamState:
    """The state before any output: request facts, seeded detokenizer, parser start state."""
    o = opts or OutputOptions()
    chat = opts if isinstance(opts, ChatRequestFields) else None
    parser = pipe.parser if chat is not None else None
    st = StreamState(
        cfg=pipe.cfg,
        rid=rid,
        model=model,
        created=int(time.time()),
        stops=list(stop_strings.normalize(o.stop)),
        incl=o.include_stop_str_in_output,
        min_tok=o.min_tokens,
        stop_ids=list(o.stop_token_ids or ()),
        ignore_eos=o.ignore_eos,
        skip=o.skip_special_tokens,
        lp_k=-1 if lp_limit is None else lp_limit,
        hide=parser is not None and not chat.include_reasoning,  # type: ignore[union-attr]
        ret_ids=bool(o.return_token_ids),
        ptoks=prompt_tokens,
        named=chat is not None and isinstance(chat.tool_choice, dict),
    )
    ctx = parse_context(chat, settings) if parser is not None else None  # type: ignore[arg-type]
    if ctx is not None:  # with a parser ``skip`` means: special tokens that are not markers
        st.skip = drops_special_text(settings, ctx)
    drop = pipe.drop_ids(st.skip, parser is not None)
    seed = detokenize.seed(pipe.detok, prompt_ids, drop)
    st.win, st.pre, st.rd = list(seed.window), seed.prefix, seed.read
    if parser is not None:
        from parsers.types import UnsupportedRequest

        try:
            st.parser = parser.start(ctx, prompt_ids)
        except UnsupportedRequest as exc:  # vLLM 0.33 builds the request's parser: ValueError -> 400
            raise InvalidRequest(str(exc)) from exc
    return st


def chat_lp_limit(chat: ChatRequestFields | None) -> int | None:
    if chat is None:
        return None
    return logprobs.chat_top_limit(chat.logprobs, chat.top_logprobs, bool(chat.logprob_token_ids))


def metrics_block(metrics: PerRequestMetrics | None) -> dict[str, Any] | None:
    """The generate response's ``metrics`` echoed whole: vLLM 0.33 validates it as
    ``PerRequestMetrics`` and dumps every field (absent timings as null, other keys kept)."""
    return None if metrics is None else metrics.model_dump()


#: vLLM 0.33 ``VLLM_MAX_N_SEQUENCES`` default: the bound on ``generate_responses`` and on the
#: choices of one response (400 beyond it).
MAX_CHOICES = 16384


def check_count(count: int, what: str) -> None:
    """400 when ``count`` (of ``what``) exceeds :data:`MAX_CHOICES`, as vLLM's
    ``_validate_derender_bounds`` does before any decode."""
    if count > MAX_CHOICES:
        raise InvalidRequest(f"{what} count ({count}) exceeds server maximum ({MAX_CHOICES}).",
                             param=what)


def usage_block(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": None,
        "completion_tokens_details": None,
    }


# --- streaming (chat and completions share the step) ----------------------------------------


def _stream_step(
    bundle: ModelBundle,
    settings: Settings,
    pipe: Pipeline,
    state: StreamState,
    gen: GenerateTokensStreamResponse,
    resumed: bool = False,
) -> tuple[StepOutput | None, StreamState]:
    """Advance the one choice of a generate chunk; ``None`` output for usage-only or finished.

    ``resumed``: ``state`` was decoded from the client's ``stream_state``. Such a state passed
    framing, signature and field-type checks, but its nested parser and detokenizer values are
    not checked field by field (signing makes them trusted); one that is inconsistent anyway
    (unsigned states allowed, or a leaked key) makes the step fail, reported as
    :class:`InvalidStreamState` (400) instead of a 500.
    """
    if not resumed:
        return _advance_chunk(bundle, settings, pipe, state, gen)
    try:  # a resumed state is this call's own (decoded now, or taken from pipe.states): no copy
        return _advance_chunk(bundle, settings, pipe, state, gen, in_place=True)
    except RenderServiceError:
        raise
    except (TypeError, KeyError, ValueError, AttributeError, IndexError, AssertionError) as exc:
        logger.warning("stream_state accepted but inconsistent: %s: %s", type(exc).__name__, exc)
        raise InvalidStreamState(
            f"invalid stream_state: inconsistent parser or detokenizer state ({type(exc).__name__})"
        ) from None


def _advance_chunk(
    bundle: ModelBundle,
    settings: Settings,
    pipe: Pipeline,
    state: StreamState,
    gen: GenerateTokensStreamResponse,
    in_place: bool = False,
) -> tuple[StepOutput | None, StreamState]:
    if len(gen.choices) > 1:
        raise InvalidRequest(
            f"derender stream expects at most one choice per chunk (got {len(gen.choices)})."
        )
    if not gen.choices or state.done:
        return None, state
    choice = gen.choices[0]
    if state.ci is not None and choice.index != state.ci:
        raise InvalidStreamState(
            f"invalid stream_state: it belongs to choice {state.ci}, this chunk is of choice "
            f"{choice.index} (keep one stream_state per choice index)",
            param="stream_state",
        )
    check_choice(bundle, settings, choice, batch=False)
    out, new = advance(
        pipe,
        state,
        choice.token_ids or (),
        final=choice.finish_reason is not None,
        finish_reason=choice.finish_reason,
        stop_reason=choice.stop_reason,
        choice_index=choice.index,
        logprob_content=choice.logprobs.content if choice.logprobs else None,
        in_place=in_place,
    )
    if new.ci != choice.index:
        new.ci = choice.index
    return out, new


def _stream_usage(req_prompt: int | None, state: StreamState, usage: Usage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    prompt = (
        req_prompt
        if req_prompt is not None
        else state.ptoks
        if state.ptoks is not None
        else usage.prompt_tokens
    )
    return usage_block(prompt, usage.completion_tokens or 0)


def _open_state(
    bundle: ModelBundle,
    settings: Settings,
    pipe: Pipeline,
    req: Any,
    opts: OutputOptions | None,
    lp: int | None,
) -> StreamState:
    if req.stream_state is not None:
        state = pipe.states.take(req.stream_state) or decode_state(
            req.stream_state, pipe.fingerprint, pipe.state_keys
        )
        chunk_rid = req.generate_chunk.request_id
        if chunk_rid and state.rid and chunk_rid != state.rid:
            raise InvalidStreamState(
                f"invalid stream_state: it belongs to request {state.rid!r}, this chunk is of "
                f"request {chunk_rid!r}",
                param="stream_state",
            )
        return state
    name = check_model(bundle, req.model)
    prompt_ids = (
        req.prompt_token_ids if req.prompt_token_ids is not None else req.generate_chunk.prompt_token_ids
    )
    check_prompt_ids(bundle, settings, prompt_ids)
    return initial_state(
        pipe,
        settings,
        rid=req.generate_chunk.request_id,
        model=name,
        opts=opts,
        prompt_ids=prompt_ids,
        lp_limit=lp,
        prompt_tokens=req.prompt_tokens,
    )


def stream_chunk(
    state: StreamState,
    gen: GenerateTokensStreamResponse,
    prompt_tokens: int | None,
    object_name: str,
    choices: list[dict[str, Any]],
    extra: dict[str, Any],
) -> dict[str, Any]:
    """The OpenAI stream chunk of one step (``extra`` holds endpoint-specific top-level keys)."""
    return {
        "id": state.rid,
        "object": object_name,
        "created": state.created,
        "model": state.model,
        "choices": choices,
        "usage": _stream_usage(prompt_tokens, state, gen.usage),
        "system_fingerprint": None,
        **extra,
        "metrics": metrics_block(gen.metrics),
        "kv_transfer_params": gen.kv_transfer_params,
    }


def _stream_reply(
    pipe: Pipeline,
    req: Any,
    state: StreamState,
    out: StepOutput | None,
    object_name: str,
    choices: list[dict[str, Any]],
    extra: dict[str, Any],
) -> dict[str, Any]:
    """The streaming response ``{"chunk", "stream_state", "stop_generation"}``.

    Raises:
        InvalidRequest: the state would exceed ``--max-stream-state-bytes`` (the next call could
            not send it back), e.g. a request with megabytes of stop strings.
    """
    chunk = stream_chunk(state, req.generate_chunk, req.prompt_tokens, object_name, choices, extra)
    text = encode_state(state, pipe.state_keys)
    if len(text) > pipe.max_state_bytes:
        raise InvalidRequest(
            f"this stream's `stream_state` would be {len(text)} bytes, over the "
            f"{pipe.max_state_bytes} a call may send back (--max-stream-state-bytes); send fewer "
            "or shorter stop strings", param="stream_state")
    pipe.states.put(text, state)  # the next chunk of this stream resumes it without decoding
    return {"chunk": chunk, "stream_state": text, "stop_generation": bool(out and out.stop_generation)}


def is_stream(body: Any) -> bool:
    """Whether a derender body asks for streaming (``"stream": true``; a body that is no object
    does not, and fails the batch model's validation)."""
    return isinstance(body, dict) and body.get("stream") is True


def union_failure(union: TypeAdapter[Any], body: Any) -> Exception:
    """The error of a derender body that failed the member it asked for: every member's errors,
    validated as FastAPI validates vLLM 0.33's union body (``from_attributes``: a body that is no
    object is ``model_attributes_type``). Raise it."""
    try:
        union.validate_python(body, from_attributes=True)
    except ValidationError as exc:
        return exc
    return InvalidRequest("the body is neither a batch nor a streaming derender request")


ChoiceShape = Callable[[StepOutput, GenerateChoice, StreamState], dict[str, Any]]


#: ``StreamState.api`` of each stream's ``object`` name: a state only resumes on its own route family.
API_TAGS = {"chat.completion.chunk": "", "text_completion": "c", "message": "m", "response": "r"}


def run_stream(
    bundle: ModelBundle,
    settings: Settings,
    pipe: Pipeline,
    req: Any,
    opts: OutputOptions | None,
    lp_limit: int | None,
    *,
    object_name: str,
    shape: ChoiceShape,
    extra: dict[str, Any],
) -> dict[str, Any]:
    """One streaming derender call: ``{"chunk", "stream_state", "stop_generation"}``.

    ``req`` is the validated stream body (``generate_chunk``, ``stream_state``, first-call
    ``prompt_token_ids`` / ``prompt_tokens``); ``opts`` the first call's request fields;
    ``shape(out, choice, state)`` turns the step's output into the endpoint's choice (it may update
    ``state``, e.g. the role flag or a running offset); ``extra`` holds endpoint-specific
    top-level chunk keys.

    Raises:
        InvalidStreamState: a malformed, tampered, foreign or inconsistent ``stream_state``.
        InvalidRequest: more than one choice in the chunk, token lists over ``max_model_len``.
    """
    state = _open_state(bundle, settings, pipe, req, opts, lp_limit)
    api = API_TAGS[object_name]
    if req.stream_state is None:
        state.api = api
    elif state.api != api:
        raise InvalidStreamState(
            "invalid stream_state: it was made by another API's derender route; send it back to "
            "the route that returned it",
            param="stream_state",
        )
    out, state = _stream_step(bundle, settings, pipe, state, req.generate_chunk,
                              resumed=req.stream_state is not None)
    choices = [] if out is None else [shape(out, req.generate_chunk.choices[0], state)]
    return _stream_reply(pipe, req, state, out, object_name, choices, extra)


@dataclass(slots=True)
class LiveStream:
    """The derender side of one streamed engine request, held in memory for the stream's life
    (the gateway): one :class:`StreamState` per choice index, advanced one engine event at a
    time by the same step as :func:`run_stream`, with nothing encoded or signed between events.

    ``start`` is the state before any output (:func:`initial_state`); ``shape`` and ``extra`` as
    in :func:`run_stream`. Memory: the states of ``n`` choices, dropped with the object.
    """

    bundle: ModelBundle
    settings: Settings
    pipe: Pipeline
    start: StreamState
    object_name: str
    shape: ChoiceShape
    extra: dict[str, Any]
    states: dict[int, StreamState] = field(default_factory=dict)

    def step(self, event: GenerateTokensStreamResponse) -> tuple[dict[str, Any], bool]:
        """One engine event (at most one choice) → ``(OpenAI chunk, stop_generation)``.

        ``stop_generation`` is true on the step where a stop string ended that choice.

        Raises:
            InvalidRequest: more than one choice in the event, token lists over ``max_model_len``.
        """
        index = event.choices[0].index if event.choices else None
        state = self.states.get(index) if index is not None else None
        if state is None:  # a choice's first event starts from a copy of the start (never mutated)
            state = self.start
            out, state = _advance_chunk(self.bundle, self.settings, self.pipe, state, event)
        else:  # its own state: advanced in place, no copy per event
            out, state = _advance_chunk(self.bundle, self.settings, self.pipe, state, event, in_place=True)
        choices = [] if out is None else [self.shape(out, event.choices[0], state)]
        if index is not None:
            self.states[index] = state
        chunk = stream_chunk(state, event, None, self.object_name, choices, self.extra)
        return chunk, bool(out and out.stop_generation)

    def finished(self, n: int) -> bool:
        """Whether all ``n`` choices have ended (finish reason or stop string)."""
        return all(self.states.get(i) is not None and self.states[i].done for i in range(n))


def open_live(
    bundle: ModelBundle,
    settings: Settings,
    model: str | None,
    opts: OutputOptions,
    prompt_token_ids: list[int],
    rid: str,
    *,
    object_name: str,
    shape: ChoiceShape,
    extra: dict[str, Any],
    lp_limit: int | None = None,
    prompt_tokens: int | None = None,
) -> LiveStream:
    """The :class:`LiveStream` of one rendered request: what a first streaming derender call would
    open (model check, prompt bound, :func:`initial_state`), kept in memory.

    Raises:
        UnknownModel: ``model`` is not served. InvalidRequest: prompt over ``max_model_len``.
    """
    name = check_model(bundle, model)
    pipe = pipeline_for(bundle, settings)
    check_prompt_ids(bundle, settings, prompt_token_ids)
    start = initial_state(pipe, settings, rid=rid, model=name, opts=opts, prompt_ids=prompt_token_ids,
                          lp_limit=lp_limit, prompt_tokens=prompt_tokens)
    return LiveStream(bundle, settings, pipe, start, object_name, shape, extra)
