"""Derender: engine output token ids → OpenAI responses, batch and one-chunk-per-call streaming.

Entry points (each takes the loaded bundle, the settings and the parsed JSON body):

* ``derender_chat(bundle, settings, body)``: ``ChatCompletionResponse`` when ``stream`` is
  false, ``{"chunk": ChatCompletionStreamResponse, "stream_state": str, "stop_generation":
  bool}`` when true.
* ``derender_completion(bundle, settings, body)``: the completions analogue.

Streaming contract (differs from vLLM 0.33 where it is better):

* ``stream_state`` is an opaque string (:mod:`render_service.stream_state`); echo it unchanged.
  Each call costs O(new tokens): nothing is replayed. After the first call ``chat_request`` /
  ``completion_request`` and ``prompt_token_ids`` may be omitted (they are ignored then).
* ``stop`` strings are enforced while streaming (upstream refuses them): text that may start a
  stop string is held back; when one completes, the chunk carries ``finish_reason: "stop"``,
  ``stop_reason: "<string>"`` and the response ``"stop_generation": true`` — the caller should
  abort the engine request. Later chunks of a finished stream return ``choices: []`` (usage,
  if the engine sent it, is still passed through).
* Tool-call ids are deterministic (:func:`render_service.pipeline.tool_call_id`).

Errors (400 unless noted): validation; unknown model (404); parser configured and no
``chat_request`` (batch, or the first streaming call); more than one choice in a stream chunk;
empty ``token_ids`` in a batch choice; token lists longer than ``max_model_len``; invalid
``stream_state``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from . import detokenize, logprobs, stop_strings
from .errors import InvalidRequest
from .models import ModelBundle, check_model
from .pipeline import Pipeline, StepOutput, advance, pipeline_for
from .protocol.derender import (
    ChatRequestFields,
    CompletionRequestFields,
    DerenderChatRequest,
    DerenderChatStreamRequest,
    DerenderCompletionRequest,
    DerenderCompletionStreamRequest,
    GenerateChoice,
    GenerateTokensStreamResponse,
    OutputOptions,
    StreamState,
    Usage,
)
from .settings import Settings
from .stream_state import decode_state, encode_state

MAX_CHOICES = 16384
PARSER_NEEDS_REQUEST = (
    "chat_request is required when a tool or reasoning parser is configured because plain "
    "detokenization would leak raw parser markup into content."
)
PARSER_NEEDS_REQUEST_STREAM = (
    "chat_request is required on the first streaming derender call (stream_state null) when a tool "
    "or reasoning parser is configured: it decides tools, tool_choice and reasoning handling. "
    "Later calls may omit it."
)


def _is_stream(body: Any) -> bool:
    if not isinstance(body, dict):
        raise InvalidRequest("request body must be a JSON object")
    return body.get("stream") is True


def derender_chat(bundle: ModelBundle, settings: Settings, body: Any) -> dict[str, Any]:
    """Chat derender; dispatches on ``body["stream"]``."""
    if _is_stream(body):
        return _chat_stream(bundle, settings, DerenderChatStreamRequest.model_validate(body))
    return _chat_batch(bundle, settings, DerenderChatRequest.model_validate(body))


def derender_completion(bundle: ModelBundle, settings: Settings, body: Any) -> dict[str, Any]:
    """Completions derender (never parses); dispatches on ``body["stream"]``."""
    if _is_stream(body):
        return _completion_stream(bundle, settings, DerenderCompletionStreamRequest.model_validate(body))
    return _completion_batch(bundle, settings, DerenderCompletionRequest.model_validate(body))


# --- request facts → initial state ---------------------------------------------------------


def _check_len(bundle: ModelBundle, settings: Settings, what: str, items: Sequence[Any] | None) -> None:
    if items is not None and len(items) > bundle.max_model_len:
        raise InvalidRequest(f"{what} has {len(items)} entries, more than max_model_len={bundle.max_model_len}")


def _check_choice(bundle: ModelBundle, settings: Settings, choice: GenerateChoice, batch: bool) -> None:
    if batch and not choice.token_ids:
        raise InvalidRequest(f"choice {choice.index} has empty or null token_ids")
    _check_len(bundle, settings, f"choice {choice.index} token_ids", choice.token_ids)
    content = choice.logprobs.content if choice.logprobs else None
    _check_len(bundle, settings, f"choice {choice.index} logprobs.content", content)
    for entry in content or ():
        if len(entry.top_logprobs) > settings.max_logprobs + 1:
            raise InvalidRequest(f"top_logprobs has more than max_logprobs={settings.max_logprobs} entries")


def parse_context(chat: ChatRequestFields, settings: Settings) -> Any:
    """The parser library's ``ParseContext`` for a chat request (server template kwargs under
    the request's; ``tool_choice`` defaults to ``auto`` with tools, else ``none``)."""
    from parsers.types import ParseContext

    kwargs = {**settings.default_chat_template_kwargs, **(chat.chat_template_kwargs or {})}
    if chat.reasoning_effort is not None:
        kwargs.setdefault("reasoning_effort", chat.reasoning_effort)
    history = sum(
        len(m.get("tool_calls") or ())
        for m in chat.messages
        if isinstance(m, dict) and m.get("role") == "assistant"
    )
    return ParseContext(
        tools=tuple(chat.tools) if chat.tools else None,
        tool_choice=chat.tool_choice or ("auto" if chat.tools else "none"),
        parallel_tool_calls=chat.parallel_tool_calls is not False,
        include_reasoning=chat.include_reasoning,
        chat_template_kwargs=kwargs,
        history_tool_call_cnt=history,
        enable_auto_tool_choice=settings.enable_auto_tool_choice,
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
        cfg=pipe.cfg, rid=rid, model=model, created=int(time.time()),
        stops=list(stop_strings.normalize(o.stop)), incl=o.include_stop_str_in_output,
        min_tok=o.min_tokens, stop_ids=list(o.stop_token_ids or ()), ignore_eos=o.ignore_eos,
        skip=o.skip_special_tokens, lp_k=-1 if lp_limit is None else lp_limit,
        hide=parser is not None and not chat.include_reasoning,  # type: ignore[union-attr]
        ret_ids=bool(o.return_token_ids), ptoks=prompt_tokens,
        named=chat is not None and isinstance(chat.tool_choice, dict),
    )
    drop = detokenize.drop_set(pipe.special_ids, parser.marker_token_ids if parser else None, st.skip)
    seed = detokenize.seed(pipe.detok, prompt_ids, drop)
    st.win, st.pre, st.rd = list(seed.window), seed.prefix, seed.read
    if parser is not None:
        st.parser = parser.start(parse_context(chat, settings), prompt_ids)  # type: ignore[arg-type]
    return st


def _chat_lp_limit(chat: ChatRequestFields | None) -> int | None:
    if chat is None:
        return None
    return logprobs.chat_top_limit(chat.logprobs, chat.top_logprobs, bool(chat.logprob_token_ids))


def _usage(prompt: int, completion: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion,
            "prompt_tokens_details": None, "completion_tokens_details": None}


# --- chat batch ---------------------------------------------------------------------------------


def _message(out: StepOutput, chat: ChatRequestFields | None, parsed: bool) -> dict[str, Any]:
    content: str | None = out.content
    if parsed:
        forced = chat is not None and (chat.tool_choice == "required" or isinstance(chat.tool_choice, dict))
        content = out.content or ("" if forced else None)
    message: dict[str, Any] = {
        "role": "assistant", "content": content, "refusal": None, "annotations": None, "audio": None,
        "function_call": None,
        "tool_calls": [
            {"id": tc["id"], "type": "function", "function": {"name": tc["function"]["name"],
                                                             "arguments": tc["function"]["arguments"] or ""}}
            for tc in out.tool_calls
        ],
        "reasoning": out.reasoning or None,
    }
    if not message["tool_calls"]:
        del message["tool_calls"]
    return message


def _chat_batch(bundle: ModelBundle, settings: Settings, req: DerenderChatRequest) -> dict[str, Any]:
    name = check_model(bundle, req.model)
    pipe = pipeline_for(bundle, settings)
    gen, chat = req.generate_response, req.chat_request
    if len(gen.choices) > MAX_CHOICES:
        raise InvalidRequest(f"too many choices ({len(gen.choices)} > {MAX_CHOICES})")
    if pipe.parser is not None and chat is None:
        raise InvalidRequest(PARSER_NEEDS_REQUEST, param="chat_request")
    prompt_ids = req.prompt_token_ids if req.prompt_token_ids is not None else gen.prompt_token_ids
    _check_len(bundle, settings, "prompt_token_ids", prompt_ids)
    for choice in gen.choices:
        _check_choice(bundle, settings, choice, batch=True)
    start = initial_state(pipe, settings, rid=gen.request_id, model=name, opts=chat, prompt_ids=prompt_ids,
                          lp_limit=_chat_lp_limit(chat))
    choices = []
    for choice in gen.choices:
        out, _ = advance(pipe, start, choice.token_ids or (), final=True, finish_reason=choice.finish_reason,
                         stop_reason=choice.stop_reason, choice_index=choice.index,
                         logprob_content=choice.logprobs.content if choice.logprobs else None)
        choices.append({
            "index": choice.index, "message": _message(out, chat, pipe.parser is not None),
            "logprobs": out.logprobs, "finish_reason": out.finish_reason, "stop_reason": out.stop_reason,
            "token_ids": choice.token_ids if start.ret_ids and not start.hide else None,
            "routed_experts": None, "weight_versions": None,
        })
    prompt = req.prompt_tokens if req.prompt_tokens is not None else len(prompt_ids or ())
    completion = sum(len(c.token_ids or ()) for c in gen.choices)
    return {
        "id": gen.request_id, "object": "chat.completion", "created": start.created, "model": name,
        "choices": choices, "service_tier": None, "system_fingerprint": None,
        "usage": _usage(prompt, completion), "prompt_logprobs": gen.prompt_logprobs,
        "prompt_token_ids": gen.prompt_token_ids if start.ret_ids else None, "prompt_text": None,
        "kv_transfer_params": gen.kv_transfer_params, "ec_transfer_params": None, "metrics": gen.metrics,
    }


# --- streaming (chat and completions share the step) ----------------------------------------


def _stream_step(
    bundle: ModelBundle, settings: Settings, pipe: Pipeline, state: StreamState, gen: GenerateTokensStreamResponse
) -> tuple[StepOutput | None, StreamState]:
    """Advance the one choice of a generate chunk; ``None`` output for usage-only or finished."""
    if len(gen.choices) > 1:
        raise InvalidRequest(f"derender stream expects at most one choice per chunk (got {len(gen.choices)}).")
    if not gen.choices or state.done:
        return None, state
    choice = gen.choices[0]
    _check_choice(bundle, settings, choice, batch=False)
    return advance(pipe, state, choice.token_ids or (), final=choice.finish_reason is not None,
                   finish_reason=choice.finish_reason, stop_reason=choice.stop_reason, choice_index=choice.index,
                   logprob_content=choice.logprobs.content if choice.logprobs else None)


def _stream_usage(req_prompt: int | None, state: StreamState, usage: Usage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    prompt = req_prompt if req_prompt is not None else state.ptoks if state.ptoks is not None else usage.prompt_tokens
    return _usage(prompt, usage.completion_tokens or 0)


def _open_state(
    bundle: ModelBundle, settings: Settings, pipe: Pipeline, req: Any, opts: OutputOptions | None, lp: int | None
) -> StreamState:
    if req.stream_state is not None:
        return decode_state(req.stream_state, pipe.fingerprint, settings.stream_state_keys)
    name = check_model(bundle, req.model)
    prompt_ids = req.prompt_token_ids if req.prompt_token_ids is not None else req.generate_chunk.prompt_token_ids
    _check_len(bundle, settings, "prompt_token_ids", prompt_ids)
    return initial_state(pipe, settings, rid=req.generate_chunk.request_id, model=name, opts=opts,
                         prompt_ids=prompt_ids, lp_limit=lp, prompt_tokens=req.prompt_tokens)


def _chat_stream(bundle: ModelBundle, settings: Settings, req: DerenderChatStreamRequest) -> dict[str, Any]:
    check_model(bundle, req.model)
    pipe = pipeline_for(bundle, settings)
    if req.stream_state is None and pipe.parser is not None and req.chat_request is None:
        raise InvalidRequest(PARSER_NEEDS_REQUEST_STREAM, param="chat_request")
    state = _open_state(bundle, settings, pipe, req, req.chat_request, _chat_lp_limit(req.chat_request))
    out, state = _stream_step(bundle, settings, pipe, state, req.generate_chunk)
    choices = []
    if out is not None:
        choice = req.generate_chunk.choices[0]
        delta: dict[str, Any] = {"role": None if state.role else "assistant",
                                 "content": out.content or None, "reasoning": out.reasoning or None}
        if out.tool_calls:
            delta["tool_calls"] = out.tool_calls
        state.role = True
        choices.append({"index": choice.index, "delta": delta, "logprobs": out.logprobs,
                        "finish_reason": out.finish_reason, "stop_reason": out.stop_reason,
                        "token_ids": choice.token_ids if state.ret_ids and not state.hide else None,
                        "weight_versions": None})
    chunk = {"id": state.rid, "object": "chat.completion.chunk", "created": state.created, "model": state.model,
             "choices": choices, "usage": _stream_usage(req.prompt_tokens, state, req.generate_chunk.usage),
             "system_fingerprint": None, "prompt_token_ids": None, "prompt_text": None,
             "metrics": req.generate_chunk.metrics, "kv_transfer_params": req.generate_chunk.kv_transfer_params}
    return {"chunk": chunk, "stream_state": encode_state(state, settings.stream_state_keys),
            "stop_generation": bool(out and out.stop_generation)}


# --- completions --------------------------------------------------------------------------------


def _plain(pipe: Pipeline) -> Pipeline:
    return replace(pipe, parser=None)


def _completion_lp_limit(opts: CompletionRequestFields | None) -> int | None:
    return None if opts is None else logprobs.completion_top_limit(opts.logprobs, bool(opts.logprob_token_ids))


def _completion_choice(out: StepOutput, index: int, choice: GenerateChoice, st: StreamState) -> dict[str, Any]:
    lp = None
    if out.logprobs is not None and choice.logprobs is not None and choice.logprobs.content is not None:
        lp, st.off = logprobs.to_completion(out.logprobs, choice.logprobs.content, st.off)
    return {"index": index, "text": out.content, "logprobs": lp, "finish_reason": out.finish_reason,
            "stop_reason": out.stop_reason, "prompt_logprobs": None, "prompt_token_ids": None,
            "token_ids": choice.token_ids if st.ret_ids else None}


def _completion_batch(bundle: ModelBundle, settings: Settings, req: DerenderCompletionRequest) -> dict[str, Any]:
    name = check_model(bundle, req.model)
    pipe = _plain(pipeline_for(bundle, settings))
    n = len(req.generate_responses)
    for what, given in (("prompt_tokens", req.prompt_tokens), ("prompt_token_ids", req.prompt_token_ids)):
        if given is not None and len(given) != n:
            raise InvalidRequest(f"{what} must have one entry per generate response ({len(given)} != {n})", param=what)
    choices, prompt_total, completion_total = [], 0, 0
    for i, gen in enumerate(req.generate_responses):
        given = req.prompt_token_ids[i] if req.prompt_token_ids else None
        prompt_ids = given if given is not None else gen.prompt_token_ids
        _check_len(bundle, settings, "prompt_token_ids", prompt_ids)
        start = initial_state(pipe, settings, rid=gen.request_id, model=name, opts=req.completion_request,
                              prompt_ids=prompt_ids, lp_limit=_completion_lp_limit(req.completion_request))
        for choice in gen.choices:
            _check_choice(bundle, settings, choice, batch=True)
            out, st = advance(pipe, start, choice.token_ids or (), final=True, finish_reason=choice.finish_reason,
                              stop_reason=choice.stop_reason,
                              logprob_content=choice.logprobs.content if choice.logprobs else None)
            item = _completion_choice(out, len(choices), choice, st)
            if st.ret_ids:
                item["prompt_token_ids"] = gen.prompt_token_ids
            choices.append(item)
            completion_total += len(choice.token_ids or ())
        prompt_total += req.prompt_tokens[i] if req.prompt_tokens else len(prompt_ids or ())
    kv = [g.kv_transfer_params for g in req.generate_responses]
    return {"id": req.generate_responses[0].request_id, "object": "text_completion", "created": int(time.time()),
            "model": name, "choices": choices, "usage": _usage(prompt_total, completion_total),
            "system_fingerprint": None, "kv_transfer_params": kv[0] if all(k == kv[0] for k in kv) else None,
            "metrics": req.generate_responses[0].metrics if n == 1 else None}


def _completion_stream(
    bundle: ModelBundle, settings: Settings, req: DerenderCompletionStreamRequest
) -> dict[str, Any]:
    check_model(bundle, req.model)
    pipe = _plain(pipeline_for(bundle, settings))
    opts = req.completion_request
    state = _open_state(bundle, settings, pipe, req, opts, _completion_lp_limit(opts))
    out, state = _stream_step(bundle, settings, pipe, state, req.generate_chunk)
    choices = []
    if out is not None:
        choice = req.generate_chunk.choices[0]
        item = _completion_choice(out, choice.index, choice, state)
        del item["prompt_logprobs"]
        item["weight_versions"] = None
        choices.append(item)
    chunk = {"id": state.rid, "object": "text_completion", "created": state.created, "model": state.model,
             "choices": choices, "usage": _stream_usage(req.prompt_tokens, state, req.generate_chunk.usage),
             "system_fingerprint": None, "metrics": req.generate_chunk.metrics,
             "kv_transfer_params": req.generate_chunk.kv_transfer_params}
    return {"chunk": chunk, "stream_state": encode_state(state, settings.stream_state_keys),
            "stop_generation": bool(out and out.stop_generation)}
