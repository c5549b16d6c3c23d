"""``minimax_m3`` tool calls (MiniMax M3; vLLM 0.33 ``MinimaxM3Parser``).

Wire format: every structural tag is prefixed by the namespace ``]<]minimax[>[``::

    NS<tool_call>
    NS<invoke name="create_order">
    NS<user_id>42NS</user_id>
    NS<items>NS<item>NS<sku>book-001NS</sku>NS</item>NS</items>
    NS</invoke>
    NS</tool_call>

* Each ``invoke`` is one call; parameters are elements named after the argument and nest.
* Values are typed from the tool's JSON schema as vLLM 0.33 does (its ``_convert_element``,
  measured with ``tools/record_parser_cases_with_vllm.py``): an element whose schema is an
  array is the list of its children's values (the chat template renders list items as
  ``<item>``), each typed by ``items``; any other element with children is an object (repeated
  names collect into a list), typed by ``properties``; leaf text is coerced to the schema's
  types (:func:`parsers.arguments.coerce_text`; an empty element of an array/object schema
  is ``[]``/``{}``); leaf text without a schema stays a string (``"42"``).
* Calls are emitted whole when the block closes (vLLM sends the name first, the arguments in
  one piece at the end).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from ..arguments import coerce_text, tool_types
from .json_factory import atomic_tool_spec

NS = "]<]minimax[>["
_N = re.escape(NS)
_INVOKE = re.compile(_N + r"""<invoke name=["']?([^"'>]*)["']?>(.*?)(?:""" + _N + r"</invoke>|$)", re.DOTALL)
_OPEN = re.compile(_N + r"<([^/<>\s]+)>")
MAX_DEPTH = 128


def _elements(text: str, pos: int, depth: int) -> tuple[list[tuple[str, Any]], int]:
    """Elements from ``pos`` up to a closing tag or the end: ``([(name, value)], end)``, a value
    being the leaf text or the list of its ``(name, value)`` children."""
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
            value: Any = children
        else:
            after = text.find(end_tag, start)
            after = len(text) if after < 0 else after
            value = text[start:after]
        out.append((name, value))
        pos = after + len(end_tag) if text.startswith(end_tag, after) else after
        if pos >= len(text):
            return out, pos
    return out, pos


def _container(schema: dict[str, Any] | None) -> str | None:
    """``"array"`` / ``"object"`` when the compact schema allows one (array first)."""
    if schema is None:
        return None
    for kind in ("array", "object"):
        if kind in schema["t"]:
            return kind
    return "array" if "i" in schema else "object" if "p" in schema else None


def _convert(value: Any, schema: dict[str, Any] | None) -> Any:
    """One element's value (leaf text or children) typed by its compact schema."""
    container = _container(schema)
    if isinstance(value, str):
        if schema is None:
            return value
        if container is not None and "string" not in schema["t"] and not value.strip():
            return [] if container == "array" else {}
        return coerce_text(value, schema["t"])
    if container == "array":
        return [_convert(child, (schema or {}).get("i")) for _, child in value]
    return _object(value, (schema or {}).get("p"))


def _object(children: list[tuple[str, Any]], props: dict[str, Any] | None) -> dict[str, Any]:
    """Named children as an object; repeated names collect into a list."""
    obj: dict[str, Any] = {}
    repeated: set[str] = set()
    for name, child in children:
        value = _convert(child, (props or {}).get(name))
        if name not in obj:
            obj[name] = value
        elif name in repeated:
            obj[name].append(value)
        else:
            obj[name] = [obj[name], value]
            repeated.add(name)
    return obj


def parse(body: str, ctx: Any = None) -> list[tuple[str, Any]] | None:
    """``[(name, arguments)]`` of a tool-call block, ``None`` when it holds no ``invoke``;
    ``ctx`` is the request's :func:`parsers.arguments.tool_types` (schema typing)."""
    params = (ctx or {}).get("params") or {}
    calls = []
    for m in _INVOKE.finditer(body):
        children, _ = _elements(m.group(2), 0, 0)
        calls.append((m.group(1), _object(children, params.get(m.group(1)))))
    return calls or None


SPEC = dataclasses.replace(
    atomic_tool_spec("minimax_m3", (f"{NS}<tool_call>",), f"{NS}</tool_call>", parse, typed=True),
    tool_context=tool_types,
)
