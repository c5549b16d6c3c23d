"""Chat prompt: normalised messages → chat template → token ids, plus the reasoning-parser verdict.

Used by ``render.render_chat`` and ``render.tokenize``. Pure functions of (bundle, settings, request).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import chat_template
from ..errors import InvalidRequest, vllm_error
from ..models import ModelBundle, token_id_limit
from ..parsing import parser_for
from ..protocol.chat import ChatCompletionRequest
from ..settings import Settings
from ..tokens import tokenization
from . import harmony, messages, multimodal

#: Template variables a request's ``chat_template_kwargs`` may not replace.
RESERVED_TEMPLATE_KWARGS = frozenset(
    {
        "messages",
        "tools",
        "documents",
        "add_generation_prompt",
        "continue_final_message",
        "chat_template",
        "tokenize",
        "conversation",
    }
)

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
    media: multimodal.MediaResult | None = None
    mm_placeholders: dict[str, list[dict[str, int]]] | None = None

    def features(self, payload: str = "tensors") -> dict[str, Any] | None:
        """``features`` of the render output (``None`` for a text-only prompt)."""
        if self.media is None or self.mm_placeholders is None:
            return None
        return multimodal.features(self.media, self.mm_placeholders, payload)


def check_ids(bundle: ModelBundle, ids: Any, param: str) -> list[int]:
    """``ids`` as a list after checking each is an int in ``[0, token_id_limit)``
    (:func:`render_service.models.token_id_limit`, vLLM 0.33's bound).

    Raises:
        InvalidRequest: not a list, a value that is no integer (pydantic's wording), or an id
            outside the vocabulary, worded as vLLM 0.33's ``validate_token_ids``: the lowest id if
            one is negative, else the highest (``Token id N is out of vocabulary
            (parameter=P)``; JSON integers beyond 64 bits arrive as floats and are shown as sent).
    """
    if not isinstance(ids, list):
        raise InvalidRequest("token ids must be a list of integers", param=param)
    limit = token_id_limit(bundle)
    low = high = None
    for tid in ids:
        bad = isinstance(tid, float) and tid.is_integer()  # an integer past 64 bits, as parsed
        if bad:
            tid = int(tid)
        elif not isinstance(tid, int) or isinstance(tid, bool):
            raise InvalidRequest(f"Input should be a valid integer, got {tid!r}", param=param)
        if bad or not 0 <= tid < limit:
            low = tid if low is None else min(low, tid)
            high = tid if high is None else max(high, tid)
    if low is not None:
        raise vllm_error(f"Token id {low if low < 0 else high} is out of vocabulary", param)
    return list(ids)


# ---------------------------------------------------------------------------------------------
# chat prompt


def template_kwargs(req: ChatCompletionRequest, settings: Settings) -> dict[str, Any]:
    """``--default-chat-template-kwargs`` under the request's ``chat_template_kwargs`` (request wins),
    plus ``reasoning_effort`` when set; reserved template variables are dropped."""
    merged = {**settings.default_chat_template_kwargs, **(req.chat_template_kwargs or {})}
    if req.reasoning_effort is not None:
        merged["reasoning_effort"] = req.reasoning_effort
        # vLLM 0.33 ``build_chat_params``: an effort also switches ``enable_thinking`` unless the
        # request's own kwargs set it (``none`` turns thinking off).
        if "enable_thinking" not in (req.chat_template_kwargs or {}):
            merged["enable_thinking"] = req.reasoning_effort != "none"
    return {k: v for k, v in merged.items() if k not in RESERVED_TEMPLATE_KWARGS}


def _compiled(
    bundle: ModelBundle, settings: Settings, req: ChatCompletionRequest
) -> chat_template.CompiledTemplate:
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


def render_chat_text(
    ct: chat_template.CompiledTemplate,
    conv: messages.Conversation,
    *,
    tools: list[dict[str, Any]] | None,
    kwargs: dict[str, Any],
    add_generation_prompt: bool,
    continue_final_message: bool,
    settings: Settings,
    documents: list[dict[str, Any]] | None = None,
) -> str:
    """Render a normalised conversation: the transformers-5 view first, and while the template
    fails on the data's shape (not on ``raise_exception``), the next view (see
    :mod:`render_service.render.messages`).

    Raises:
        TemplateRenderError: every view fails (the first failure is reported), the template
            refused, or a budget was exceeded.
    """
    first: chat_template.TemplateDataError | None = None
    for view in conv.views:
        try:
            return chat_template.render(
                ct,
                view,
                tools=tools,
                documents=documents,
                add_generation_prompt=add_generation_prompt,
                continue_final_message=continue_final_message,
                kwargs=kwargs,
                max_seconds=settings.template_max_seconds,
                max_chars=settings.template_max_chars,
            )
        except chat_template.TemplateDataError as exc:
            first = first or exc
    assert first is not None
    raise first


def conversation(ct: chat_template.CompiledTemplate, settings: Settings, raw: Any,
                 media: multimodal.MediaCollector | None = None) -> messages.Conversation:
    """The request's messages normalised for template ``ct`` (content format per
    ``--chat-template-content-format``, developer role as the template supports it)."""
    fmt = settings.chat_template_content_format
    return messages.normalize(raw, ct.content_format if fmt == "auto" else fmt, ct.supports_developer, media)


def chat_prompt(
    bundle: ModelBundle,
    settings: Settings,
    req: ChatCompletionRequest,
    tools: list[dict[str, Any]] | None,
    responses_items: bool = False,
) -> ChatPrompt:
    """Template + tokenize the request's messages (or reuse ``kv_transfer_params.prompt_token_ids``).
    ``responses_items``: the messages come one per Responses input item (gpt-oss only: see
    :func:`render_service.render.harmony.render_ids` ``keep_empty_final``).

    Raises:
        InvalidRequest / TemplateRenderError: see :func:`render_chat`.
    """
    kwargs = template_kwargs(req, settings)
    ct: chat_template.CompiledTemplate | None = None
    media = multimodal.collector(bundle, settings)
    if harmony.uses_harmony(bundle.config):
        conv = messages.Conversation([], harmony.tool_call_count(req.messages), [])
    else:
        ct = _compiled(bundle, settings, req)
        conv = conversation(ct, settings, req.messages, media)
    forwarded = (req.kv_transfer_params or {}).get("prompt_token_ids")
    planned = None
    # the media parts this render processes (none when the prompt's ids are forwarded)
    parts = media.parts if media is not None and forwarded is None else []
    if multimodal.is_loading_only():
        # on an I/O thread (the render lane): load the media, then stop; a worker does the rest
        loaded = multimodal.plan_parts(bundle, settings, parts, req.model_extra or {}) if parts else None
        raise multimodal.NeedsWorker("media loaded: the render goes on on a worker", loaded)
    if parts and multimodal.is_cached_only():
        # on the event loop: make sure before the template that every item is cached (NeedsWorker)
        planned = multimodal.plan_parts(bundle, settings, parts, req.model_extra or {})
    offsets = None
    if forwarded is not None:
        ids = check_ids(bundle, forwarded, "kv_transfer_params.prompt_token_ids")
    elif harmony.uses_harmony(bundle.config):  # gpt-oss: harmony, not the Jinja template (as vLLM)
        effort = settings.reasoning_effort_map.get(req.reasoning_effort or "", req.reasoning_effort)
        ids = harmony.render_ids(
            req.messages, tools, reasoning_effort=effort, start_date=settings.system_start_date,
            keep_empty_final=responses_items,
        )
    else:
        assert ct is not None
        add_gen = req.add_generation_prompt and not req.continue_final_message
        own = req.chat_template_kwargs or {}  # vLLM hands `tools` / `documents` given here to the template
        text = render_chat_text(
            ct,
            conv,
            tools=messages.template_tools(tools if tools is not None else own.get("tools")),
            kwargs=kwargs,
            add_generation_prompt=add_gen,
            continue_final_message=req.continue_final_message,
            settings=settings,
            documents=req.documents if req.documents is not None else own.get("documents"),
        )
        extra = req.model_extra or {}
        # add_special_tokens: the tokenizer's BOS on top of the template's, as vLLM
        special = req.add_special_tokens
        if extra.get("return_token_offsets") is True:
            ids, offsets = tokenization.encode_prompt_with_offsets(bundle, text, add_special_tokens=special)
        elif special:
            ids = tokenization.encode_text(bundle, text, add_special_tokens=True)
        else:
            ids = tokenization.encode_prompt(bundle, text)
    if not ids:
        raise InvalidRequest("No token_ids rendered", param="messages")
    result, places = None, None
    if parts:
        result = multimodal.process_parts(bundle, settings, parts, req.model_extra or {}, planned)
        ids, places = multimodal.expand(ids, result)
        offsets = None
    if req.truncate_prompt_tokens is not None:
        ids = tokenization.truncate(
            ids, req.truncate_prompt_tokens, req.truncation_side, bundle.max_model_len
        )
        offsets = None
        if not ids:  # ``truncate_prompt_tokens: 0`` (vLLM 0.33: the same 400)
            raise InvalidRequest("No token_ids rendered")
    return ChatPrompt(ids, kwargs, conv.tool_call_count, offsets, result, places)


# ---------------------------------------------------------------------------------------------
# parsers


def tool_output_is_guided_json(bundle: ModelBundle, settings: Settings) -> bool:
    """Whether ``required``/named tool choices are parsed as vLLM's guided JSON (so render must
    constrain the output with the JSON schema) rather than in the tool format's native syntax."""
    parser = parser_for(bundle, settings)
    tool = getattr(parser, "tool", None)
    return tool is not None and bool(getattr(tool, "guided_json", True))


def reasoning_ended(
    bundle: ModelBundle,
    settings: Settings,
    parse_context: dict[str, Any],
    token_ids: Sequence[int],
    structured_output: bool = False,
) -> bool | None:
    """``True`` when reasoning is hidden (``include_reasoning=false``, with or without a
    reasoning parser, as vLLM 0.33 ``resolve_reasoning_ended``); ``None`` without a reasoning
    parser; ``True`` when the prompt already closed it; else the parser's verdict on the prompt
    (``parsers/README.md``: ``start`` + ``reasoning_ended``)."""
    if not parse_context["include_reasoning"]:
        return True
    parser = parser_for(bundle, settings)
    if parser is None or not settings.reasoning_parser:
        return None
    from parsers.types import ParseContext, UnsupportedRequest

    tools = parse_context["tools"]
    ctx = ParseContext(
        tools=tuple(tools) if tools else None,
        tool_choice=parse_context["tool_choice"],
        parallel_tool_calls=parse_context["parallel_tool_calls"],
        include_reasoning=parse_context["include_reasoning"],
        chat_template_kwargs=parse_context["chat_template_kwargs"],
        history_tool_call_cnt=parse_context["history_tool_call_cnt"],
        enable_auto_tool_choice=settings.enable_auto_tool_choice,
        structured_output=structured_output,
    )
    try:
        return parser.reasoning_ended(parser.start(ctx, token_ids))
    except UnsupportedRequest as exc:  # vLLM 0.33 builds the request's parser at render: 400
        raise InvalidRequest(str(exc)) from exc
