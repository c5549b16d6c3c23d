"""The same conversation as an OpenAI chat request, an Anthropic Messages request and an OpenAI
Responses request, built from the real chat requests in ../shared/data/chat_requests.jsonl.

``to_anthropic(chat)`` / ``to_responses(chat)`` return ``None`` when the conversation has
something the other API cannot say without loss (so a parity test only compares conversations
that mean the same in both forms): a system or developer message not at the start, a message
``name``, non-string content parts other than text, an assistant turn with neither content nor
tool calls, tool schemas without ``type``. Used by the parity tests and by
``tools/record_api_render_goldens.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAX_TOKENS = 256


def load_chat_requests(path: Path) -> list[dict[str, Any]]:
    """The chat requests of the jsonl file: ``{"id", "messages", "tools"?}`` each."""
    out = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            continue
        row = json.loads(line)
        req = {"messages": row["messages"]}
        if row.get("tools"):
            req["tools"] = row["tools"]
        out.append({"id": row["id"], "chat": req})
    return out


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(p["text"] for p in content) if len(content) == 1 else None
    return None


def _lead_system(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]] | None:
    rest = list(messages)
    system = None
    if rest and rest[0]["role"] == "system":
        system = _text(rest.pop(0).get("content"))
        if not system:
            return None
    if any(m["role"] in ("system", "developer", "function") or m.get("name") for m in rest):
        return None
    return system, rest


def _arguments(call: dict[str, Any]) -> dict[str, Any] | None:
    args = call["function"].get("arguments")
    try:
        value = json.loads(args) if isinstance(args, str) else args
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _tools_ok(chat: dict[str, Any]) -> bool:
    return all(
        isinstance(t.get("function", {}).get("parameters"), dict) and "type" in t["function"]["parameters"]
        for t in chat.get("tools") or ()
    )


def to_anthropic(chat: dict[str, Any]) -> dict[str, Any] | None:
    """The Anthropic Messages form of ``chat`` (see the module docstring), or ``None``."""
    lead = _lead_system(chat["messages"])
    if lead is None or not _tools_ok(chat):
        return None
    system, rest = lead
    messages: list[dict[str, Any]] = []
    for m in rest:
        role = m["role"]
        if role == "tool":
            text = _text(m.get("content"))
            if text is None:
                return None
            block = {"type": "tool_result", "tool_use_id": m.get("tool_call_id", ""), "content": text}
            if messages and messages[-1]["role"] == "user" and messages[-1].get("_tools"):
                messages[-1]["content"].append(block)
            else:
                messages.append({"role": "user", "content": [block], "_tools": True})
            continue
        text = _text(m.get("content")) if m.get("content") is not None else None
        if role == "user":
            if text is None:
                return None
            messages.append({"role": "user", "content": text})
            continue
        blocks: list[dict[str, Any]] = []
        if m.get("reasoning_content"):
            blocks.append({"type": "thinking", "thinking": m["reasoning_content"], "signature": "sig"})
        if text:
            blocks.append({"type": "text", "text": text})
        elif text == "" and not m.get("tool_calls"):
            return None
        for call in m.get("tool_calls") or ():
            args = _arguments(call)
            if args is None or not call.get("id"):
                return None
            blocks.append(
                {"type": "tool_use", "id": call["id"], "name": call["function"]["name"], "input": args}
            )
        if not blocks or (text == "" and m.get("tool_calls")):
            return None  # "" beside tool calls has no Anthropic form (the block would be dropped)
        messages.append({"role": "assistant", "content": blocks})
    for msg in messages:
        msg.pop("_tools", None)
    out: dict[str, Any] = {"model": "m", "max_tokens": MAX_TOKENS, "messages": messages}
    if system is not None:
        out["system"] = system
    if chat.get("tools"):
        out["tools"] = [
            {
                "name": t["function"]["name"],
                **({"description": t["function"]["description"]} if t["function"].get("description") else {}),
                "input_schema": t["function"]["parameters"],
            }
            for t in chat["tools"]
        ]
    return out


def to_responses(chat: dict[str, Any]) -> dict[str, Any] | None:
    """The Responses form of ``chat`` (see the module docstring), or ``None``."""
    lead = _lead_system(chat["messages"])
    if lead is None or not _tools_ok(chat):
        return None
    system, rest = lead
    items: list[dict[str, Any]] = []
    for m in rest:
        role = m["role"]
        text = _text(m.get("content")) if m.get("content") is not None else None
        if role == "tool":
            if text is None:
                return None
            items.append(
                {"type": "function_call_output", "call_id": m.get("tool_call_id", ""), "output": text}
            )
        elif role == "user":
            if text is None:
                return None
            items.append({"role": "user", "content": text})
        else:
            if m.get("reasoning_content"):
                items.append(
                    {
                        "type": "reasoning",
                        "id": f"rs_{len(items)}",
                        "summary": [],
                        "content": [{"type": "reasoning_text", "text": m["reasoning_content"]}],
                    }
                )
            if text:
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "id": f"msg_{len(items)}",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": text, "annotations": []}],
                    }
                )
            elif not m.get("tool_calls") or text == "":
                return None
            for call in m.get("tool_calls") or ():
                args = call["function"].get("arguments")
                if not isinstance(args, str) or not call.get("id"):
                    return None
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call["id"],
                        "name": call["function"]["name"],
                        "arguments": args,
                    }
                )
    out: dict[str, Any] = {"model": "m", "input": items, "max_output_tokens": MAX_TOKENS}
    if system is not None:
        out["instructions"] = system
    if chat.get("tools"):
        out["tools"] = [
            {
                "type": "function",
                "name": t["function"]["name"],
                **({"description": t["function"]["description"]} if t["function"].get("description") else {}),
                "parameters": t["function"]["parameters"],
            }
            for t in chat["tools"]
        ]
    return out
