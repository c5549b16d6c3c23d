"""OpenAI chat messages and tools → the plain values chat templates read.

Follows vLLM 0.33's chat-message parsing (``--chat-template-content-format auto``) plus fixes for
faults real clients hit:

* ``content``: a string, or a list of text parts. For ``"string"``-format templates the text parts
  are joined with ``"\\n"``; for ``"openai"``-format templates strings and parts become ``[{"type": "text",
  "text": ...}]`` parts, except on ``tool`` messages, which always get a string (vLLM #39614 /
  BR55). Non-text parts are refused, except image/video parts for vision-language models, which
  a multimodal collector takes (:mod:`render_service.render.multimodal`).
* ``content: null`` is ``""`` except on an assistant message with tool calls.
* ``tool_calls: []`` is dropped (vLLM #12937 / BR56); each call's ``function.arguments`` JSON
  string is parsed to a mapping (as vLLM: templates expect a mapping); empty, not JSON, or not a
  JSON object → ``{}`` as vLLM 0.33 (:func:`_parse_arguments`).
* Roles: ``system``, ``developer``, ``user``, ``assistant``, ``tool``, ``function``; anything
  else → 400 (vLLM #53071 / BR62).
* ``developer`` messages become ``system`` messages when the template does not know the role, and
  system messages are then merged into one first message (``"\n\n"``-joined), as vLLM 0.33.
* Prior reasoning under ``reasoning`` / ``reasoning_content`` / ``thinking`` is given to the
  template under all three names (transformers' aliasing; BR52).

Three template views are produced, tried in order (:attr:`Conversation.views`): the *primary*
one is exactly what transformers 5 ``apply_chat_template`` feeds the template (``None``-valued
keys dropped); the *blank* one gives ``content: ""`` beside tool calls, as vLLM 0.33 hands
``content: null`` to every template (templates that do ``'x' in message.content``, e.g. the
Qwen3 release template; DeepSeek-R1-Distill then renders an empty assistant turn and no call,
render golden ``history_tool_call_without_tools``); the *compat* one keeps ``content: None``
beside tool calls and the original ``arguments`` strings, for templates that only work on that
shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import orjson

from ..errors import InvalidRequest
from ..protocol.chat import check_tool_calls

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


@dataclass(frozen=True)
class Conversation:
    """Normalised messages; the two fallback views are built on first use (most renders never
    need them).

    Attributes:
        primary: messages as transformers 5 gives them to the template.
        compat: the same with ``content: None`` kept and ``arguments`` as the client's strings.
        blank: the primary view with ``content: ""`` where the client sent ``null``.
        tool_call_count: number of tool calls in the history (``history_tool_call_cnt``).
    """

    primary: list[dict[str, Any]]
    tool_call_count: int
    normalised: list[tuple[dict[str, Any], list[dict[str, Any]] | None]] = field(repr=False)
    developer_role: bool = True

    @cached_property
    def compat(self) -> list[dict[str, Any]]:
        """See the class docstring."""
        out = []
        for message, raw_calls in self.normalised:
            kept = {k: v for k, v in message.items() if v is not None or k == "content"}
            if raw_calls is not None:
                kept["tool_calls"] = raw_calls
            out.append(_alias_reasoning(kept))
        return out if self.developer_role else developer_as_system(out)

    @cached_property
    def blank(self) -> list[dict[str, Any]]:
        """See the class docstring."""
        out = []
        for message, _ in self.normalised:
            clean = {k: v for k, v in message.items() if v is not None}
            content = message["content"]
            out.append(_alias_reasoning({**clean, "content": "" if content is None else content}))
        return out if self.developer_role else developer_as_system(out)

    @property
    def views(self) -> Iterator[list[dict[str, Any]]]:
        """The distinct views, primary first; a later view is only built when asked for."""
        seen = [self.primary]
        yield self.primary
        for name in ("blank", "compat"):
            view = getattr(self, name)
            if all(view != other for other in seen):
                seen.append(view)
                yield view


def _part_text(part: Any, where: str, vision: bool = False) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        raise InvalidRequest("content parts must be objects", param=where)
    kind = part.get("type", "text")
    if not isinstance(kind, str):
        raise InvalidRequest("content part `type` must be a string", param=f"{where}.type")
    if kind in TEXT_PART_TYPES and isinstance(part.get("text"), str):
        return part["text"]
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return part["refusal"]
    field = "text" if kind in TEXT_PART_TYPES else "refusal" if kind == "refusal" else None
    if field is not None:  # a known part type whose text is missing or not a string
        raise InvalidRequest(f"content part of type {kind!r} needs a string `{field}`",
                             param=f"{where}.{field}")
    accepted = "text, image_url and video_url content" if vision else "text content only"
    raise InvalidRequest(
        f"content part type {kind!r} is not supported: this render service accepts {accepted}",
        param=f"{where}.type",
    )


def _content(message: dict[str, Any], role: str, fmt: str, where: str, media: Any = None) -> Any:
    content = message.get("content")
    if content is None:
        return None if role == "assistant" and message.get("tool_calls") else ""
    if isinstance(content, str):
        texts = [content]
    elif isinstance(content, list):
        if media is not None:
            return _media_content(content, role, fmt, where, media)
        texts = [_part_text(part, f"{where}.{j}") for j, part in enumerate(content)]
    else:
        raise InvalidRequest("content must be a string, a list of content parts or null", param=where)
    if fmt == "openai" and role != "tool":
        return [{"type": "text", "text": t} for t in texts]
    return "\n".join(t for t in texts if t)  # vLLM drops empty text parts before joining


def _media_content(content: list[Any], role: str, fmt: str, where: str, media: Any) -> Any:
    """Content parts of a vision-language model: media parts go to ``media`` (a
    :class:`render_service.render.multimodal.MediaCollector`) and become ``{"type": modality}``
    parts (``openai`` format) or the model's placeholder text (``string`` format)."""
    parts: list[tuple[str, str]] = []  # (kind, text or modality)
    for j, part in enumerate(content):
        modality = media.accept(part, f"{where}.{j}") if isinstance(part, dict) else None
        parts.append(("media", modality) if modality else ("text", _part_text(part, f"{where}.{j}", vision=True)))
    # a tool message's parts are joined into one string only when they are all text (vLLM 0.33:
    # with media in it the list is kept, so Qwen2.5-VL renders ``<|vision_end|>hi``, not ``...\nhi``)
    if fmt == "openai" and (role != "tool" or any(k == "media" for k, _ in parts)):
        return [{"type": v} if k == "media" else {"type": "text", "text": v} for k, v in parts]
    return "\n".join(media.placeholder(v) if k == "media" else v for k, v in parts)


def _parse_arguments(raw: Any, where: str) -> Any:
    """History ``arguments`` as the mapping templates expect. As vLLM 0.33: empty or absent →
    ``{}``; a string that is not JSON, or JSON that is not an object, → ``{}`` (a malformed call in
    the history must not make every later turn fail)."""
    if not raw:
        return {}
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        return raw if isinstance(raw, dict) else {}
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, or nested too deeply to be a real call
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _tool_calls(calls: Any, where: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    check_tool_calls(calls)  # vLLM 0.33's errors for a call of a wrong shape
    if not isinstance(calls, list):
        raise InvalidRequest("tool_calls must be a list", param=where)
    parsed, raw = [], []
    for j, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise InvalidRequest("each tool call needs function.name", param=f"{where}.{j}.function")
        check_tool_call_type(call, f"{where}.{j}")
        _check_call_strings(call, fn, f"{where}.{j}")
        args = _parse_arguments(fn.get("arguments"), f"{where}.{j}.function.arguments")
        text = (
            fn.get("arguments")
            if isinstance(fn.get("arguments"), str)
            else json.dumps(args, ensure_ascii=False)
        )
        parsed.append(_openai_order(call, {**fn, "arguments": args}))
        raw.append(_openai_order(call, {**fn, "arguments": text}))
    return parsed, raw


def _openai_order(call: dict[str, Any], fn: dict[str, Any]) -> dict[str, Any]:
    """A tool call with its keys in the OpenAI message type's field order, as vLLM validates it
    (``id``, ``function``: ``arguments`` then ``name``, ``type``); templates that iterate or
    ``tojson`` a call (Mistral) render that order."""
    function = {"arguments": fn["arguments"], "name": fn["name"], **fn}
    ordered = {k: call[k] for k in ("id",) if k in call}
    return {**ordered, "function": function, **{k: v for k, v in call.items() if k not in ("id", "function")}}


def _check_call_strings(call: dict[str, Any], fn: dict[str, Any], where: str) -> None:
    """A history tool call's ``id`` and ``function.arguments`` are strings, as vLLM 0.33's
    ``ChatCompletionMessageFunctionToolCallParam`` requires (measured: a missing or integer
    ``id``, object or null ``arguments`` are its 400).

    Raises:
        InvalidRequest: naming the field.
    """
    if not isinstance(call.get("id"), str):
        raise InvalidRequest("a tool call's `id` must be a string", param=f"{where}.id")
    if not isinstance(fn.get("arguments"), str):
        raise InvalidRequest("a tool call's `function.arguments` must be a JSON string",
                             param=f"{where}.function.arguments")


def check_tool_call_type(call: dict[str, Any], where: str) -> None:
    """A history tool call must say its ``type`` (vLLM's message model requires it: 400).

    Raises:
        InvalidRequest: ``type`` missing.
    """
    if call.get("type") is None:
        raise InvalidRequest("tool call `type` is required (e.g. \"function\")", param=f"{where}.type")


def _alias_reasoning(message: dict[str, Any]) -> dict[str, Any]:
    reasoning = next((message[k] for k in REASONING_FIELDS if message.get(k) is not None), None)
    if reasoning is None:
        return message
    return {
        "thinking": reasoning,
        **message,
        "reasoning_content": reasoning,
        "reasoning": message.get("reasoning", reasoning),
    }


def _system_text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and "text" in p)
    return content or ""


def developer_as_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rename ``developer`` to ``system`` (dropping a developer ``tools`` key); when a system
    message is then not first, or there are several, merge them into one first message."""
    if not any(m.get("role") == "developer" for m in messages):
        return messages
    out = [
        {**{k: v for k, v in m.items() if k != "tools"}, "role": "system"}
        if m.get("role") == "developer"
        else m
        for m in messages
    ]
    positions = [i for i, m in enumerate(out) if m["role"] == "system"]
    if positions in ([], [0]):
        return out
    texts = [t for t in (_system_text(out[i].get("content")) for i in positions) if t]
    return [{"role": "system", "content": "\n\n".join(texts)}, *(m for m in out if m["role"] != "system")]


#: vLLM 0.33's chat-template renderer's answer to ``messages: []`` (no ``param``).
EMPTY_CONVERSATION = "Cannot apply chat template to an empty conversation. Provide at least one message."


def normalize(messages: Any, content_format: str = "string", developer_role: bool = True,
              media: Any = None) -> Conversation:
    """Validate and normalise an OpenAI ``messages`` list (see module docstring);
    ``developer_role=False`` applies :func:`developer_as_system`; ``media`` (a multimodal
    collector) accepts image/video parts instead of refusing them.

    Raises:
        InvalidRequest: not a non-empty list of objects, unknown role, unsupported content part,
            malformed tool call or invalid arguments JSON (``param`` names the field).
    """
    if not isinstance(messages, list):
        raise InvalidRequest("messages must be a non-empty list", param="messages")
    if not messages:  # vLLM 0.33's chat-template renderer's refusal
        raise InvalidRequest(EMPTY_CONVERSATION)
    primary: list[dict[str, Any]] = []
    normalised: list[tuple[dict[str, Any], list[dict[str, Any]] | None]] = []
    count = 0
    for i, message in enumerate(messages):
        if _is_plain(message, content_format):  # nothing to change: the checks below pass it as is
            normalised.append((dict(message), None))
            primary.append(dict(message))
            continue
        key = _memo_key(message, content_format) if media is None else None
        seen = _NORMALISED.get(key) if key is not None else None
        if seen is not None:  # the same message normalised before: fresh top-level dicts of it
            out, raw_calls, first = dict(seen[0]), seen[1], dict(seen[2])
        else:
            out, raw_calls = _normalize_message(message, f"messages.{i}", content_format, media)
            first = _alias_reasoning({k: v for k, v in out.items() if v is not None})
            if key is not None:
                if len(_NORMALISED) >= _NORMALISED_ENTRIES:
                    _NORMALISED.clear()
                _NORMALISED[key] = (dict(out), raw_calls, dict(first))
        count += len(raw_calls or ())
        normalised.append((out, raw_calls))
        primary.append(first)
    if not developer_role:
        primary = developer_as_system(primary)
    return Conversation(primary, count, normalised, developer_role)


_NORMALISED: dict[tuple[bytes, str], tuple[dict[str, Any], list[dict[str, Any]] | None, dict[str, Any]]] = {}
"""Messages :func:`normalize` changed (tool calls, content parts, reasoning fields), by the
message's orjson bytes and the content format: ``(normalised, raw calls, primary view)``. A
conversation sends its earlier turns again on every request (chat_9k: 7 assistant tool-call
messages, ~45 % of its normalisation, ~65 µs). The bytes identify the value for normalisation:
the same bytes come only from equal JSON values with the same key order (orjson refuses
non-string keys, integers beyond 64 bits, datetimes, dataclasses and subclasses of the builtin
types, which are then never remembered; it writes NaN and infinities as ``null``, so a message
whose bytes hold ``null`` and that holds a float is never remembered either). Only ever read: a
hit gives fresh top-level dicts, the nested values (parsed calls) are shared, and every reader
(the template views, the sandboxed or minijinja templates, ``continue_final_message``) copies
before changing. Bounded like the ``tojson`` memo: at most :data:`_NORMALISED_ENTRIES` messages
of at most :data:`_NORMALISED_MAX_KEY` bytes, cleared whole when full. Not used with media (the
collector gathers each request's parts)."""
_NORMALISED_ENTRIES = 256
_NORMALISED_MAX_KEY = 16_384
_MEMO_OPTIONS = (orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
                 | orjson.OPT_PASSTHROUGH_SUBCLASS)


def _memo_key(message: Any, content_format: str) -> tuple[bytes, str] | None:
    """The :data:`_NORMALISED` key of ``message``, ``None`` when it must not be remembered."""
    try:
        raw = orjson.dumps(message, option=_MEMO_OPTIONS)
    except (TypeError, orjson.JSONEncodeError):
        return None
    if len(raw) > _NORMALISED_MAX_KEY or (b"null" in raw and _holds_float(message)):
        return None
    return raw, content_format


def _holds_float(value: Any) -> bool:
    """Whether a float is anywhere in ``value`` (dicts and lists walked)."""
    if type(value) is float:
        return True
    if type(value) is dict:
        return any(_holds_float(v) for v in value.values())
    if type(value) is list:
        return any(_holds_float(v) for v in value)
    return False


#: Keys of a message that :func:`_normalize_message` leaves as they are when their values are strings.
_PLAIN_KEYS = frozenset({"role", "content", "name", "tool_call_id"})


def _is_plain(message: Any, content_format: str) -> bool:
    """Whether ``message`` is a plain text message that normalisation returns unchanged: a dict
    of a known role with string ``content`` (kept as a string: ``string`` format, or a tool
    message), only :data:`_PLAIN_KEYS`, and no ``None`` value (so every view keeps it whole)."""
    if type(message) is not dict or type(message.get("content")) is not str:
        return False
    role = message.get("role")
    return (type(role) is str and role in ROLES and (content_format == "string" or role == "tool")
            and _PLAIN_KEYS.issuperset(message) and all(type(v) is str for v in message.values()))


def _normalize_message(
    message: Any, where: str, content_format: str, media: Any = None
) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """One message checked, with normalised content and parsed tool calls, plus the calls with the
    client's ``arguments`` strings (``None`` without tool calls)."""
    if not isinstance(message, dict):
        raise InvalidRequest("each message must be an object", param=where)
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise InvalidRequest(
            f"Unknown role {role!r}: a message's role must be one of {', '.join(sorted(ROLES))}",
            param=f"{where}.role",
        )
    _check_names(message, role, where)
    out = dict(message)
    out["content"] = _content(message, role, content_format, f"{where}.content", media)
    raw_calls = None
    if role != "assistant":  # vLLM 0.33 reads (and checks) tool calls of assistant messages only
        out.pop("tool_calls", None)
    elif "tool_calls" in out:
        if not out["tool_calls"]:
            del out["tool_calls"]
        else:
            out["tool_calls"], raw_calls = _tool_calls(out["tool_calls"], f"{where}.tool_calls")
    return out, raw_calls


def _check_names(message: dict[str, Any], role: str, where: str) -> None:
    """A message's ``name`` is a string when present (a ``tool`` message's is not read) and a
    ``tool`` message's ``tool_call_id`` a string or null, as vLLM 0.33's message types (OpenAI's
    ``*MessageParam`` and its ``CustomChatCompletionMessageParam``) require: anything else is
    its 400 (measured against ``vllm launch render``).

    Raises:
        InvalidRequest: naming the field.
    """
    if role != "tool" and "name" in message and not isinstance(message["name"], str):
        raise InvalidRequest("a message's `name` must be a string", param=f"{where}.name")
    call_id = message.get("tool_call_id")
    if role == "tool" and call_id is not None and not isinstance(call_id, str):
        raise InvalidRequest("a message's `tool_call_id` must be a string", param=f"{where}.tool_call_id")


def validate_tools(tools: Any) -> list[dict[str, Any]] | None:
    """Validate ``tools`` and return them in vLLM's shape (``ChatCompletionToolsParam.model_dump()``):
    ``{"type": "function", "function": {"name", "description", "parameters"[, "strict"]}}`` with
    ``description``/``parameters`` ``None`` when absent and unknown keys dropped. Templates, and
    ``parse_context.tools``, see this shape (as upstream; checked against ``vllm launch render``).

    Raises:
        InvalidRequest: not a list, empty list (upstream message) or a malformed entry.
    """
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise InvalidRequest("tools must be a list", param="tools")
    if not tools:
        raise InvalidRequest(
            "`tools` must not be an empty array. "
            "Either provide at least one tool or omit the field entirely.",
            param="tools",
        )
    return [_tool(tool, f"tools.{i}") for i, tool in enumerate(tools)]


def _tool(tool: Any, where: str) -> dict[str, Any]:
    fn = tool.get("function") if isinstance(tool, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise InvalidRequest("each tool needs a function with a name", param=f"{where}.function")
    if tool.get("type", "function") != "function":
        raise InvalidRequest("only tools of type 'function' are supported", param=f"{where}.type")
    description, parameters, strict = fn.get("description"), fn.get("parameters"), fn.get("strict")
    if description is not None and not isinstance(description, str):
        raise InvalidRequest("function.description must be a string", param=f"{where}.function.description")
    if parameters is not None and not isinstance(parameters, dict):
        raise InvalidRequest("function.parameters must be an object", param=f"{where}.function.parameters")
    if strict is not None and not isinstance(strict, bool):
        raise InvalidRequest("function.strict must be a boolean", param=f"{where}.function.strict")
    out: dict[str, Any] = {"name": fn["name"], "description": description, "parameters": parameters}
    if strict is not None:
        out["strict"] = strict
    return {"type": "function", "function": out}


#: Tool ``function`` keys that only the OpenAI API reads (``strict``: constrained decoding of the
#: arguments); no chat template was trained on them, so they stay out of the prompt.
API_ONLY_FUNCTION_KEYS = frozenset({"strict"})


def template_tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """``tools`` (as :func:`validate_tools` returns them) as handed to the chat template: the
    API-only ``function`` keys (``strict``) removed, so a tool renders the same prompt with or
    without them (vLLM 0.33 passes ``strict`` on to the template, which prints it into Qwen's and
    Llama's tool JSON: a deliberate difference, README). ``parse_context.tools`` keeps the tools
    as sent."""
    if not tools:
        return tools
    return [
        {**t, "function": {k: v for k, v in t["function"].items() if k not in API_ONLY_FUNCTION_KEYS}}
        if isinstance(t, dict) and isinstance(t.get("function"), dict)
        else t  # e.g. tools given raw in chat_template_kwargs: handed on as they are
        for t in tools
    ]


def tool_names(tools: list[dict[str, Any]] | None) -> list[str]:
    """Names of the request's function tools."""
    return [t["function"]["name"] for t in tools or ()]
