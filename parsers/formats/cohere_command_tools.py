"""``cohere_command3`` / ``cohere_command4`` tool calls (Command A family; vLLM 0.33
``CohereCommand3ToolParser`` / ``CohereCommand4ToolParser`` over ``cohere_melody``).

Wire format::

    <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather",
                      "parameters": {"city": "Paris"}}]<|END_ACTION|>

* A JSON array of actions (one object accepted too); ``tool_name`` and ``parameters``.
* Text outside actions is content (the reasoning spec drops the response framing); an action
  block that is not such an array is content, never lost. Calls are emitted whole.
"""

from __future__ import annotations

import json
from typing import Any

from .json_factory import atomic_tool_spec


def parse(body: str) -> list[tuple[str, Any]] | None:
    """``[(name, arguments)]`` of a Cohere action array, ``None`` if it is not one."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(a, dict) and "tool_name" in a for a in value):
        return None
    return [(str(a["tool_name"]), a.get("parameters") or {}) for a in value]


_FRAMING = ("<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>")
SPEC = atomic_tool_spec("cohere_command3", ("<|START_ACTION|>",), "<|END_ACTION|>", parse, drops=_FRAMING)
CMD4 = atomic_tool_spec("cohere_command4", ("<|START_ACTION|>",), "<|END_ACTION|>", parse, drops=_FRAMING)
