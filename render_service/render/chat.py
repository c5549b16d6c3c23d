"""Chat render: an OpenAI chat request → one ``GenerateRequest`` (vLLM 0.33
``/v1/chat/completions/render``; upstream-render-api.md §3, §5).

Errors: :class:`~render_service.errors.InvalidRequest` and subclasses (400), pydantic
``ValidationError`` (400, mapped by the app), :class:`~render_service.errors.UnknownModel` (404).
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest, RequestErrors, not_an_object
from ..models import ModelBundle, check_model
from ..protocol.chat import ChatCompletionRequest, history_tool_calls
from ..protocol.common import asks_structured_output
from ..settings import Settings
from . import adjust, harmony, messages, sampling, tool_choice
from .chat_prompt import ChatPrompt, chat_prompt, reasoning_ended, tool_output_is_guided_json
from .request import base_id, check_common, check_logprobs, generate_request, pre_check, verify_sampling

CONTINUE_WITH_GENERATION_PROMPT = (
    "continue_final_message and add_generation_prompt are not compatible. Use continue_final_message "
    "when you want the model to continue the final message, and add_generation_prompt when you want "
    "to add a header that will prompt it to start a new assistant message instead."
)


def _check_chat(req: ChatCompletionRequest, body: dict[str, Any], settings: Settings) -> int | None:
    """Request-level checks of a chat request; returns the engine ``logprobs`` (top-k) value."""
    check_common(req, body)
    if body.get("continue_final_message") and body.get("add_generation_prompt"):
        raise InvalidRequest(
            "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
            param="continue_final_message",
        )
    if req.top_logprobs is not None and req.top_logprobs != 0 and not req.logprobs:
        raise InvalidRequest(
            "when using `top_logprobs`, `logprobs` must be set to true.", param="top_logprobs"
        )
    if req.logprob_token_ids and not req.logprobs:
        raise InvalidRequest(
            "when using `logprob_token_ids`, `logprobs` must be set to true.", param="logprob_token_ids"
        )
    top_logprobs = (req.top_logprobs if req.top_logprobs is not None else 0) if req.logprobs else None
    if req.logprob_token_ids:  # vLLM 0.33: the listed ids' logprobs instead of a top-k
        top_logprobs = None
    check_logprobs(top_logprobs, settings, "top_logprobs")
    check_logprobs(req.prompt_logprobs, settings, "prompt_logprobs")
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
    has_output = asks_structured_output(req.response_format, req.structured_outputs)
    output = None
    if has_output and tools:  # the output constraint as xgrammar's format (auto + strict tools)
        output = adjust.output_format(
            _harmony_output(req) if harmony.uses_harmony(bundle.config) else sampling.structured_outputs(req))
    handled, constraint = adjust.tool_structured_outputs(
        settings.tool_call_parser, tools, choice, req.parallel_tool_calls, has_output, output
    )
    forced = tool_choice.forced_schema(choice, tools, req.parallel_tool_calls)
    if constraint is None and has_output and harmony.uses_harmony(bundle.config):
        constraint = _harmony_output(req)
    elif constraint is None and has_output and handled and tools and choice != "none":
        # vLLM 0.33 re-reads the output constraint while deciding the tool-call tag and sends
        # it back as a whole ``StructuredOutputsParams`` (measured by the differential harness)
        so = sampling.structured_outputs(req)
        if so is not None:
            constraint = {**adjust.empty_structured_outputs(), **so}
    if handled or constraint is not None:
        if constraint is not None:
            update.update(structured_outputs=constraint, response_format=None)
    elif forced is not None and tool_output_is_guided_json(bundle, settings):
        update.update(structured_outputs={"json": forced}, response_format=None)
    if adjust.keeps_special_tokens(settings, tools, choice, harmony.uses_harmony(bundle.config)):
        update["skip_special_tokens"] = False
    if req.echo and req.prompt_logprobs is None and req.top_logprobs is not None:
        update["prompt_logprobs"] = req.top_logprobs
    return req.model_copy(update=update) if update else req


def _harmony_output(req: ChatCompletionRequest) -> dict[str, Any] | None:
    """gpt-oss: a JSON ``response_format`` / ``structured_outputs.json`` becomes vLLM 0.33's
    final-channel structural tag (:func:`adjust.harmony_output_format`), and so does a regex or
    a choice (render golden ``structured_outputs_regex``); other constraints (grammar,
    structural tag) are sent as they are."""
    so = sampling.structured_outputs(req) or {}
    if so.get("json_object"):
        return adjust.harmony_output_format({"type": "object"})
    schema = so.get("json")
    if isinstance(schema, str):
        import json

        schema = json.loads(schema)
    if schema is not None:
        return adjust.harmony_output_format(schema)
    text = adjust.harmony_text_format(so)
    return adjust.harmony_output_format(None, text) if text is not None else None


def _parse_context(
    req: ChatCompletionRequest,
    tools: list[dict[str, Any]] | None,
    choice: str | dict[str, Any],
    prompt: ChatPrompt,
    effective_kwargs: dict[str, Any],
    harmony_model: bool,
) -> dict[str, Any]:
    """``parse_context`` (upstream shape; template kwargs include the generation-prompt flags)."""
    return {
        "tools": tools,
        "tool_choice": choice,
        "parallel_tool_calls": req.parallel_tool_calls if req.parallel_tool_calls is not None else True,
        "include_reasoning": req.include_reasoning,
        "chat_template_kwargs": {} if harmony_model else effective_kwargs,  # as vLLM
        "history_tool_call_cnt": prompt.history_tool_call_cnt,
    }


def render_chat(
    bundle: ModelBundle, settings: Settings, body: Any, responses_items: bool = False
) -> dict[str, Any]:
    """One ``GenerateRequest`` dict for an OpenAI chat request (upstream-render-api.md §3, §5).
    ``responses_items``: ``body`` is the chat form of a Responses request, one message per input
    item (the gpt-oss harmony render then keeps an empty assistant message, as vLLM 0.33's
    Responses render; see :func:`render_service.render.chat_prompt.chat_prompt`).

    Raises:
        InvalidRequest: beam search, ``stream_options`` without ``stream``, tool-choice problems,
            untrusted request template, bad messages/tools, template failure or budget, prompt
            too long (``ContextLengthExceeded``), logprobs over ``--max-logprobs``.
        UnknownModel: ``model`` is not served.
    """
    if not isinstance(body, dict):
        raise not_an_object(body)
    pre_check(body, "chat")
    mm_payload = _mm_payload(body)
    req = ChatCompletionRequest.model_validate(body, from_attributes=True)  # as FastAPI reads bodies
    history_tool_calls(req.messages)  # vLLM 0.33 reads history calls while it validates the request
    check_model(bundle, req.model)
    verify_sampling(req, req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens)
    top_logprobs = _check_chat(req, body, settings)
    if req.continue_final_message and body.get("add_generation_prompt") is None \
            and not harmony.uses_harmony(bundle.config):
        # vLLM 0.33: ``add_generation_prompt`` defaults to true, and the template renderer
        # (transformers ``apply_chat_template``) refuses the pair with this message
        raise InvalidRequest(CONTINUE_WITH_GENERATION_PROMPT)  # the template's error: no param
    tools = messages.validate_tools(req.tools)
    choice = tool_choice.resolve(req.tool_choice, tools, settings)
    template_tools = None if choice == "none" and settings.exclude_tools_when_tool_choice_none else tools
    prompt = chat_prompt(bundle, settings, req, template_tools, responses_items)

    requested = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
    max_tokens = sampling.resolve_max_tokens(requested, len(prompt.token_ids), bundle)
    req = _adjust_chat(bundle, settings, req, choice, tools)
    sp = sampling.build(req, max_tokens=max_tokens, logprobs=top_logprobs, bundle=bundle, settings=settings)
    ctk = adjust.effective_template_kwargs(req, settings)
    parse_context = _parse_context(req, tools, choice, prompt, ctk, harmony.uses_harmony(bundle.config))
    return generate_request(
        req,
        request_id=f"chatcmpl-{base_id(body)}",
        token_ids=prompt.token_ids,
        sampling_params=sp,
        model=req.model,  # copied from the request, as upstream (null when absent)
        token_offsets=prompt.token_offsets,
        reasoning_ended=reasoning_ended(
            bundle, settings, parse_context, prompt.token_ids,
            asks_structured_output(req.response_format, req.structured_outputs),
        ),
        reasoning_parser_kwargs={"chat_template_kwargs": ctk} if settings.reasoning_parser else None,
        parse_context=parse_context,
        features=prompt.features(mm_payload),
    )


MM_PAYLOAD_FIELDS = ("mm_payload", "return_mm_kwargs")
"""The request fields that choose the ``features`` payload; the Messages and Responses renders
copy them onto the chat request they render (vLLM 0.33 sets ``chat_req.mm_payload`` so too)."""


def _mm_payload(body: dict[str, Any]) -> str:
    """``mm_payload`` (``"tensors"`` default, ``"none"``); ``return_mm_kwargs: false`` is its
    deprecated alias (vLLM 0.33)."""
    if "mm_payload" not in body:
        return "none" if body.get("return_mm_kwargs") is False else "tensors"
    payload = body["mm_payload"]
    if payload not in ("tensors", "none"):  # vLLM 0.33: its ``Literal`` field's validation error
        raise RequestErrors([{"type": "literal_error", "loc": ("body", "mm_payload"),
                              "msg": "Input should be 'tensors' or 'none'", "input": payload,
                              "ctx": {"expected": "'tensors' or 'none'"}}])
    return str(payload)
