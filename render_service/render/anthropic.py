"""Anthropic Messages render: an Anthropic ``/v1/messages`` request → an OpenAI chat request →
the chat render (vLLM 0.33 ``/v1/messages/render``: ``AnthropicServingMessages.
to_chat_completion_request``, then ``render_chat_request``), so the token ids are the chat
render's for the converted conversation.

Conversion (as vLLM 0.33):

* ``system`` (string, or text blocks concatenated with no separator; blocks starting with
  ``x-anthropic-billing-header`` dropped) → one leading ``system`` message. Inline ``system``
  messages are merged into it when the template refuses a non-leading system message (probed
  once per template with ``[system, user, system, user]``), else kept in place.
* Blocks: ``text`` → content parts (one text part becomes a plain string); ``thinking`` →
  the assistant's ``reasoning``; ``redacted_thinking`` dropped; ``tool_use`` → a tool call with
  ``arguments`` = ``json.dumps(input)``; a user's ``tool_result`` → a ``tool`` message (string
  content, or its text blocks joined with ``"\\n"``; ``is_error`` is not shown to the template),
  emitted before the rest of that user message; an assistant's ``tool_result`` → text
  ``"Tool result: ..."``.
* ``image`` blocks → ``image_url`` parts (``base64`` sources as ``data:`` URLs, ``url`` sources
  as given; vLLM ``_convert_image_source_to_url``), rendered by the multimodal render for vision
  models (a 400 from it for text-only ones); images inside a user's ``tool_result`` follow the
  ``tool`` message as a user message of their own, as vLLM.
* ``tools`` (``input_schema`` → ``parameters``), ``tool_choice`` auto/any/tool/none →
  ``auto``/``required``/named/``none`` (tools without ``tool_choice`` → ``auto``),
  ``disable_parallel_tool_use`` → ``parallel_tool_calls: false``.
* ``thinking``: ``enabled`` → ``thinking_token_budget = budget_tokens``; ``disabled`` →
  ``reasoning_effort`` = ``--anthropic-disabled-thinking-effort`` (``auto``: ``none`` unless the
  template renders ``none`` like a real effort or refuses it, then ``low``); ``adaptive`` → nothing.
* ``output_config.format`` → ``response_format`` json_schema; ``output_config.effort`` →
  ``reasoning_effort``.
* ``max_tokens`` → ``max_tokens``; ``stop_sequences`` → ``stop``; ``temperature``, ``top_p``,
  ``top_k``, ``cache_salt``, ``kv_transfer_params``, ``vllm_xargs``, ``chat_template_kwargs``
  carried; ``metadata`` accepted and ignored.

Errors: pydantic ``ValidationError`` (400), :class:`~render_service.errors.InvalidRequest` (400),
:class:`~render_service.errors.UnknownModel` (404), and every chat-render error.
"""

from __future__ import annotations

import json
from typing import Any

import jinja2
import jinja2.ext
import jinja2.sandbox

from ..api_tools import anthropic_tool_fields
from ..errors import InvalidRequest, RenderServiceError, not_an_object
from ..models import ModelBundle
from ..protocol.anthropic import AnthropicContentBlock, AnthropicMessagesRequest
from ..settings import Settings
from .chat import MM_PAYLOAD_FIELDS, render_chat
from .request import Origins, in_request_terms

BILLING_HEADER = "x-anthropic-billing-header"
EFFORTS = ("low", "medium", "high", "xhigh", "max")
def _image_part(block: AnthropicContentBlock | dict[str, Any], where: str) -> dict[str, Any]:
    """The chat ``image_url`` part of an Anthropic image block: a ``url`` source as given, any
    other (``base64``) as a ``data:`` URL with its ``media_type`` (default ``image/jpeg``), as vLLM
    0.33 ``_convert_image_source_to_url``.

    Raises:
        InvalidRequest: the block has no ``source`` object.
    """
    source = block.get("source") if isinstance(block, dict) else block.source
    if not isinstance(source, dict):
        raise InvalidRequest("an image block needs a `source` object", param=f"{where}.source")
    if source.get("type") == "url":
        url = str(source.get("url", ""))
    else:
        url = f"data:{source.get('media_type', 'image/jpeg')};base64,{source.get('data', '')}"
    return {"type": "image_url", "image_url": {"url": url}}


# --- template probes (once per bundle and settings, kept by the bundle: models.BundleMemo) ------


def merge_inline_system(bundle: ModelBundle) -> bool:
    """Whether the template refuses ``[system, user, system, user]`` (vLLM 0.33
    ``_detect_merge_inline_system``: plain sandboxed Jinja, a template error means merge; no
    template means merge)."""
    return bundle.memo.get("merge_inline_system", None, lambda: _probe_merge(bundle))


def _probe_merge(bundle: ModelBundle) -> bool:
    source = bundle.chat_template
    merge = True
    if source:
        env = jinja2.sandbox.ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
        )
        try:
            env.from_string(source).render(
                messages=[{"role": r, "content": "t"} for r in ("system", "user", "system", "user")],
                add_generation_prompt=False,
            )
            merge = False
        except jinja2.TemplateError:
            merge = True
        except Exception:  # noqa: BLE001 - a template failing any other way is treated the same
            merge = True
    return merge


def disabled_thinking_effort(bundle: ModelBundle, settings: Settings) -> str:
    """``reasoning_effort`` for ``thinking: {type: "disabled"}`` (vLLM 0.33
    ``DisabledThinkingEffortResolver``): the flag's value, or for ``auto`` ``"low"`` when the
    template refuses ``none`` or renders it like one of the real efforts, else ``"none"``."""
    if settings.anthropic_disabled_thinking_effort != "auto":
        return settings.anthropic_disabled_thinking_effort
    return bundle.memo.get("disabled_thinking_effort", settings, lambda: _probe_effort(bundle, settings))


def _probe_effort(bundle: ModelBundle, settings: Settings) -> str:
    def probe(effort: str) -> list[int] | None:
        body = {"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": effort}
        try:
            return list(render_chat(bundle, settings, body)["token_ids"])
        except RenderServiceError:
            return None

    none_ids = probe("none")
    return "low" if none_ids is None or any(probe(e) == none_ids for e in EFFORTS) else "none"


# --- conversion ---------------------------------------------------------------------------------


def _system_text(content: str | list[AnthropicContentBlock]) -> str | None:
    if isinstance(content, str):
        return None if content.startswith(BILLING_HEADER) else content
    parts = [b.text for b in content if b.type == "text" and b.text and not b.text.startswith(BILLING_HEADER)]
    return "".join(parts) if parts else None


def _tool_result_content(
    block: AnthropicContentBlock, where: str
) -> tuple[str, list[dict[str, Any]], list[str]]:
    """A ``tool_result``'s text (its text items joined by newlines), its images as chat parts and
    where each image is in the request."""
    content = block.content
    if isinstance(content, str):
        return content, [], []
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    at: list[str] = []
    for j, item in enumerate(content or ()):
        if not isinstance(item, dict):
            continue
        if item.get("type") == "text":
            texts.append(str(item.get("text", "")))
        elif item.get("type") == "image":
            at.append(f"{where}.content.{j}")
            images.append(_image_part(item, at[-1]))
    return "\n".join(texts), images, at


def _convert_blocks(
    blocks: list[AnthropicContentBlock], role: str, out: list[dict[str, Any]], where: str,
    origins: Origins,
) -> dict[str, Any] | None:
    """One Anthropic message's blocks → its chat message (``None``: nothing left for a user);
    ``tool`` messages for a user's tool results are appended to ``out`` first. ``origins`` gets,
    for each image part, its chat path → the block's path and type (see :data:`Origins`)."""
    message: dict[str, Any] = {"role": role}
    parts: list[dict[str, Any]] = []
    images: dict[int, str] = {}  # part index -> the image block's path
    calls: list[dict[str, Any]] = []
    reasoning: list[str] = []
    for j, block in enumerate(blocks):
        at = f"{where}.content.{j}"
        if block.type == "text" and block.text:
            parts.append({"type": "text", "text": block.text})
        elif block.type == "image":
            images[len(parts)] = at
            parts.append(_image_part(block, at))
        elif block.type == "thinking" and block.thinking is not None:
            reasoning.append(block.thinking)
        elif block.type == "tool_use":
            calls.append(
                {
                    "id": block.id or f"call_{j}",  # vLLM: call_<unix time>
                    "type": "function",
                    "function": {"name": block.name or "", "arguments": json.dumps(block.input or {})},
                }
            )
        elif block.type == "tool_result":
            text, result_images, result_at = _tool_result_content(block, at)
            if role == "user":
                out.append({"role": "tool", "tool_call_id": block.tool_use_id or "", "content": text})
                if result_images:
                    for k, path in enumerate(result_at):
                        origins[f"messages.{len(out)}.content.{k}"] = (path, "image")
                    out.append({"role": "user", "content": result_images})
            else:
                shown = str(block.content) if block.content else ""
                parts.append({"type": "text", "text": f"Tool result: {shown}"})
        elif block.type in ("tool_addition", "tool_removal"):
            raise InvalidRequest(f"{block.type} blocks are not supported", param=f"{at}.type")
        # redacted_thinking, tool_reference and empty text blocks add nothing (as vLLM).
    if reasoning:
        message["reasoning"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    if parts:
        message["content"] = parts[0]["text"] if len(parts) == 1 and parts[0]["type"] == "text" else parts
    if role == "user" and "content" not in message:
        return None
    for k, path in images.items():  # the message goes to index len(out)
        origins[f"messages.{len(out)}.content.{k}"] = (path, "image")
    return message


def to_chat_request(
    req: AnthropicMessagesRequest, *, merge_system: bool, disabled_effort: str,
    origins: Origins | None = None,
) -> dict[str, Any]:
    """The OpenAI chat request body vLLM 0.33 builds from an Anthropic request (see the module
    docstring). Pure: the template probes are passed in; ``origins``, when given, is filled with
    where each chat message and image part came from (:func:`.request.in_request_terms`)."""
    origins = {} if origins is None else origins
    messages: list[dict[str, Any]] = []
    system: list[str] = []
    if req.system:
        text = req.system if isinstance(req.system, str) else _system_text(req.system)
        if text:
            system.append(text)
    if merge_system:
        system.extend(t for m in req.messages if m.role == "system" and (t := _system_text(m.content)))
    if system:
        messages.append({"role": "system", "content": "".join(system)})
    for i, msg in enumerate(req.messages):
        if msg.role == "system":
            text = None if merge_system else _system_text(msg.content)
            if text:
                messages.append({"role": "system", "content": text})
            continue
        first = len(messages)
        if isinstance(msg.content, str):
            messages.append({"role": msg.role, "content": msg.content})
        else:
            converted = _convert_blocks(msg.content, msg.role, messages, f"messages.{i}", origins)
            if converted is not None:
                messages.append(converted)
        for k in range(first, len(messages)):
            origins.setdefault(f"messages.{k}", (f"messages.{i}", None))

    chat: dict[str, Any] = {
        "model": req.model,
        "messages": messages,
        "max_tokens": req.max_tokens,
        "max_completion_tokens": req.max_tokens,
        "stop": req.stop_sequences,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "top_k": req.top_k,
        "cache_salt": req.cache_salt,
        "kv_transfer_params": req.kv_transfer_params,
        "ec_transfer_params": req.ec_transfer_params,
        "vllm_xargs": req.vllm_xargs,
        "chat_template_kwargs": req.chat_template_kwargs,
        "request_id": req.request_id,
    }
    if req.stream:
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
    out = req.output_config
    if out is not None and out.format is not None and out.format.json_schema:
        chat["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": out.format.type, "schema": out.format.json_schema},
        }
    if out is not None and out.effort is not None:
        chat["reasoning_effort"] = out.effort
    if req.thinking is not None:
        if req.thinking.type == "disabled":
            chat["reasoning_effort"] = disabled_effort
        elif req.thinking.type == "enabled":
            chat["thinking_token_budget"] = req.thinking.budget_tokens
    chat.update(anthropic_tool_fields(req))
    return {k: v for k, v in chat.items() if v is not None}


def render_messages(bundle: ModelBundle, settings: Settings, body: Any) -> dict[str, Any]:
    """One ``GenerateRequest`` dict for an Anthropic Messages request (vLLM 0.33
    ``/v1/messages/render``; the id is ``chatcmpl-…`` as upstream).

    Raises:
        InvalidRequest: not an object, image blocks, and every chat
            render error; pydantic ``ValidationError`` for a malformed body.
        UnknownModel: ``model`` is not served.
    """
    if not isinstance(body, dict):
        raise not_an_object(body)
    req = AnthropicMessagesRequest.model_validate(body, from_attributes=True)
    effort = (
        disabled_thinking_effort(bundle, settings)
        if req.thinking is not None and req.thinking.type == "disabled"
        else "none"
    )
    origins: Origins = {}
    chat = to_chat_request(req, merge_system=merge_inline_system(bundle), disabled_effort=effort,
                           origins=origins)
    chat.update((k, body[k]) for k in MM_PAYLOAD_FIELDS if k in body)
    with in_request_terms(origins):
        return render_chat(bundle, settings, chat)
