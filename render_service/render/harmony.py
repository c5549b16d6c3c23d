"""gpt-oss prompts through the harmony format (``oss-harmony``), not through the Jinja template.

vLLM 0.33 renders every model whose ``config.json`` says ``model_type: "gpt_oss"`` with the
harmony library (``OnlineRenderer.use_harmony``, ``harmony_utils``); this module builds the same
conversation from an OpenAI chat request and returns its token ids:

* a system message: the harmony default system content with the conversation start date and,
  when given, the reasoning effort (``low``/``medium``/``high``; anything else is a 400);
* a developer message when the first message is ``system``/``developer`` (its text is the
  developer instructions; that message is then consumed) or when there are tools (function tools
  with ``description`` ``""`` when absent);
* the rest of the messages: ``user`` as is, text parts kept as separate contents; ``assistant``
  text on the ``final`` channel, ``reasoning`` on ``analysis``, tool calls on ``commentary`` to
  ``functions.<name>`` with content type ``json`` and the client's ``arguments`` string; ``tool``
  results from ``functions.<name of the call with that id>``; later ``system``/``developer``
  messages become developer-instruction messages;
* analysis messages before the last ``final`` assistant message dropped; rendered for completion
  by the assistant; prior tool-call headers in the legacy shape
  ``<|start|>assistant to=R<|channel|>C T<|message|>`` (vLLM ``_use_legacy_tool_call_headers``).

The encoding (``HARMONY_GPT_OSS``) is embedded in the ``oss-harmony`` wheel, so this works offline.
"""

from __future__ import annotations

import datetime
from functools import lru_cache
from typing import Any

from ..errors import InvalidRequest
from .messages import check_tool_call_type

HARMONY_MODEL_TYPES = frozenset({"gpt_oss"})
REASONING_EFFORTS = ("high", "medium", "low")


def uses_harmony(config: dict[str, Any]) -> bool:
    """Whether vLLM renders this model with harmony (``config.json`` ``model_type``)."""
    return config.get("model_type") in HARMONY_MODEL_TYPES


@lru_cache(maxsize=1)
def _encoding() -> Any:
    from openai_harmony import HarmonyEncodingName, load_harmony_encoding

    return load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)


def _flat_text(content: Any) -> str | None:
    """A content value's text parts joined without separator; ``None`` when it has no text."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = [p if isinstance(p, str) else p.get("text") for p in content if isinstance(p, (str, dict))]
    kept = [t for t in texts if t is not None]
    return "".join(kept) if kept else None


def _system(effort: str | None, start_date: str) -> Any:
    from openai_harmony import Message, ReasoningEffort, Role, SystemContent

    content = SystemContent.new()
    if effort is not None:
        content = content.with_reasoning_effort(ReasoningEffort(effort.capitalize()))
    return Message.from_role_and_content(Role.SYSTEM, content.with_conversation_start_date(start_date))


def _developer(instructions: str | None, tools: list[dict[str, Any]] | None) -> Any:
    from openai_harmony import DeveloperContent, Message, Role, ToolDescription

    content = DeveloperContent.new()
    if instructions is not None:
        content = content.with_instructions(instructions)
    functions = [t["function"] for t in tools or () if t.get("type") == "function"]
    if functions:
        content = content.with_function_tools(
            [
                ToolDescription.new(f["name"], f.get("description") or "", parameters=f.get("parameters"))
                for f in functions
            ]
        )
    return Message.from_role_and_content(Role.DEVELOPER, content)


def _message(msg: dict[str, Any], call_names: dict[Any, Any], keep_empty_final: bool = False) -> list[Any]:
    """The harmony messages of one chat message. ``keep_empty_final``: an assistant message with
    ``content`` whose first text is empty still becomes a ``final`` message (vLLM 0.33's harmony
    Responses render, ``response_input_to_harmony``); the chat path drops it (vLLM's
    ``parse_chat_input_to_harmony_message``)."""
    from openai_harmony import Author, Message, Role, TextContent

    role = msg.get("role")
    out: list[Any] = []
    calls = msg.get("tool_calls") or []
    if role == "assistant" and calls:
        text = _flat_text(msg.get("content"))
        if text:
            out.append(Message.from_role_and_content(Role.ASSISTANT, text).with_channel("commentary"))
        if msg.get("reasoning"):
            out.append(
                Message.from_role_and_content(Role.ASSISTANT, msg["reasoning"]).with_channel("analysis")
            )
        for call in calls:
            fn = call.get("function") or {}
            out.append(
                Message.from_role_and_content(Role.ASSISTANT, fn.get("arguments") or "")
                .with_channel("commentary")
                .with_recipient(f"functions.{fn.get('name', '')}")
                .with_content_type("json")
            )
        return out
    if role == "tool":
        name = call_names.get(msg.get("tool_call_id", ""), "")
        author = Author.new(Role.TOOL, f"functions.{name}")
        text = _flat_text(msg.get("content")) or ""
        return [
            Message.from_author_and_content(author, text)
            .with_channel("commentary")
            .with_recipient("assistant")
        ]
    if role == "assistant" and msg.get("reasoning"):
        out.append(Message.from_role_and_content(Role.ASSISTANT, msg["reasoning"]).with_channel("analysis"))
    content = msg.get("content") or ""
    parts = [content] if isinstance(content, str) else [p.get("text", "") for p in content]
    contents = [TextContent(text=t) for t in parts]
    if role == "assistant":
        if contents and (contents[0].text or (keep_empty_final and "content" in msg)):
            out.append(Message.from_role_and_contents(Role.ASSISTANT, contents).with_channel("final"))
    elif role in ("system", "developer"):
        text = _flat_text(msg.get("content"))
        if text is not None:
            out.append(_developer(text, None))
    else:
        out.append(Message.from_role_and_contents(Role(role), contents))
    return out


def _drop_old_analysis(msgs: list[Any]) -> list[Any]:
    last_final = max(
        (i for i, m in enumerate(msgs) if m.author.role.value == "assistant" and m.channel == "final"),
        default=-1,
    )
    return [m for i, m in enumerate(msgs) if not (i < last_final and m.channel == "analysis")]


def _legacy_call_headers(ids: list[int]) -> list[int]:
    """Rewrite ``<|start|>assistant<|channel|>C to=R <|constrain|>T<|message|>`` headers to the
    ``<|start|>assistant to=R<|channel|>C T<|message|>`` shape gpt-oss was trained on."""
    enc = _encoding()
    start, channel, constrain, message = (
        enc.encode(t, allowed_special="all")[0]
        for t in ("<|start|>", "<|channel|>", "<|constrain|>", "<|message|>")
    )
    out: list[int] = []
    i = 0
    while i < len(ids):
        if ids[i] != start or message not in ids[i + 1 :]:
            out.append(ids[i])
            i += 1
            continue
        end = ids.index(message, i + 1)
        header = ids[i + 1 : end]
        if channel in header and constrain in header[header.index(channel) + 1 :]:
            c = header.index(channel)
            k = header.index(constrain, c + 1)
            author, chan_rcpt, ctype = (
                enc.decode(header[:c]),
                enc.decode(header[c + 1 : k]),
                enc.decode(header[k + 1 :]),
            )
            if author == "assistant" and " to=" in chan_rcpt and chan_rcpt.endswith(" "):
                chan, rcpt = chan_rcpt[:-1].split(" to=", 1)
                if chan and rcpt and ctype:
                    out += [
                        start,
                        *enc.encode(f"assistant to={rcpt}"),
                        channel,
                        *enc.encode(f"{chan} {ctype}"),
                        message,
                    ]
                    i = end + 1
                    continue
        out += ids[i : end + 1]
        i = end + 1
    return out


def tool_call_count(messages: list[Any]) -> int:
    """Tool calls in the history (``history_tool_call_cnt``)."""
    return sum(len(m.get("tool_calls") or ()) for m in messages if isinstance(m, dict))


def start_date_today() -> str:
    """Today's date as harmony's ``Current date:`` (vLLM: ``VLLM_SYSTEM_START_DATE`` or today)."""
    return datetime.date.today().strftime("%Y-%m-%d")


def render_ids(
    messages: list[Any],
    tools: list[dict[str, Any]] | None,
    *,
    reasoning_effort: str | None,
    start_date: str | None = None,
    keep_empty_final: bool = False,
) -> list[int]:
    """Prompt token ids of a chat request for gpt-oss (see the module docstring).

    Args:
        messages: the request's ``messages`` as sent (dicts; may be empty).
        tools: the request's tools in vLLM's shape, or ``None`` (none, or hidden from the prompt).
        reasoning_effort: the request's ``reasoning_effort`` after ``--reasoning-effort-map``.
        start_date: ``YYYY-MM-DD`` of the system message; today when ``None``.
        keep_empty_final: the messages are a Responses request's items, one per item: an
            assistant message with empty text is an empty ``final`` message, as vLLM 0.33's
            harmony Responses render makes it (its chat render drops it; see :func:`_message`).

    Raises:
        InvalidRequest: ``reasoning_effort`` harmony does not know (``none`` included), a message
            that is not an object or has an unknown role.
    """
    from openai_harmony import Conversation, RenderConversationConfig, Role

    if reasoning_effort is not None and reasoning_effort not in REASONING_EFFORTS:
        if reasoning_effort == "none":
            raise InvalidRequest(
                f"Harmony does not support reasoning_effort={reasoning_effort!r}", param="reasoning_effort"
            )
        raise InvalidRequest(
            f"reasoning_effort={reasoning_effort!r} is not supported by Harmony. "
            f"Supported values are: {', '.join(REASONING_EFFORTS)}.",
            param="reasoning_effort",
        )
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise InvalidRequest("each message must be an object", param=f"messages.{i}")
        if m.get("role") not in ("system", "developer", "user", "assistant", "tool"):
            raise InvalidRequest(f"Unknown role {m.get('role')!r}", param=f"messages.{i}.role")
        for j, call in enumerate(m.get("tool_calls") or ()):
            if not isinstance(call, dict):
                raise InvalidRequest("each tool call must be an object", param=f"messages.{i}.tool_calls.{j}")
            check_tool_call_type(call, f"messages.{i}.tool_calls.{j}")
    rest = list(messages)
    instructions = None
    if rest and rest[0].get("role") in ("system", "developer"):
        instructions = _flat_text(rest.pop(0).get("content"))
    msgs = [_system(reasoning_effort, start_date or start_date_today())]
    if instructions or tools:
        msgs.append(_developer(instructions, tools))
    call_names = {
        c.get("id"): (c.get("function") or {}).get("name")
        for m in rest
        for c in (m.get("tool_calls") or [])
        if isinstance(c, dict)
    }
    for m in rest:
        msgs += _message(m, call_names, keep_empty_final)
    conv = Conversation.from_messages(_drop_old_analysis(msgs))
    ids = _encoding().render_conversation_for_completion(
        conv, Role.ASSISTANT, config=RenderConversationConfig(auto_drop_analysis=False)
    )
    return _legacy_call_headers(list(ids))
