"""What chat and completions render share: request-level checks and the ``GenerateRequest`` shape.

Sources: vLLM 0.33 ``OpenAIServing`` request checks (beam search, ``stream_options``, logprob
bounds) and its ``GenerateRequest`` (upstream-render-api.md §5).
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import InvalidRequest, vllm_error
from ..protocol.common import SamplingRequestFields
from ..protocol.generate import GenerateRequest
from ..settings import Settings


def base_id(body: dict[str, Any]) -> str:
    """The request id base: the body's ``request_id`` (set from ``X-Request-Id``), else a fresh uuid4 hex."""
    rid = body.get("request_id")
    return rid if isinstance(rid, str) and rid else uuid.uuid4().hex


def pre_check(body: dict[str, Any], kind: str) -> None:
    """The checks vLLM 0.33's chat / completions request models make on the raw body before
    their fields are validated (its ``mode="before"`` model validators, in their order), so that
    a body wrong in both ways gets vLLM's answer. ``kind`` is ``"chat"`` or ``"completion"``.

    Raises:
        InvalidRequest: worded as vLLM's ``VLLMValidationError`` (:func:`vllm_error`).
    """
    rf = body.get("response_format")
    if isinstance(rf, dict) and rf.get("type") == "json_schema" and rf.get("json_schema") is None:
        raise vllm_error("When response_format type is 'json_schema', the 'json_schema' field must be "
                         "provided.", "response_format")
    if kind == "completion":
        _pre_check_structured_outputs(body, "structured_outputs")
    if kind == "chat" and body.get("stream_options") and not body.get("stream"):
        raise vllm_error("Stream options can only be defined when `stream=True`.", "stream_options")
    top = "top_logprobs" if kind == "chat" else "logprobs"
    for name in ("prompt_logprobs", top):
        value = body.get(name)
        if value is not None and not isinstance(value, (int, float)):
            raise vllm_error(f"`{name}` must be an integer.", name, value)
    prompt_logprobs = body.get("prompt_logprobs")
    if prompt_logprobs is not None:
        if body.get("stream") and (prompt_logprobs > 0 or prompt_logprobs == -1):
            raise vllm_error("`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs")
        if prompt_logprobs < 0 and prompt_logprobs != -1:
            raise vllm_error("`prompt_logprobs` must be a positive value or -1.", "prompt_logprobs",
                             prompt_logprobs)
    k = body.get(top)
    if k is not None and k < 0 and k != -1:
        raise vllm_error(f"`{top}` must be a positive value or -1.", top, k)
    if kind == "chat":
        if k is not None and (k == -1 or k > 0) and not body.get("logprobs"):
            raise vllm_error("when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs")
        _pre_check_structured_outputs(body, None)
        _pre_check_tools(body)
        return
    if body.get("stream_options") and not body.get("stream"):
        raise vllm_error("Stream options can only be defined when `stream=True`.", "stream_options")
    prompt = body.get("prompt")
    if (prompt is None or prompt == "") and not body.get("prompt_embeds"):
        raise vllm_error("Either prompt or prompt_embeds must be provided and non-empty.", "prompt")


def _pre_check_structured_outputs(body: dict[str, Any], parameter: str | None) -> None:
    """vLLM 0.33 ``check_structured_outputs_count``: at most one of ``json`` / ``regex`` /
    ``choice``, and (chat, ``parameter`` None) none of them beside a named ``tool_choice``."""
    so = body.get("structured_outputs")
    if not isinstance(so, dict):
        return
    count = sum(so.get(k) is not None for k in ("json", "regex", "choice"))
    if count > 1:
        raise vllm_error("You can only use one kind of constraints for structured outputs ('json', 'regex' "
                         "or 'choice').", parameter)
    if parameter is None and count and body.get("tool_choice", "none") not in ("none", "auto", "required"):
        raise vllm_error("You can only either use constraints for structured outputs or tools, not both.")


def _pre_check_tools(body: dict[str, Any]) -> None:
    """vLLM 0.33 ``ChatCompletionRequest.check_tool_usage``: an empty ``tools``, a
    ``tool_choice`` without ``tools`` or of another type than a string or object."""
    if body.get("tools") == []:
        raise vllm_error("`tools` must not be an empty array. Either provide at least one tool or omit "
                         "the field entirely.", "tools")
    choice = body.get("tool_choice")
    if choice is None or choice == "none":
        return
    if body.get("tools") is None:
        raise vllm_error("When using `tool_choice`, `tools` must be set.", "tool_choice")
    if choice not in ("auto", "required") and not isinstance(choice, dict):
        raise vllm_error(f'Invalid value for `tool_choice`: {choice}! Only named tools, "none", "auto" or '
                         '"required" are supported.', "tool_choice")


def verify_sampling(req: SamplingRequestFields, max_tokens: int | None) -> None:
    """vLLM 0.33 ``SamplingParams._verify_args`` on the fields the request set, in its order and
    wording (``param`` only where vLLM names one). ``max_tokens`` is the requested output bound
    (``max_completion_tokens`` or ``max_tokens``).

    Raises:
        InvalidRequest: ``n`` below 1, a penalty, ``temperature``, ``top_p``, ``top_k``, ``min_p``,
            ``max_tokens``, ``min_tokens`` (also above ``max_tokens``) or ``stream_interval`` out of
            range; an empty string in ``stop`` or ``bad_words``.
    """
    if req.n is not None and req.n < 1:
        raise vllm_error(f"n must be at least 1, got {req.n}.")
    for name in ("presence_penalty", "frequency_penalty"):
        value = getattr(req, name)
        if value is not None and not -2.0 <= value <= 2.0:
            raise vllm_error(f"{name} must be in [-2, 2], got {float(value)}.")
    rep = req.repetition_penalty
    if rep is not None and not math.isfinite(rep):
        raise vllm_error(f"repetition_penalty must be a finite number, got {float(rep)}.")
    if rep is not None and rep <= 0.0:
        raise vllm_error(f"repetition_penalty must be greater than zero, got {float(rep)}.")
    t = req.temperature
    if t is not None:
        t = float(t)
        if not math.isfinite(t):
            raise vllm_error(f"temperature must be a finite number, got {t}.", "temperature", t)
        if t < 0.0:
            raise vllm_error(f"temperature must be non-negative, got {t}.", "temperature", t)
        if t > 2.0:
            raise vllm_error(f"temperature must be in [0, 2], got {t}.", "temperature", t)
    if req.top_p is not None and not 0.0 < req.top_p <= 1.0:
        raise vllm_error(f"top_p must be in (0, 1], got {float(req.top_p)}.", "top_p", float(req.top_p))
    if req.top_k is not None and req.top_k < -1:
        raise vllm_error(f"top_k must be 0 (disable), or at least 1, got {req.top_k}.")
    if req.min_p is not None and not 0.0 <= req.min_p <= 1.0:
        raise vllm_error(f"min_p must be in [0, 1], got {float(req.min_p)}.")
    if max_tokens is not None and max_tokens < 1:
        raise vllm_error(f"max_tokens must be at least 1, got {max_tokens}.", "max_tokens", max_tokens)
    if req.min_tokens < 0:
        raise vllm_error(f"min_tokens must be greater than or equal to 0, got {req.min_tokens}.")
    if max_tokens is not None and req.min_tokens > max_tokens:
        raise vllm_error(f"min_tokens must be less than or equal to max_tokens={max_tokens}, "
                         f"got {req.min_tokens}.")
    if req.stream_interval is not None and req.stream_interval < 1:
        raise vllm_error(f"stream_interval must be at least 1, got {req.stream_interval}.",
                         "stream_interval", req.stream_interval)
    stops = [req.stop] if isinstance(req.stop, str) else (req.stop or [])
    if any(not stop for stop in stops):
        raise vllm_error("stop cannot contain an empty string.")
    if req.bad_words and any(not word for word in req.bad_words):
        raise vllm_error(f"bad_words cannot contain an empty string. Got bad_words={req.bad_words}")


def check_common(req: SamplingRequestFields, body: dict[str, Any]) -> None:
    """Checks every render makes (upstream wording); a ``thinking_token_budget`` of -1
    (unlimited) is cleared from ``req``, as vLLM 0.33 sends it unset.

    Raises:
        InvalidRequest: ``use_beam_search``; ``stream_options`` without ``stream``; a
            ``thinking_token_budget`` that is no integer (a boolean, a float) or below -1; an
            ``mm_processor_kwargs`` that is no object.
    """
    if req.use_beam_search:
        raise InvalidRequest("Beam search is not supported by the render endpoint", param="use_beam_search")
    if body.get("stream_options") and not req.stream:
        raise InvalidRequest("Stream options can only be defined when `stream=True`.", param="stream_options")
    budget = body.get("thinking_token_budget")
    if budget is not None and (type(budget) is not int or budget < -1):
        raise InvalidRequest(
            "`thinking_token_budget` must be a non-negative integer or -1 for unlimited.",
            param="thinking_token_budget",
        )
    if budget == -1:  # vLLM ``validate_thinking_token_budget``: unlimited, sent as unset
        req.thinking_token_budget = None
    kwargs = body.get("mm_processor_kwargs")
    if kwargs is not None and not isinstance(kwargs, dict):  # vLLM's field is ``dict | None``
        raise InvalidRequest("`mm_processor_kwargs` must be an object", param="mm_processor_kwargs")


def check_logprobs(k: int | None, settings: Settings, param: str) -> None:
    """Bound a logprobs count ``k`` (``-1`` = all).

    Raises:
        InvalidRequest: ``k < -1`` or ``k > --max-logprobs`` (upstream wording, ``param`` named).
    """
    if k is None:
        return
    if k < -1:
        raise InvalidRequest(f"`{param}` must be a positive value or -1.", param=param)
    if k > settings.max_logprobs:
        raise InvalidRequest(
            f"Requested {param} of {k}, which is greater than max allowed: {settings.max_logprobs}",
            param=param,
        )


def generate_request(
    req: SamplingRequestFields,
    *,
    request_id: str,
    token_ids: list[int],
    sampling_params: dict[str, Any],
    model: str | None,
    **extra: Any,
) -> dict[str, Any]:
    """The ``GenerateRequest`` dict a tokens-only engine accepts (vLLM 0.33 field names): the request's
    pass-through fields plus ``token_ids``, ``sampling_params`` and endpoint-specific ``extra``.

    ``token_ids`` (the encoder's ints) skip pydantic: validating and dumping 9k ids cost 0.2 ms
    per request; the model builds every other key, in its order, and the ids are put in place.
    ``sampling_params`` and ``parse_context.tools`` (plain JSON values we built, typed ``Any``
    there) are put in place the same way: dumping would only copy them (the request's tool
    schemas, ~30 µs for six tools). A text-only render's inputs skip the model altogether
    (:func:`_plain_generate_request`: the same dict)."""
    if extra.keys() <= _PLAIN_EXTRAS and req.kv_transfer_params is None and req.ec_transfer_params is None:
        plain = _plain_generate_request(req, request_id, token_ids, sampling_params, model, extra)
        if plain is not None:
            return plain
    return _model_generate_request(req, request_id, token_ids, sampling_params, model, extra)


#: Extra keys :func:`_plain_generate_request` builds by hand (the text-only renders' keys).
_PLAIN_EXTRAS = frozenset({"token_offsets", "reasoning_ended", "reasoning_parser_kwargs", "parse_context",
                           "features"})
#: ``parse_context``'s declared keys (``ParseContextModel``), in its field order.
_CONTEXT_KEYS = ("tools", "tool_choice", "parallel_tool_calls", "include_reasoning", "chat_template_kwargs",
                 "history_tool_call_cnt")


def _plain_generate_request(req: SamplingRequestFields, request_id: str, token_ids: list[int],
                            sampling_params: dict[str, Any], model: str | None,
                            extra: dict[str, Any]) -> dict[str, Any] | None:
    """``GenerateRequest(...).model_dump()`` built as a dict, for the values a text-only render
    passes (checked here: plain ``str``/``bool``/``int``/``dict`` values of the declared types),
    ``None`` for anything else (the model then builds it). The same keys in the same order with
    the same values (``tests/test_generate_request.py`` compares both on drawn inputs); about 15 µs
    less per render than the model's validation and dump."""
    offsets, features = extra.get("token_offsets"), extra.get("features")
    ended, kwargs, context = extra.get("reasoning_ended"), extra.get("reasoning_parser_kwargs"), \
        extra.get("parse_context")
    if offsets is not None or features is not None or (ended is not None and type(ended) is not bool):
        return None
    if kwargs is not None:
        ctk = kwargs.get("chat_template_kwargs", {}) if type(kwargs) is dict else None
        if type(ctk) is not dict or kwargs.keys() - {"chat_template_kwargs"}:
            return None
        kwargs = {"chat_template_kwargs": dict(ctk)}
    if context is not None:
        context = _plain_context(context)
        if context is None:
            return None
    options = req.stream_options if req.stream else None
    return {
        "request_id": request_id,
        "token_ids": token_ids if type(token_ids) is list else list(token_ids),
        "token_offsets": None,
        "features": None,
        "content_parts": None,
        "sampling_params": sampling_params,
        "model": model,
        "reasoning_ended": ended,
        "reasoning_parser_kwargs": kwargs,
        "return_token_ids": req.return_token_ids,
        "output_mode": "tokens",
        "parse_context": context,
        "stream": req.stream,
        "stream_options": options.model_dump() if options is not None else None,
        "cache_salt": req.cache_salt,
        "priority": req.priority,
        "kv_transfer_params": None,
        "ec_transfer_params": None,
    }


def _plain_context(context: Any) -> dict[str, Any] | None:
    """``ParseContextModel(**context).model_dump()`` for a context of the declared types (the
    declared keys first, in field order, with their defaults, then the others), else ``None``."""
    if type(context) is not dict:
        return None
    tools, choice = context.get("tools"), context.get("tool_choice", "none")
    parallel, reasoning = context.get("parallel_tool_calls", True), context.get("include_reasoning", True)
    kwargs, count = context.get("chat_template_kwargs", {}), context.get("history_tool_call_cnt", 0)
    if not ((tools is None or type(tools) is list) and type(choice) in (str, dict)
            and type(parallel) is bool and type(reasoning) is bool and type(kwargs) is dict
            and type(count) is int):
        return None
    out = {"tools": tools, "tool_choice": dict(choice) if type(choice) is dict else choice,
           "parallel_tool_calls": parallel, "include_reasoning": reasoning,
           "chat_template_kwargs": dict(kwargs), "history_tool_call_cnt": count}
    for key, value in context.items():
        if key not in out:
            out[key] = value
    return out


def _model_generate_request(req: SamplingRequestFields, request_id: str, token_ids: list[int],
                            sampling_params: dict[str, Any], model: str | None,
                            extra: dict[str, Any]) -> dict[str, Any]:
    """:func:`generate_request` through the ``GenerateRequest`` model (every other input)."""
    context = extra.get("parse_context")
    tools = None
    if isinstance(context, dict) and isinstance(context.get("tools"), list):
        tools = context["tools"]
        extra["parse_context"] = {**context, "tools": []}
    out = GenerateRequest(
        request_id=request_id,
        token_ids=[],
        sampling_params={},
        model=model,
        return_token_ids=req.return_token_ids,
        stream=req.stream,
        stream_options=req.stream_options if req.stream else None,
        cache_salt=req.cache_salt,
        priority=req.priority,
        kv_transfer_params=req.kv_transfer_params,
        ec_transfer_params=req.ec_transfer_params,
        **extra,
    ).model_dump()
    out["token_ids"] = token_ids if type(token_ids) is list else list(token_ids)
    out["sampling_params"] = sampling_params
    if tools is not None:
        out["parse_context"]["tools"] = tools
    return out


#: Where the parts of a converted request (Messages, Responses → chat) came from: a chat path
#: (``messages.3`` or ``messages.3.content.1``) → the path in the client's request
#: (``messages.2.content.0``, ``input.4``, ``instructions``) and, for a content part whose type
#: the conversion changed, the type the client sent (an Anthropic ``image`` became ``image_url``).
Origins = dict[str, tuple[str, str | None]]

_CHAT_PATH = re.compile(r"messages\.\d+(?:\.content\.\d+)?")
#: Chat fields of a converted image part → the Anthropic block's own (``source`` holds the URL).
_PART_FIELDS = {".image_url": ".source"}


@contextmanager
def in_request_terms(origins: Origins) -> Iterator[None]:
    """Re-word an :class:`InvalidRequest` raised inside (by the chat render of a converted
    request) in the terms of the request the client sent: its ``param`` path (the chat path's
    longest known prefix replaced by its origin) and, where the conversion changed a content
    part's type, that type in the message (``'image_url'`` → ``'image'``). Errors with no known
    chat path pass unchanged."""
    try:
        yield
    except InvalidRequest as exc:
        param = exc.param or ""
        match = _CHAT_PATH.match(param)
        key = match.group(0) if match else ""
        while key and key not in origins:
            key = key.rpartition(".content.")[0]
        if key:
            where, kind = origins[key]
            rest = param[len(key):]
            if kind is not None:
                rest = next((new + rest[len(old):] for old, new in _PART_FIELDS.items()
                             if rest.startswith(old)), rest)
                exc.message = exc.message.replace("'image_url'", repr(kind))
                exc.args = (exc.message,)
            exc.param = where + rest
        raise
