"""OpenAI Responses render (stateless): a ``/v1/responses`` request → an OpenAI chat request →
the chat render (vLLM 0.33 ``/v1/responses/render``: ``construct_input_messages`` and
``construct_tool_dicts`` of ``entrypoints/openai/responses/utils.py``, then the chat template).

Conversion (as vLLM 0.33):

* ``instructions`` → a leading ``system`` message; ``input`` string → one ``user`` message.
* Items: a ``message`` with a ``role`` passes through as a chat message (its ``input_text``
  parts are text parts, its ``input_image`` parts images of the chat multimodal render, as
  ``image_url`` parts are), except an ``assistant`` message, which keeps only its **first** content
  part's text; ``function_call`` → a tool call (``call_id``, ``name``, ``arguments``) merged into
  the preceding assistant message; ``function_call_output`` → a ``tool`` message; ``reasoning``
  → the assistant's ``reasoning`` (its first ``content`` text, else its first ``summary`` text;
  ``encrypted_content`` → 400), merged into the preceding assistant message when it has none.
* A last ``message``/``reasoning`` item with ``status`` ``in_progress``/``incomplete`` is
  continued (``continue_final_message``).
* ``tools``: ``function`` tools → chat tools; any other type → 400. ``tool_choice`` string as is,
  ``{"type": "function", "name"}`` → named.
* ``reasoning.effort`` → ``reasoning_effort``; ``text.format`` ``json_schema`` →
  ``structured_outputs.json``, ``json_object`` → ``structured_outputs.json_object``;
  ``max_output_tokens`` → ``max_tokens``; ``truncation: auto`` → left-truncate the prompt;
  ``include: ["message.output_text.logprobs"]`` → ``top_logprobs``.
* ``previous_response_id`` → 400 (``invalid_request_error``, as upstream: the endpoint is
  stateless).

The answer is the chat render's ``GenerateRequest`` with ``request_id`` = the request's
``request_id`` or ``resp_<uuid>``, and no ``parse_context`` / ``reasoning_ended`` (upstream
leaves them out for Responses).
"""

from __future__ import annotations

import uuid
from typing import Any

from ..api_tools import responses_tool_choice, responses_tools
from ..errors import InvalidRequest, not_an_object
from ..models import ModelBundle
from ..protocol.responses import ResponseFormatTextJSONSchemaConfig, ResponsesRequest
from ..settings import Settings
from .chat import MM_PAYLOAD_FIELDS, render_chat
from .harmony import _flat_text, uses_harmony
from .request import Origins, in_request_terms

LOGPROBS_INCLUDE = "message.output_text.logprobs"


class StatelessOnly(InvalidRequest):
    """``previous_response_id`` on the stateless endpoint (upstream type ``invalid_request_error``)."""

    error_type = "invalid_request_error"


def _assistant(prev: list[dict[str, Any]]) -> dict[str, Any] | None:
    return prev[-1] if prev and prev[-1].get("role") == "assistant" else None


def _text_of(item: dict[str, Any]) -> str | None:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and isinstance(content[0], dict):
        text = content[0].get("text")
        return text if isinstance(text, str) else None
    return None


def _reasoning_text(item: dict[str, Any], where: str) -> str:
    if item.get("encrypted_content"):
        raise InvalidRequest("Encrypted content is not supported.", param=where)
    for key in ("content", "summary"):
        parts = item.get(key)
        if isinstance(parts, list) and parts and isinstance(parts[0], dict):
            return str(parts[0].get("text", ""))
    return ""


def _add_item(messages: list[dict[str, Any]], item: Any, where: str) -> None:
    if not isinstance(item, dict):
        raise InvalidRequest("input items must be objects", param=where)
    kind = item.get("type")
    prev = _assistant(messages)
    if kind == "function_call":
        call = {
            "id": item.get("call_id"),
            "type": "function",
            "function": {"name": item.get("name"), "arguments": item.get("arguments", "")},
        }
        if prev is not None:
            prev.setdefault("tool_calls", []).append(call)
        else:
            messages.append({"role": "assistant", "tool_calls": [call]})
    elif kind == "reasoning":
        text = _reasoning_text(item, where)
        if prev is not None and prev.get("reasoning") is None:
            prev["reasoning"] = text
        else:
            messages.append({"role": "assistant", "reasoning": text})
    elif kind == "function_call_output":
        messages.append({"role": "tool", "content": item.get("output"), "tool_call_id": item.get("call_id")})
    elif item.get("role") == "assistant":
        said = _text_of(item)
        if said is None:
            messages.append({**item, "content": _chat_content(item["content"])} if "content" in item else item)
        elif prev is not None and prev.get("content") is None:
            prev["content"] = said
        else:
            messages.append({"role": "assistant", "content": said})
    elif "role" in item:
        messages.append({k: _chat_content(v) if k == "content" else v
                         for k, v in item.items() if k not in ("type", "status", "id")})
    else:
        raise InvalidRequest(f"Unsupported input item type: {kind}", param=where)


def _continues(items: str | list[dict[str, Any]]) -> bool:
    if isinstance(items, str) or not items or not isinstance(items[-1], dict):
        return False
    last = items[-1]
    return last.get("type", "message") in ("message", "reasoning") and last.get("status") in (
        "in_progress",
        "incomplete",
    )


def structured_outputs(req: ResponsesRequest) -> dict[str, Any] | None:
    """``text.format`` → ``structured_outputs`` (vLLM 0.33 ``extract_structured_outputs``).

    Raises:
        InvalidRequest: both ``structured_outputs`` and ``text.format``.
    """
    fmt = req.text.format if req.text is not None else None
    if fmt is None:
        return req.structured_outputs
    if req.structured_outputs is not None:
        raise InvalidRequest(
            "Cannot specify both structured_outputs and text.format", param="structured_outputs"
        )
    if fmt.type == "json_object":
        return {"json_object": True}
    if isinstance(fmt, ResponseFormatTextJSONSchemaConfig):
        return {"json": fmt.schema_}
    return None


def _harmony_item(messages: list[dict[str, Any]], item: Any, where: str) -> None:
    """One input item as the one chat message the harmony render turns into the harmony message
    vLLM 0.33 builds for it (``response_input_to_harmony``): no merging, order kept."""
    if not isinstance(item, dict):
        raise InvalidRequest("input items must be objects", param=where)
    kind = item.get("type", "message")
    if kind == "function_call":
        call = {"id": item.get("call_id"), "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments", "")}}
        messages.append({"role": "assistant", "tool_calls": [call]})
    elif kind == "function_call_output":
        call_id = item.get("call_id")
        if not any(c.get("id") == call_id for m in messages for c in m.get("tool_calls") or ()):
            raise InvalidRequest(f"No call message found for {call_id}", param="input")
        messages.append({"role": "tool", "tool_call_id": call_id, "content": item.get("output")})
    elif kind == "reasoning":  # every content text, joined by newlines; a summary alone is dropped
        texts = [p.get("text", "") for p in item.get("content") or () if isinstance(p, dict)]
        if texts:
            messages.append({"role": "assistant", "reasoning": "\n".join(texts)})
    elif kind == "message" and "role" in item:
        if item["role"] in ("system", "developer") and not _flat_text(item.get("content")):
            return  # an empty instruction message adds nothing (as vLLM)
        messages.append({k: v for k, v in item.items() if k in ("role", "content")})
    else:
        raise InvalidRequest(f"Unknown input type: {kind}", param=where)


def _chat_content(content: Any) -> Any:
    """A Responses message's content as chat content: an ``input_image`` part without ``detail``
    gets OpenAI's default ``"auto"`` (vLLM 0.33's Responses render takes such a part in a message,
    the usual OpenAI form; the chat render validates ``input_image`` as the SDK's
    ``ResponseInputImageParam``, where ``detail`` is required, and so does vLLM for a
    ``function_call_output``'s parts, which keep that check here too)."""
    if not isinstance(content, list):
        return content
    return [{**part, "detail": "auto"}
            if isinstance(part, dict) and part.get("type") == "input_image" and "detail" not in part else part
            for part in content]


def to_chat_request(
    req: ResponsesRequest, harmony: bool = False, origins: Origins | None = None
) -> dict[str, Any]:
    """The chat request body of a Responses request (see the module docstring); ``harmony``
    (gpt-oss): one chat message per input item, as vLLM 0.33's harmony Responses render reads
    them (``_render_responses_with_harmony``), for the harmony render of the chat path.
    ``origins``, when given, gets the request path each chat message came from
    (``instructions``, ``input``, ``input.<i>``; :func:`.request.in_request_terms`)."""
    messages: list[dict[str, Any]] = []
    origins = {} if origins is None else origins
    if req.instructions if not harmony else req.instructions is not None:
        origins["messages.0"] = ("instructions", None)
        messages.append({"role": "system", "content": req.instructions})
    if isinstance(req.input, str):
        origins[f"messages.{len(messages)}"] = ("input", None)
        messages.append({"role": "user", "content": req.input})
    else:
        for i, item in enumerate(req.input):
            first = len(messages)
            (_harmony_item if harmony else _add_item)(messages, item, f"input.{i}")
            for k in range(first, len(messages)):
                origins[f"messages.{k}"] = (f"input.{i}", None)
    cont = _continues(req.input)
    logprobs = bool(req.include and LOGPROBS_INCLUDE in req.include)
    tools = responses_tools(req.tools)
    chat: dict[str, Any] = {
        "model": req.model,
        "messages": messages,
        "tools": tools,
        "tool_choice": responses_tool_choice(req.tool_choice) if tools else None,
        "parallel_tool_calls": req.parallel_tool_calls,
        "max_tokens": req.max_output_tokens,
        "reasoning_effort": req.reasoning.effort if req.reasoning else None,
        "include_reasoning": req.include_reasoning,
        "structured_outputs": structured_outputs(req),
        "add_generation_prompt": not cont,
        "continue_final_message": cont,
        "logprobs": logprobs,
        "top_logprobs": req.top_logprobs if logprobs else None,
        "truncate_prompt_tokens": -1 if req.truncation not in (None, "disabled") else None,
        "stream": bool(req.stream),
    }
    for name in (
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "presence_penalty",
        "frequency_penalty",
        "repetition_penalty",
        "seed",
        "stop",
        "stop_token_ids",
        "ignore_eos",
        "logit_bias",
        "skip_special_tokens",
        "spaces_between_special_tokens",
        "include_stop_str_in_output",
        "priority",
        "cache_salt",
        "vllm_xargs",
        "kv_transfer_params",
        "ec_transfer_params",
        "chat_template_kwargs",
    ):
        chat[name] = getattr(req, name)
    return {k: v for k, v in chat.items() if v is not None}


def render_responses(bundle: ModelBundle, settings: Settings, body: Any) -> dict[str, Any]:
    """One ``GenerateRequest`` dict for a stateless Responses request (vLLM 0.33
    ``/v1/responses/render``).

    Raises:
        InvalidRequest: ``previous_response_id`` (stateless), non-function tools, unsupported
            or malformed input items, encrypted reasoning, and every chat render error.
        UnknownModel: ``model`` is not served.
    """
    if not isinstance(body, dict):
        raise not_an_object(body)
    req = ResponsesRequest.model_validate(body, from_attributes=True)
    if req.previous_response_id is not None:
        raise StatelessOnly(
            "previous_response_id is not supported by the stateless render endpoint.",
            param="previous_response_id",
        )
    harmony = uses_harmony(bundle.config)
    origins: Origins = {}
    chat = to_chat_request(req, harmony=harmony, origins=origins)
    chat.update((k, body[k]) for k in MM_PAYLOAD_FIELDS if k in body)
    with in_request_terms(origins):
        out = render_chat(bundle, settings, chat, responses_items=harmony)
    out["request_id"] = req.request_id or f"resp_{uuid.uuid4().hex}"
    out["parse_context"] = None
    out["reasoning_ended"] = None
    out["stream_options"] = None
    out["sampling_params"].setdefault("extra_args", {})  # upstream always sends it for Responses
    return out
