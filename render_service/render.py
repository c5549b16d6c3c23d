"""Render: OpenAI chat / completions requests → ``GenerateRequest`` (token ids + sampling params).

Entry points (each takes the loaded bundle, the settings and the parsed JSON body):

* ``render_chat(bundle, settings, body) -> dict``: one ``GenerateRequest`` (vLLM 0.33
  ``/v1/chat/completions/render``; upstream-render-api.md §3, §5).
* ``render_completion(bundle, settings, body) -> list[dict]``: one per prompt.
* ``tokenize(bundle, settings, body) -> dict`` and ``detokenize(...) -> dict``.

Errors: :class:`~render_service.errors.InvalidRequest` and subclasses (400), pydantic
``ValidationError`` (400, mapped by the app), :class:`~render_service.errors.UnknownModel` (404).
"""

from __future__ import annotations

import uuid
from typing import Any

from . import messages, sampling, tokenization, tool_choice
from .chat_prompt import ChatPrompt, chat_prompt, check_ids, reasoning_ended, tool_output_is_guided_json
from .errors import InvalidRequest
from .models import ModelBundle, check_model
from .protocol.chat import ChatCompletionRequest
from .protocol.common import SamplingRequestFields
from .protocol.completion import CompletionRequest
from .protocol.generate import GenerateRequest
from .settings import Settings


def _base_id(body: dict[str, Any]) -> str:
    rid = body.get("request_id")
    return rid if isinstance(rid, str) and rid else uuid.uuid4().hex


def _check_common(req: SamplingRequestFields, body: dict[str, Any]) -> None:
    if req.use_beam_search:
        raise InvalidRequest("Beam search is not supported by the render endpoint", param="use_beam_search")
    if body.get("stream_options") and not req.stream:
        raise InvalidRequest("Stream options can only be defined when `stream=True`.", param="stream_options")


def _check_logprobs(k: int | None, settings: Settings, param: str) -> None:
    if k is None:
        return
    if k < -1:
        raise InvalidRequest(f"`{param}` must be a positive value or -1.", param=param)
    if k > settings.max_logprobs:
        raise InvalidRequest(
            f"Requested {param} of {k}, which is greater than max allowed: {settings.max_logprobs}",
            param=param,
        )


# ---------------------------------------------------------------------------------------------
# entry points


def _generate_request(
    req: SamplingRequestFields,
    *,
    request_id: str,
    token_ids: list[int],
    sampling_params: dict[str, Any],
    model: str | None,
    **extra: Any,
) -> dict[str, Any]:
    return GenerateRequest(
        request_id=request_id,
        token_ids=token_ids,
        sampling_params=sampling_params,
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


def _check_chat(req: ChatCompletionRequest, body: dict[str, Any], settings: Settings) -> int | None:
    """Request-level checks of a chat request; returns the engine ``logprobs`` (top-k) value."""
    _check_common(req, body)
    if body.get("continue_final_message") and body.get("add_generation_prompt"):
        raise InvalidRequest(
            "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
            param="continue_final_message",
        )
    if req.top_logprobs is not None and req.top_logprobs != 0 and not req.logprobs:
        raise InvalidRequest(
            "when using `top_logprobs`, `logprobs` must be set to true.", param="top_logprobs"
        )
    top_logprobs = (req.top_logprobs if req.top_logprobs is not None else 0) if req.logprobs else None
    _check_logprobs(top_logprobs, settings, "top_logprobs")
    _check_logprobs(req.prompt_logprobs, settings, "prompt_logprobs")
    return top_logprobs


def _adjust_chat(
    bundle: ModelBundle,
    settings: Settings,
    req: ChatCompletionRequest,
    choice: str | dict[str, Any],
    tools: list[dict[str, Any]] | None,
) -> ChatCompletionRequest:
    """What upstream's parser ``adjust_request`` and ``echo`` change before sampling params are
    built: the forced-tool JSON schema, ``skip_special_tokens=False`` when a parser needs the
    markers, prompt logprobs for ``echo``."""
    update: dict[str, Any] = {}
    forced = tool_choice.forced_schema(choice, tools, req.parallel_tool_calls)
    if forced is not None and tool_output_is_guided_json(bundle, settings):
        update.update(structured_outputs={"json": forced}, response_format=None)
    if settings.reasoning_parser or (settings.tool_call_parser and tools and choice != "none"):
        update["skip_special_tokens"] = False
    if req.echo and req.prompt_logprobs is None and req.top_logprobs is not None:
        update["prompt_logprobs"] = req.top_logprobs
    return req.model_copy(update=update) if update else req


def _parse_context(
    req: ChatCompletionRequest,
    tools: list[dict[str, Any]] | None,
    choice: str | dict[str, Any],
    prompt: ChatPrompt,
) -> dict[str, Any]:
    """``parse_context`` (upstream shape; template kwargs include the generation-prompt flags)."""
    return {
        "tools": tools,
        "tool_choice": choice,
        "parallel_tool_calls": req.parallel_tool_calls if req.parallel_tool_calls is not None else True,
        "include_reasoning": req.include_reasoning,
        "chat_template_kwargs": {
            **prompt.template_kwargs,
            "add_generation_prompt": req.add_generation_prompt,
            "continue_final_message": req.continue_final_message,
        },
        "history_tool_call_cnt": prompt.history_tool_call_cnt,
    }


def render_chat(bundle: ModelBundle, settings: Settings, body: Any) -> dict[str, Any]:
    """One ``GenerateRequest`` dict for an OpenAI chat request (upstream-render-api.md §3, §5).

    Raises:
        InvalidRequest: beam search, ``stream_options`` without ``stream``, tool-choice problems,
            untrusted request template, bad messages/tools, template failure or budget, prompt
            too long (``ContextLengthExceeded``), logprobs over ``--max-logprobs``.
        UnknownModel: ``model`` is not served.
    """
    if not isinstance(body, dict):
        raise InvalidRequest("request body must be a JSON object")
    req = ChatCompletionRequest.model_validate(body)
    check_model(bundle, req.model)
    top_logprobs = _check_chat(req, body, settings)
    tools = messages.validate_tools(req.tools)
    choice = tool_choice.resolve(req.tool_choice, tools, settings)
    template_tools = None if choice == "none" and settings.exclude_tools_when_tool_choice_none else tools
    prompt = chat_prompt(bundle, settings, req, template_tools)

    requested = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
    max_tokens = sampling.resolve_max_tokens(requested, len(prompt.token_ids), bundle)
    req = _adjust_chat(bundle, settings, req, choice, tools)
    sp = sampling.build(req, max_tokens=max_tokens, logprobs=top_logprobs, bundle=bundle, settings=settings)
    parse_context = _parse_context(req, tools, choice, prompt)
    ctk = parse_context["chat_template_kwargs"]
    return _generate_request(
        req,
        request_id=f"chatcmpl-{_base_id(body)}",
        token_ids=prompt.token_ids,
        sampling_params=sp,
        model=req.model,  # copied from the request, as upstream (null when absent)
        token_offsets=prompt.token_offsets,
        reasoning_ended=reasoning_ended(bundle, settings, parse_context, prompt.token_ids),
        reasoning_parser_kwargs={"chat_template_kwargs": ctk} if settings.reasoning_parser else None,
        parse_context=parse_context,
    )


def _completion_prompts(bundle: ModelBundle, req: CompletionRequest) -> list[list[int]]:
    prompts = _completion_prompt_ids(bundle, req)
    return [
        tokenization.truncate(ids, req.truncate_prompt_tokens, req.truncation_side, bundle.max_model_len)
        for ids in prompts
    ]


def _completion_prompt_ids(bundle: ModelBundle, req: CompletionRequest) -> list[list[int]]:
    prompt = req.prompt
    if isinstance(prompt, str):
        return [tokenization.encode_text(bundle, prompt, add_special_tokens=req.add_special_tokens)]
    if not prompt:
        raise InvalidRequest("prompt must not be empty", param="prompt")
    if all(isinstance(p, int) for p in prompt):
        return [check_ids(bundle, prompt, "prompt")]
    out = []
    for i, p in enumerate(prompt):
        if isinstance(p, str):
            out.append(tokenization.encode_text(bundle, p, add_special_tokens=req.add_special_tokens))
        else:
            out.append(check_ids(bundle, p, f"prompt.{i}"))
    return out


def render_completion(bundle: ModelBundle, settings: Settings, body: Any) -> list[dict[str, Any]]:
    """One ``GenerateRequest`` per prompt of an OpenAI completions request (upstream §5, §9).

    Raises:
        InvalidRequest: beam search, ``stream_options`` without ``stream``, ``suffix`` (no FIM
            rendering here), ``prompt_embeds``, empty prompt, ids outside the vocabulary,
            prompt too long, logprobs over ``--max-logprobs``.
        UnknownModel: ``model`` is not served.
    """
    if not isinstance(body, dict):
        raise InvalidRequest("request body must be a JSON object")
    if body.get("prompt_embeds") is not None:
        raise InvalidRequest("prompt_embeds is not supported by this render service", param="prompt_embeds")
    req = CompletionRequest.model_validate(body)
    check_model(bundle, req.model)
    model = req.model  # copied from the request, as upstream (null when absent)
    _check_common(req, body)
    if req.suffix is not None:
        raise InvalidRequest("suffix is not supported for this model", param="suffix")
    _check_logprobs(req.logprobs, settings, "logprobs")
    _check_logprobs(req.prompt_logprobs, settings, "prompt_logprobs")
    prompts = _completion_prompts(bundle, req)
    base = f"cmpl-{_base_id(body)}"
    out = []
    for i, ids in enumerate(prompts):
        if not ids:
            raise InvalidRequest("No token_ids rendered: the prompt is empty", param="prompt")
        max_tokens = sampling.resolve_max_tokens(
            req.max_tokens, len(ids), bundle, clamp="max_tokens" not in body
        )
        prompt_logprobs_req = req
        if req.echo and req.prompt_logprobs is None and req.logprobs is not None:
            prompt_logprobs_req = req.model_copy(update={"prompt_logprobs": req.logprobs})
        sp = sampling.build(
            prompt_logprobs_req,
            max_tokens=max_tokens,
            logprobs=req.logprobs,
            bundle=bundle,
            settings=settings,
        )
        rid = base if len(prompts) == 1 else f"{base}-{i}"
        out.append(_generate_request(req, request_id=rid, token_ids=ids, sampling_params=sp, model=model))
    return out


def tokenize(bundle: ModelBundle, settings: Settings, body: Any) -> dict[str, Any]:
    """``/tokenize``: ``{prompt, add_special_tokens?}`` or ``{messages, ...chat options}`` →
    ``{count, max_model_len, tokens, token_strs}`` (``token_strs`` only with
    ``return_token_strs``).

    Raises:
        InvalidRequest: neither or both of ``prompt``/``messages``; chat errors as in render.
    """
    if not isinstance(body, dict) or ("prompt" in body) == ("messages" in body):
        raise InvalidRequest("give exactly one of `prompt` or `messages`", param="prompt")
    check_model(bundle, body.get("model"))
    if "prompt" in body:
        if not isinstance(body["prompt"], str):
            raise InvalidRequest("prompt must be a string", param="prompt")
        ids = tokenization.encode_text(
            bundle, body["prompt"], add_special_tokens=body.get("add_special_tokens", True) is not False
        )
    else:
        req = ChatCompletionRequest.model_validate(body)
        tools = messages.validate_tools(req.tools)
        ids = chat_prompt(bundle, settings, req, tools).token_ids
    strs = tokenization.token_strings(bundle, ids) if body.get("return_token_strs") else None
    return {"count": len(ids), "max_model_len": bundle.max_model_len, "tokens": ids, "token_strs": strs}


def detokenize(bundle: ModelBundle, settings: Settings, body: Any) -> dict[str, Any]:
    """``/detokenize``: ``{tokens}`` → ``{prompt}`` (special tokens kept).

    Raises:
        InvalidRequest: ``tokens`` missing, not a list of ints, or outside the vocabulary.
    """
    if not isinstance(body, dict) or not isinstance(body.get("tokens"), list):
        raise InvalidRequest("`tokens` must be a list of token ids", param="tokens")
    check_model(bundle, body.get("model"))
    ids = check_ids(bundle, body["tokens"], "tokens")
    return {"prompt": tokenization.decode(bundle, ids)}
