"""``tool_choice`` validation and the JSON-schema constraint for forced tool calls (vLLM 0.33).

* default: ``"auto"`` when ``tools`` are given, else ``"none"``;
* ``"auto"`` needs ``--enable-auto-tool-choice`` and ``--tool-call-parser`` (upstream message);
* ``"required"`` and named choices need ``--tool-call-parser``; a named tool must be in ``tools``;
* ``"required"``/named set ``structured_outputs.json`` to the calls' schema (tool parser
  ``adjust_request``), replacing ``response_format``, when the tool format parses guided JSON.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest, vllm_error
from ..settings import Settings
from .messages import tool_names

_USAGE = 'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`'


def resolve(tool_choice: Any, tools: list[dict[str, Any]] | None, settings: Settings) -> str | dict[str, Any]:
    """The effective ``tool_choice`` after validation.

    Raises:
        InvalidRequest: a choice the request or the server configuration cannot honour.
    """
    if tool_choice is None:
        tool_choice = "auto" if tools else "none"
    if tool_choice == "none":
        return "none"
    if not tools:
        raise vllm_error("When using `tool_choice`, `tools` must be set.", "tool_choice")
    if isinstance(tool_choice, dict):  # vLLM 0.33 ``ChatCompletionRequest.check_tool_usage``
        fn = tool_choice.get("function")
        if not isinstance(fn, dict):
            raise vllm_error(f"Invalid value for `function`: `{fn}` in `tool_choice`! {_USAGE}",
                             "tool_choice.function")
        if "name" not in fn:
            raise vllm_error(f"Expected field `name` in `function` in `tool_choice`! {_USAGE}",
                             "tool_choice.function.name")
        if not isinstance(fn["name"], str) or not fn["name"]:
            raise vllm_error(f"Invalid `name` in `function`: `{fn['name']}` in `tool_choice`! {_USAGE}",
                             "tool_choice.function.name")
        if fn["name"] not in tool_names(tools):
            raise vllm_error("The tool specified in `tool_choice` does not match any of the specified `tools`",
                             "tool_choice")
    elif tool_choice not in ("auto", "required"):
        raise vllm_error(
            f'Invalid value for `tool_choice`: {tool_choice}! Only named tools, "none", "auto" or "required" '
            "are supported.", "tool_choice")
    if settings.tool_call_parser is None:
        if tool_choice == "auto":
            raise InvalidRequest(
                '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
            )
        desc = (
            f'function "{tool_choice["function"]["name"]}"' if isinstance(tool_choice, dict) else '"required"'
        )
        raise InvalidRequest(f"tool_choice={desc} requires --tool-call-parser to be set")
    if tool_choice == "auto" and not settings.enable_auto_tool_choice:
        raise InvalidRequest(
            '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
        )
    return tool_choice


def _params(params: Any) -> dict[str, Any]:
    return params if params else {"type": "object", "properties": {}}


def forced_schema(
    tool_choice: str | dict[str, Any], tools: list[dict[str, Any]] | None, parallel_tool_calls: bool | None
) -> dict[str, Any] | None:
    """JSON schema constraining the output for ``"required"`` / named choices, else ``None``."""
    if not tools or tool_choice in ("none", "auto"):
        return None
    by_name = {t["function"]["name"]: t["function"].get("parameters") for t in tools}
    if isinstance(tool_choice, dict):
        return _params(by_name[tool_choice["function"]["name"]])
    items = [
        {
            "properties": {"name": {"type": "string", "enum": [name]}, "parameters": _params(params)},
            "required": ["name", "parameters"],
        }
        for name, params in by_name.items()
    ]
    schema: dict[str, Any] = {"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": items}}
    if parallel_tool_calls is False:
        schema["maxItems"] = 1
    return schema
