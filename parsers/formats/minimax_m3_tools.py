"""``minimax_m3`` tool calls (MiniMax M3; vLLM 0.33 ``MinimaxM3Parser``).

Wire format: every structural tag is prefixed by the namespace ``]<]minimax[>[``::

    NS<tool_call>
    NS<invoke name="create_order">
    NS<user_id>42NS</user_id>
    NS<items>NS<item>NS<sku>book-001NS</sku>NS</item>NS</items>
    NS</invoke>
    NS</tool_call>

* Each ``invoke`` is one call; parameters are elements named after the argument and nest: an
  element holding child elements is an object (repeated names collect into a list); leaf text
  is JSON-decoded when it parses (numbers, booleans), else a string. Calls are emitted whole
  when the block closes.
* Not modelled: vLLM turns an element into an array when the tool's schema says ``array``
  (the chat template renders list items as ``<item>``); here it stays an object
  (``{"item": ...}``, as vLLM without a schema).
"""

from __future__ import annotations

import json
import re
from typing import Any

from .json_factory import atomic_tool_spec

NS = "]<]minimax[>["
_N = re.escape(NS)
_INVOKE = re.compile(_N + r"""<invoke name=["']?([^"'>]*)["']?>(.*?)(?:""" + _N + r"</invoke>|$)", re.DOTALL)
_OPEN = re.compile(_N + r"<([^/<>\s]+)>")
MAX_DEPTH = 128


def _leaf(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _elements(text: str, pos: int, depth: int) -> tuple[list[tuple[str, Any]], int]:
    """Elements from ``pos`` up to a closing tag or the end: ``([(name, value)], end)``."""
    out: list[tuple[str, Any]] = []
    while depth < MAX_DEPTH:
        m = _OPEN.search(text, pos)
        if m is None:
            return out, len(text)
        close = f"{NS}</"
        if 0 <= text.find(close, pos) < m.start():
            return out, text.find(close, pos)
        name, start = m.group(1), m.end()
        end_tag = f"{NS}</{name}>"
        lead = start
        while lead < len(text) and text[lead].isspace():
            lead += 1
        if _OPEN.match(text, lead) is not None:
            children, after = _elements(text, start, depth + 1)
            value: Any = _group(children)
        else:
            after = text.find(end_tag, start)
            after = len(text) if after < 0 else after
            value = _leaf(text[start:after])
        out.append((name, value))
        pos = after + len(end_tag) if text.startswith(end_tag, after) else after
        if pos >= len(text):
            return out, pos
    return out, pos


def _group(children: list[tuple[str, Any]]) -> Any:
    obj: dict[str, Any] = {}
    for name, value in children:
        if name in obj:
            prev = obj[name]
            obj[name] = (prev if isinstance(prev, list) else [prev]) + [value]
        else:
            obj[name] = value
    return obj


def parse(body: str) -> list[tuple[str, Any]] | None:
    """``[(name, arguments)]`` of a tool-call block, ``None`` when it holds no ``invoke``."""
    calls = []
    for m in _INVOKE.finditer(body):
        children, _ = _elements(m.group(2), 0, 0)
        calls.append((m.group(1), _group(children) if children else {}))
    return calls or None


SPEC = atomic_tool_spec("minimax_m3", (f"{NS}<tool_call>",), f"{NS}</tool_call>", parse)
