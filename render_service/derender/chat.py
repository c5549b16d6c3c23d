"""Chat derender: engine output token ids → OpenAI chat responses, batch and one chunk per call.

Entry points (each takes the loaded bundle, the settings and the parsed JSON body):

* ``derender_chat(bundle, settings, body)``: ``ChatCompletionResponse`` when ``stream`` is
  false, ``{"chunk": ChatCompletionStreamResponse, "stream_state": str, "stop_generation":
  bool}`` when true.
* ``derender_completion(bundle, settings, body)``: the completions analogue
  (:mod:`render_service.derender.completions`).

Both run the per-choice pipeline of :mod:`render_service.derender.pipeline`; request checks, the
initial state and the streaming call live in :mod:`render_service.derender.flow`.

Streaming contract (differs from vLLM 0.33 where it is better):

* ``stream_state`` is an opaque string (:mod:`render_service.derender.stream_state`); echo it unchanged.
  Each call costs O(new tokens): nothing is replayed. After the first call ``chat_request`` /
  ``completion_request`` and ``prompt_token_ids`` may be omitted (they are ignored then).
* ``stop`` strings are enforced while streaming (upstream refuses them): text that may start a
  stop string is held back; when one completes, the chunk carries ``finish_reason: "stop"``,
  ``stop_reason: "<string>"`` and the response ``"stop_generation": true`` — the caller should
  abort the engine request. Later chunks of a finished stream return ``choices: []`` (usage,
  if the engine sent it, is still passed through).
* Tool-call ids are deterministic (:func:`render_service.derender.pipeline.tool_call_id`).

Errors (400 unless noted): validation; unknown model (404); parser configured and no
``chat_request`` (batch, or the first streaming call); more than one choice in a stream chunk;
empty ``token_ids`` in a batch choice; token lists longer than ``max_model_len``; invalid
``stream_state``.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..errors import InvalidRequest
from ..models import ModelBundle, check_model
from ..protocol.derender import (
    DERENDER_CHAT_BODY,
    ChatRequestFields,
    DerenderChatRequest,
    DerenderChatStreamRequest,
    GenerateChoice,
    StreamState,
)
from ..settings import Settings
from .flow import (
    LiveStream,
    chat_lp_limit,
    check_choice,
    check_count,
    check_prompt_ids,
    initial_state,
    is_stream,
    metrics_block,
    open_live,
    run_stream,
    union_failure,
    usage_block,
)
from .pipeline import StepOutput, advance, pipeline_for

PARSER_NEEDS_REQUEST = (
    "chat_request is required when a tool or reasoning parser is configured because plain "
    "detokenization would leak raw parser markup into content."
)
PARSER_NEEDS_REQUEST_STREAM = (
    "chat_request is required on the first streaming derender call (stream_state null) when a tool "
    "or reasoning parser is configured: it decides tools, tool_choice and reasoning handling. "
    "Later calls may omit it."
)


#: ``DerenderChatStreamRequest.model_validate`` without its keyword-argument wrapper (once per
#: streamed chunk; the same validator, the same errors).
_VALIDATE_STREAM = DerenderChatStreamRequest.__pydantic_validator__.validate_python


def derender_chat(bundle: ModelBundle, settings: Settings, body: Any) -> dict[str, Any]:
    """Chat derender; dispatches on ``body["stream"]``."""
    try:
        req = _VALIDATE_STREAM(body) if is_stream(body) else DerenderChatRequest.model_validate(body)
    except ValidationError:
        raise union_failure(DERENDER_CHAT_BODY, body) from None
    if isinstance(req, DerenderChatStreamRequest):
        return _chat_stream(bundle, settings, req)
    return _chat_batch(bundle, settings, req)


# --- chat batch ---------------------------------------------------------------------------------


#: Reasoning parsers (vLLM 0.33 ``BaseThinkingReasoningParser`` subclasses, not engine adapters)
#: that give an output without an end marker as reasoning as it is, ``""`` included (measured by
#: the differential harness on DeepSeek-R1-Distill: EOS only -> ``reasoning: ""``).
RAW_REASONING_PARSERS = frozenset({"deepseek_r1", "ernie45", "hy_v3", "k2_horizon", "minimax_m3"})


def _engine_tools(settings: Settings, pipe: Any, chat: ChatRequestFields | None = None) -> bool:
    """vLLM 0.33 parses with its engine adapters (our specs with ``strip_on_none``, and harmony)
    and no legacy reasoning parser: an output with no call and no text then has content
    ``null`` (``tool_call_info.content or None``), not ``""``. Mistral (pre-v11) only with
    ``tools`` under ``tool_choice`` auto (measured: ``""`` without tools, under ``none`` and
    under ``required`` / named)."""
    tool = pipe.parser.tool if pipe.parser is not None else None
    engine = settings.tool_call_parser == "openai" or (tool is not None and tool.strip_on_none)
    if settings.tool_call_parser == "mistral":
        engine = chat is not None and bool(chat.tools) and chat.tool_choice in (None, "auto")
    return engine and settings.reasoning_parser not in RAW_REASONING_PARSERS


def _message(
    out: StepOutput, chat: ChatRequestFields | None, parsed: bool, in_content: bool = False,
    engine: bool = False, raw_reasoning: bool = False,
) -> dict[str, Any]:
    """``in_content``: the parser ended outside reasoning (or has no reasoning format); an empty
    output then has content ``""`` as vLLM 0.33 gives (e.g. Qwen3 with ``enable_thinking: false``
    and only EOS), while an output still in reasoning has content ``null``; ``engine``: see
    :func:`_engine_tools` (``null`` then); ``raw_reasoning``: an output still in reasoning has
    reasoning ``""`` when empty (:data:`RAW_REASONING_PARSERS`)."""
    content: str | None = out.content
    reasoning = out.reasoning or ("" if out.empty_reasoning else None)  # FormatSpec.empty_reasoning
    if parsed:
        forced = chat is not None and (chat.tool_choice == "required" or isinstance(chat.tool_choice, dict))
        # raw_reasoning: vLLM's legacy thinking parsers answer the text after the end marker
        # ``or None`` (measured: DeepSeek-R1 ``</think>`` + EOS -> content null)
        empty = in_content and not out.reasoning and not out.tool_calls and not engine \
            and not raw_reasoning
        content = out.content or ("" if forced or empty else None)
        if raw_reasoning and not in_content and not out.content and not out.tool_calls:
            reasoning = out.reasoning
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "refusal": None,
        "annotations": None,
        "audio": None,
        "function_call": None,
        "tool_calls": [
            {
                "id": tc["id"],
                "type": "function",
                "function": {"name": tc["function"]["name"], "arguments": tc["function"]["arguments"] or ""},
            }
            for tc in out.tool_calls
        ],
        "reasoning": reasoning,
    }
    if not message["tool_calls"]:
        del message["tool_calls"]
    return message


def _chat_batch(bundle: ModelBundle, settings: Settings, req: DerenderChatRequest) -> dict[str, Any]:
    name = check_model(bundle, req.model)
    pipe = pipeline_for(bundle, settings)
    gen, chat = req.generate_response, req.chat_request
    check_count(len(gen.choices), "choices")
    if pipe.parser is not None and chat is None:
        raise InvalidRequest(PARSER_NEEDS_REQUEST)  # vLLM 0.33: no param
    prompt_ids = req.prompt_token_ids if req.prompt_token_ids is not None else gen.prompt_token_ids
    check_prompt_ids(bundle, settings, prompt_ids)
    for choice in gen.choices:
        check_choice(bundle, settings, choice, batch=True)
    start = initial_state(
        pipe,
        settings,
        rid=gen.request_id,
        model=name,
        opts=chat,
        prompt_ids=prompt_ids,
        lp_limit=chat_lp_limit(chat),
    )
    choices = []
    for choice in gen.choices:
        out, end_state = advance(
            pipe,
            start,
            choice.token_ids or (),
            final=True,
            finish_reason=choice.finish_reason,
            stop_reason=choice.stop_reason,
            choice_index=choice.index,
            logprob_content=choice.logprobs.content if choice.logprobs else None,
        )
        choices.append(
            {
                "index": choice.index,
                "message": _message(
                    out, chat, pipe.parser is not None,
                    pipe.parser is not None and pipe.parser.reasoning_ended(end_state.parser) is not False,
                    engine=_engine_tools(settings, pipe, chat) or (
                        pipe.parser is not None and pipe.parser.dropped_calls(end_state.parser)),
                    raw_reasoning=settings.reasoning_parser in RAW_REASONING_PARSERS,
                ),
                "logprobs": out.logprobs,
                "finish_reason": out.finish_reason,
                "stop_reason": out.stop_reason,
                "token_ids": choice.token_ids if start.ret_ids and not start.hide else None,
                "routed_experts": None,
                "weight_versions": None,
            }
        )
    # vLLM 0.33: ``prompt_tokens`` only counts what the caller sent (0 without it)
    prompt = req.prompt_tokens if req.prompt_tokens is not None else 0
    completion = sum(len(c.token_ids or ()) for c in gen.choices)
    return {
        "id": gen.request_id,
        "object": "chat.completion",
        "created": start.created,
        "model": name,
        "choices": choices,
        "service_tier": None,
        "system_fingerprint": None,
        "usage": usage_block(prompt, completion),
        "prompt_logprobs": gen.prompt_logprobs,
        "prompt_token_ids": gen.prompt_token_ids if start.ret_ids else None,
        "prompt_text": None,
        "kv_transfer_params": gen.kv_transfer_params,
        "ec_transfer_params": None,
        "metrics": metrics_block(gen.metrics),
    }


def _delta_choice(out: StepOutput, choice: GenerateChoice, state: StreamState) -> dict[str, Any]:
    delta: dict[str, Any] = {
        "role": None if state.role else "assistant",
        "content": out.content or None,
        "reasoning": out.reasoning or None,
    }
    if out.tool_calls:
        delta["tool_calls"] = out.tool_calls
    if not state.role:
        state.role = True
    return {
        "index": choice.index,
        "delta": delta,
        "logprobs": out.logprobs,
        "finish_reason": out.finish_reason,
        "stop_reason": out.stop_reason,
        "token_ids": choice.token_ids if state.ret_ids and not state.hide else None,
        "weight_versions": None,
    }


def _chat_stream(bundle: ModelBundle, settings: Settings, req: DerenderChatStreamRequest) -> dict[str, Any]:
    check_model(bundle, req.model)
    pipe = pipeline_for(bundle, settings)
    if req.stream_state is None and pipe.parser is not None and req.chat_request is None:
        raise InvalidRequest(PARSER_NEEDS_REQUEST_STREAM)
    return run_stream(
        bundle, settings, pipe, req, req.chat_request, chat_lp_limit(req.chat_request),
        object_name="chat.completion.chunk", shape=_delta_choice,
        extra={"prompt_token_ids": None, "prompt_text": None},
    )


def open_chat_stream(
    bundle: ModelBundle, settings: Settings, chat_request: Any, prompt_token_ids: list[int], rid: str
) -> LiveStream:
    """An in-memory chat stream (:class:`~render_service.derender.flow.LiveStream`) for one
    rendered request: what the first streaming derender call would open, kept as live state.

    ``chat_request`` is the OpenAI chat request (dict), ``prompt_token_ids`` the rendered prompt,
    ``rid`` the id of the chunks (and the seed of tool-call ids).

    Raises:
        UnknownModel: ``model`` is not served. ValidationError: a malformed request.
    """
    chat = ChatRequestFields.model_validate(chat_request)
    return open_live(bundle, settings, chat.model, chat, prompt_token_ids, rid,
                     object_name="chat.completion.chunk", shape=_delta_choice,
                     extra={"prompt_token_ids": None, "prompt_text": None}, lp_limit=chat_lp_limit(chat))
