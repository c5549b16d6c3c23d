"""Tools and ``tool_choice`` of the Anthropic Messages and OpenAI Responses APIs in their chat
form. Render gives them to the chat template, derender to the tool parser, so both wings use
this one conversion (vLLM 0.33 ``AnthropicServingMessages._convert_tool_choice`` /
``_convert_tools`` and ``convert_tool_responses_to_completions_format``).
"""

from __future__ import annotations

from typing import Any

from .errors import InvalidRequest
from .protocol.anthropic import AnthropicMessagesRequest


def anthropic_tool_fields(req: AnthropicMessagesRequest) -> dict[str, Any]:
    """``tools``, ``tool_choice`` and ``parallel_tool_calls`` of the chat form (vLLM 0.33
    ``_convert_tool_choice`` / ``_convert_tools``)."""
    fields: dict[str, Any] = {}
    choice = req.tool_choice
    if choice is not None:
        fields["parallel_tool_calls"] = not choice.disable_parallel_tool_use
        fields["tool_choice"] = (
            {"type": "function", "function": {"name": choice.name}}
            if choice.type == "tool"
            else {"auto": "auto", "any": "required", "none": "none"}[choice.type]
        )
    if req.tools is not None:
        fields["tools"] = [
            {
                "type": "function",
                "function": {
                    k: v
                    for k, v in (
                        ("name", t.name),
                        ("description", t.description),
                        ("parameters", t.input_schema),
                        ("strict", t.strict),
                    )
                    if v is not None
                },
            }
            for t in req.tools
        ]
        fields.setdefault("tool_choice", "auto")
    return fields


def responses_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """Responses ``function`` tools → chat tools (vLLM 0.33
    ``convert_tool_responses_to_completions_format``).

    Raises:
        InvalidRequest: a tool of another type (built-in tools need a tool server).
    """
    if not tools:
        return None
    out = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise InvalidRequest(
                f"tool type {kind!r} is not supported by this render service: only function tools",
                param=f"tools.{i}.type",
            )
        if not isinstance(tool.get("name"), str):
            raise InvalidRequest("function tools need a `name`", param=f"tools.{i}.name")
        fn = {k: tool[k] for k in ("name", "description", "parameters", "strict") if tool.get(k) is not None}
        out.append({"type": "function", "function": fn})
    return out


def responses_tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    """Responses ``tool_choice`` → chat (``{"type": "function", "name"}`` → named)."""
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    return choice
