"""``kimi_k3`` tool calls (Kimi K3 XTML; vLLM 0.33 ``KimiK3ToolParser``).

Wire format (``<|open|>``, ``<|close|>``, ``<|sep|>`` are special tokens)::

    <|open|>response<|sep|>answer<|close|>response<|sep|>
    <|open|>tools<|sep|>
      <|open|>call tool="python" index="1"<|sep|>
        <|open|>argument key="code" type="string"<|sep|>print(1)<|close|>argument<|sep|>
      <|close|>call<|sep|>
    <|close|>tools<|sep|>

* The ``response`` channel framing is dropped, its text is content.
* Arguments: ``type="string"`` values are verbatim, others JSON-decoded when they parse.
  Calls are emitted whole when the ``tools`` channel closes.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .json_factory import atomic_tool_spec

_CALL = re.compile(
    r'<\|open\|>call\s+tool="([^"]*)"[^<]*<\|sep\|>(.*?)(?:<\|close\|>call<\|sep\|>|$)', re.DOTALL
)
_ARG = re.compile(
    r'<\|open\|>argument\s+key="([^"]*)"(?:\s+type="([^"]*)")?[^<]*<\|sep\|>(.*?)<\|close\|>argument<\|sep\|>',
    re.DOTALL,
)


def _value(raw: str, kind: str | None) -> Any:
    if kind == "string":
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def parse(body: str) -> list[tuple[str, Any]] | None:
    """``[(name, arguments)]`` of a ``tools`` channel, ``None`` when it holds no call."""
    calls = [
        (m.group(1), {key: _value(raw, kind) for key, kind, raw in _ARG.findall(m.group(2))})
        for m in _CALL.finditer(body)
    ]
    return calls or None


SPEC = atomic_tool_spec(
    "kimi_k3",
    ("<|open|>tools<|sep|>",),
    "<|close|>tools<|sep|>",
    parse,
    drops=("<|open|>response<|sep|>", "<|close|>response<|sep|>"),
)
