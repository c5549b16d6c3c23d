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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import chat_template, messages, sampling, tool_choice, tokenization
from .errors import InvalidRequest
from .models import ModelBundle, check_model
from .protocol.chat import ChatCompletionRequest
from .protocol.common import SamplingRequestFields
from .protocol.completion import CompletionRequest
from .protocol.generate import GenerateRequest
from .settings import Settings

#: Template variables a request's ``chat_template_kwargs`` may not replace.
RESERVED_TEMPLATE_KWARGS = frozenset(
    {"messages", "tools", "documents", "add_generation_prompt", "continue_final_message", "chat_template",
     "tokenize", "conversation"}
)

_PARSERS: dict[tuple[str, int, str | None, str | None], Any] = {}


@dataclass(frozen=True, slots=True)
class ChatPrompt:
    """A rendered chat prompt and what was decided on the way.

    Attributes:
        token_ids: the prompt ids.
        token_offsets: ``[start, end)`` character spans of each id in the rendered text, when asked
            for (``return_token_offsets``) and the text was rendered here.
        template_kwargs: merged chat template kwargs (defaults ⊕ request, ``reasoning_effort``).
        history_tool_call_cnt: tool calls in the conversation history.
    """

    token_ids: list[int]
    template_kwargs: dict[str, Any]
    history_tool_call_cnt: int
    token_offsets: list[tuple[int, int]] | None = None


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
        raise InvalidRequest(f"Requested {param} of {k}, which is greater than max allowed: "
                             f"{settings.max_logprobs}", param=param)


def _check_ids(bundle: ModelBundle, ids: Any, param: str) -> list[int]:
    if not isinstance(ids, list):
        raise InvalidRequest("token ids must be a list of integers", param=param)
    for tid in ids:
        if not isinstance(tid, int) or isinstance(tid, bool) or not 0 <= tid < bundle.vocab_size:
            raise InvalidRequest(f"Token id {tid!r} is out of vocabulary (size {bundle.vocab_size})", param=param)
    return list(ids)


# ---------------------------------------------------------------------------------------------
# chat prompt


def template_kwargs(req: ChatCompletionRequest, settings: Settings) -> dict[str, Any]:
    """``--default-chat-template-kwargs`` under the request's ``chat_template_kwargs`` (request wins),
    plus ``reasoning_effort`` when set; reserved template variables are dropped."""
    merged = {**settings.default_chat_template_kwargs, **(req.chat_template_kwargs or {})}
    if req.reasoning_effort is not None:
        merged["reasoning_effort"] = req.reasoning_effort
    return {k: v for k, v in merged.items() if k not in RESERVED_TEMPLATE_KWARGS}


def _compiled(bundle: ModelBundle, settings: Settings, req: ChatCompletionRequest) -> chat_template.CompiledTemplate:
    own = req.chat_template or (req.chat_template_kwargs or {}).get("chat_template")
    if own is not None:
        if not settings.trust_request_chat_template:
            raise InvalidRequest(
                "Chat template is passed with request, but --trust-request-chat-template is not set. "
                "Refused request with untrusted chat template.",
                param="chat_template",
            )
        return _compile_cached(str(own), bundle)
    if bundle.compiled_template is None:
        raise InvalidRequest("This model has no chat template; pass --chat-template", param="messages")
    return bundle.compiled_template


_REQUEST_TEMPLATES: dict[str, chat_template.CompiledTemplate] = {}


def _compile_cached(source: str, bundle: ModelBundle) -> chat_template.CompiledTemplate:
    ct = _REQUEST_TEMPLATES.get(source)
    if ct is None:
        ct = chat_template.compile_template(source, dict(bundle.tokenizer.special_tokens_map))
        if len(_REQUEST_TEMPLATES) > 64:
            _REQUEST_TEMPLATES.clear()
        _REQUEST_TEMPLATES[source] = ct
    return ct


def render_chat_text(ct: chat_template.CompiledTemplate, conv: messages.Conversation, *,
                     tools: list[dict[str, Any]] | None, kwargs: dict[str, Any], add_generation_prompt: bool,
                     continue_final_message: bool, settings: Settings,
                     documents: list[dict[str, Any]] | None = None) -> str:
    """Render a normalised conversation: first the transformers-5 view, and when the template
    fails on that data shape (not on ``raise_exception``), the compat view (see
    :mod:`render_service.messages`).

    Raises:
        TemplateRenderError: both views fail, the template refused, or a budget was exceeded.
    """
    options = dict(tools=tools, documents=documents, add_generation_prompt=add_generation_prompt,
                   continue_final_message=continue_final_message, kwargs=kwargs,
                   max_seconds=settings.template_max_seconds, max_chars=settings.template_max_chars)
    try:
        return chat_template.render(ct, conv.primary, **options)
    except chat_template.TemplateDataError:
        if conv.compat == conv.primary:
            raise
        return chat_template.render(ct, conv.compat, **options)


def chat_prompt(bundle: ModelBundle, settings: Settings, req: ChatCompletionRequest,
                tools: list[dict[str, Any]] | None) -> ChatPrompt:
    """Template + tokenize the request's messages (or reuse ``kv_transfer_params.prompt_token_ids``).

    Raises:
        InvalidRequest / TemplateRenderError: see :func:`render_chat`.
    """
    kwargs = template_kwargs(req, settings)
    ct = _compiled(bundle, settings, req)
    fmt = settings.chat_template_content_format
    conv = messages.normalize(req.messages, ct.content_format if fmt == "auto" else fmt)
    forwarded = (req.kv_transfer_params or {}).get("prompt_token_ids")
    offsets = None
    if forwarded is not None:
        ids = _check_ids(bundle, forwarded, "kv_transfer_params.prompt_token_ids")
    else:
        add_gen = req.add_generation_prompt and not req.continue_final_message
        text = render_chat_text(ct, conv, tools=tools, kwargs=kwargs, add_generation_prompt=add_gen,
                                continue_final_message=req.continue_final_message, settings=settings,
                                documents=req.documents)
        if (req.model_extra or {}).get("return_token_offsets") is True:
            ids, offsets = tokenization.encode_prompt_with_offsets(bundle, text)
        else:
            ids = tokenization.encode_prompt(bundle, text)
    if not ids:
        raise InvalidRequest("No token_ids rendered", param="messages")
    return ChatPrompt(ids, kwargs, conv.tool_call_count, offsets)


# ---------------------------------------------------------------------------------------------
# parsers


def _parser(bundle: ModelBundle, settings: Settings) -> Any:
    if not settings.reasoning_parser:
        return None
    key = (bundle.root, bundle.vocab_size, settings.reasoning_parser, settings.tool_call_parser)
    if key not in _PARSERS:
        import parsers

        _PARSERS[key] = parsers.get_parser(settings.reasoning_parser, settings.tool_call_parser,
                                           vocab=bundle.tokenizer.get_vocab())
    return _PARSERS[key]


def reasoning_ended(bundle: ModelBundle, settings: Settings, parse_context: dict[str, Any],
                    token_ids: Sequence[int]) -> bool | None:
    """``None`` without a reasoning parser; ``True`` when reasoning is hidden
    (``include_reasoning=false``) or the prompt already closed it; else the parser's verdict on
    the prompt (PARSER_API.md ``start`` + ``reasoning_ended``)."""
    parser = _parser(bundle, settings)
    if parser is None:
        return None
    if not parse_context["include_reasoning"]:
        return True
    from parsers.types import ParseContext

    tools = parse_context["tools"]
    ctx = ParseContext(
        tools=tuple(tools) if tools else None,
        tool_choice=parse_context["tool_choice"],
        parallel_tool_calls=parse_context["parallel_tool_calls"],
        include_reasoning=parse_context["include_reasoning"],
        chat_template_kwargs=parse_context["chat_template_kwargs"],
        history_tool_call_cnt=parse_context["history_tool_call_cnt"],
        enable_auto_tool_choice=settings.enable_auto_tool_choice,
    )
    return parser.reasoning_ended(parser.start(ctx, token_ids))


# ---------------------------------------------------------------------------------------------
# entry points


def _generate_request(req: SamplingRequestFields, *, request_id: str, token_ids: list[int],
                      sampling_params: dict[str, Any], model: str, **extra: Any) -> dict[str, Any]:
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
    model = check_model(bundle, req.model)
    _check_common(req, body)
    if body.get("continue_final_message") and body.get("add_generation_prompt"):
        raise InvalidRequest("Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
                             param="continue_final_message")
    top_logprobs = req.top_logprobs if req.logprobs else None
    if req.top_logprobs is not None and req.top_logprobs != 0 and not req.logprobs:
        raise InvalidRequest("when using `top_logprobs`, `logprobs` must be set to true.", param="top_logprobs")
    _check_logprobs(top_logprobs, settings, "top_logprobs")
    tools = messages.validate_tools(req.tools)
    choice = tool_choice.resolve(req.tool_choice, tools, settings)
    template_tools = None if choice == "none" and settings.exclude_tools_when_tool_choice_none else tools
    prompt = chat_prompt(bundle, settings, req, template_tools)

    requested = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
    max_tokens = sampling.resolve_max_tokens(requested, len(prompt.token_ids), bundle)
    forced = tool_choice.forced_schema(choice, tools, req.parallel_tool_calls)
    if forced is not None and settings.tool_call_parser:
        req = req.model_copy(update={"structured_outputs": {"json": forced}, "response_format": None})
    parser_adjusts = bool(settings.reasoning_parser) or bool(settings.tool_call_parser and tools and choice != "none")
    if parser_adjusts:
        req = req.model_copy(update={"skip_special_tokens": False})
    if top_logprobs is None and req.logprobs:
        top_logprobs = 0
    if req.echo and req.prompt_logprobs is None and req.top_logprobs is not None:
        req = req.model_copy(update={"prompt_logprobs": req.top_logprobs})
    sp = sampling.build(req, max_tokens=max_tokens, logprobs=top_logprobs, bundle=bundle, settings=settings)

    ctk = {**prompt.template_kwargs, "add_generation_prompt": req.add_generation_prompt,
           "continue_final_message": req.continue_final_message}
    parse_context = {
        "tools": tools,
        "tool_choice": choice,
        "parallel_tool_calls": req.parallel_tool_calls if req.parallel_tool_calls is not None else True,
        "include_reasoning": req.include_reasoning,
        "chat_template_kwargs": ctk,
        "history_tool_call_cnt": prompt.history_tool_call_cnt,
    }
    ended = reasoning_ended(bundle, settings, parse_context, prompt.token_ids)
    return _generate_request(
        req,
        request_id=f"chatcmpl-{_base_id(body)}",
        token_ids=prompt.token_ids,
        sampling_params=sp,
        model=model,
        token_offsets=prompt.token_offsets,
        reasoning_ended=ended,
        reasoning_parser_kwargs={"chat_template_kwargs": ctk} if settings.reasoning_parser else None,
        parse_context=parse_context,
    )


def _completion_prompts(bundle: ModelBundle, req: CompletionRequest) -> list[list[int]]:
    prompt = req.prompt
    if isinstance(prompt, str):
        return [tokenization.encode_text(bundle, prompt, add_special_tokens=req.add_special_tokens)]
    if not prompt:
        raise InvalidRequest("prompt must not be empty", param="prompt")
    if all(isinstance(p, int) for p in prompt):
        return [_check_ids(bundle, prompt, "prompt")]
    out = []
    for i, p in enumerate(prompt):
        if isinstance(p, str):
            out.append(tokenization.encode_text(bundle, p, add_special_tokens=req.add_special_tokens))
        else:
            out.append(_check_ids(bundle, p, f"prompt.{i}"))
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
    model = check_model(bundle, req.model)
    _check_common(req, body)
    if req.suffix is not None:
        raise InvalidRequest("suffix is not supported for this model", param="suffix")
    _check_logprobs(req.logprobs, settings, "logprobs")
    prompts = _completion_prompts(bundle, req)
    explicit = req.max_tokens if "max_tokens" in body else None
    base = f"cmpl-{_base_id(body)}"
    out = []
    for i, ids in enumerate(prompts):
        if not ids:
            raise InvalidRequest("No token_ids rendered: the prompt is empty", param="prompt")
        if explicit is None:
            sampling.check_prompt_length(len(ids), bundle.max_model_len)
            room = bundle.max_model_len - len(ids)
            max_tokens = min(room, req.max_tokens) if req.max_tokens is not None else \
                sampling.resolve_max_tokens(None, len(ids), bundle)
        else:
            max_tokens = sampling.resolve_max_tokens(explicit, len(ids), bundle)
        prompt_logprobs_req = req
        if req.echo and req.prompt_logprobs is None and req.logprobs is not None:
            prompt_logprobs_req = req.model_copy(update={"prompt_logprobs": req.logprobs})
        sp = sampling.build(prompt_logprobs_req, max_tokens=max_tokens, logprobs=req.logprobs, bundle=bundle,
                            settings=settings)
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
        ids = tokenization.encode_text(bundle, body["prompt"], add_special_tokens=body.get("add_special_tokens", True)
                                       is not False)
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
    ids = _check_ids(bundle, body["tokens"], "tokens")
    return {"prompt": tokenization.decode(bundle, ids)}
