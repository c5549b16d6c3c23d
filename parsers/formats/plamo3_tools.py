"""``plamo3`` tool calls (PLaMo 3; vLLM 0.33 ``Plamo3EngineToolParser``).

Wire format (special tokens)::

    <|plamo:begin_tool_requests:plamo|>
    <|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>get_weather<|plamo:end_tool_name:plamo|>
    <|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>{"city": "Paris"}
    <|plamo:end_tool_arguments:plamo|>
    <|plamo:end_tool_request:plamo|>
    <|plamo:end_tool_requests:plamo|>

* Arguments are the JSON text between the arguments markers (``{}`` when empty); calls are
  emitted whole when the requests block closes. Content before the block is kept.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .json_factory import atomic_tool_spec

_P = r"<\|plamo:{}:plamo\|>"
_REQUEST = re.compile(
    _P.format("begin_tool_name") + r"(.*?)" + _P.format("end_tool_name") + r".*?"
    + _P.format("begin_tool_arguments") + r"(?:<\|plamo:constrain\|>json<\|plamo:msg\|>)?(.*?)"
    + r"(?:" + _P.format("end_tool_arguments") + r"|$)",
    re.DOTALL,
)


def parse(body: str) -> list[tuple[str, Any]] | None:
    """``[(name, arguments JSON text)]`` of a requests block, ``None`` when it holds no call."""
    calls: list[tuple[str, Any]] = []
    for m in _REQUEST.finditer(body):
        raw = m.group(2).strip() or "{}"
        try:
            calls.append((m.group(1).strip(), json.loads(raw)))
        except ValueError:
            calls.append((m.group(1).strip(), raw))
    return calls or None


SPEC = atomic_tool_spec(
    "plamo3",
    ("<|plamo:begin_tool_requests:plamo|>",),
    "<|plamo:end_tool_requests:plamo|>",
    parse,
)
