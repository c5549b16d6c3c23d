"""``hf`` and ``beam``: parsers built from the checkpoint's own ``response_template`` metadata
(``tokenizer_config.json``; vLLM 0.33 ``ResponseTemplateReasoningParser`` /
``ResponseTemplateToolParser`` / ``BeamParser``).

The metadata describes the assistant message as fields with literal anchors, e.g.::

    {"version": 1, "start_anchor": "<|assistant|>",
     "fields": {"thinking": {"open": "<think>", "close": "</think>"},
                "content": {},
                "tool_calls": {"open": "<tool_call>", "close": "</tool_call>",
                               "content": "json", "repeats": true}}}

From it we build ordinary specs over the one engine:

* ``thinking`` with ``open``/``close`` literals (a string or a list of equivalent ones) → a
  ``<think>``-style reasoning spec: the output starts in content, ``open`` opens reasoning,
  ``close`` ends it, the prompt's last anchor in the current turn decides (a template that
  prefills ``open``).
* ``tool_calls`` with literal anchors and ``"content": "json"`` → calls held until ``close``,
  a JSON object or array of ``{"name", "arguments"|"parameters"}`` objects; text outside is
  content; a block that is not such JSON is content (never lost).

Errors (a clear start-up error, never a request-time 500): the model folder has no
``response_template``; a field uses regex anchors (``open_pattern``), a content parser other
than ``text``/``json``, or ``transform`` (not supported here).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..spec import FormatSpec
from .json_factory import atomic_tool_spec
from .think_factory import CONTENT_MODE, prompt_decides, think_spec

#: A tokenizer config with the example template above (docs and tests).
EXAMPLE_CONFIG: Mapping[str, Any] = {
    "response_template": {
        "version": 1,
        "start_anchor": "<|assistant|>",
        "fields": {
            "thinking": {"open": "<think>", "close": "</think>"},
            "content": {},
            "tool_calls": {
                "open": "<tool_call>", "close": "</tool_call>", "content": "json", "repeats": True
            },
        },
    }
}

_UNSUPPORTED = ("open_pattern", "close_pattern", "transform", "transform_each")


def template_of(tokenizer_config: Mapping[str, Any] | None, name: str) -> Mapping[str, Any]:
    """The ``response_template`` dict of a tokenizer config.

    Raises:
        ValueError: no ``response_template`` (the model does not describe its output format).
    """
    template = (tokenizer_config or {}).get("response_template")
    if not isinstance(template, Mapping):
        raise ValueError(
            f"parser {name!r} needs the model's response_template metadata "
            "(tokenizer_config.json 'response_template'); this model folder has none"
        )
    return template


def _literals(field: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    bad = [k for k in _UNSUPPORTED if k in field]
    if bad:
        raise ValueError(f"response_template field {where!r}: {', '.join(bad)} not supported")
    raw = field.get(key)
    values = (raw,) if isinstance(raw, str) else tuple(raw or ())
    if not values or not all(isinstance(v, str) and v for v in values):
        raise ValueError(f"response_template field {where!r} needs literal {key!r} anchors")
    return values


def _calls(body: str) -> list[tuple[str, Any]] | None:
    try:
        value = json.loads(body)
    except ValueError:
        return None
    items = value if isinstance(value, list) else [value]
    calls: list[tuple[str, Any]] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return None
        args = item.get("arguments", item.get("parameters", {}))
        calls.append((item["name"], args))
    return calls


def build(kind: str, name: str, tokenizer_config: Mapping[str, Any] | None) -> FormatSpec | None:
    """The ``kind`` (``"reasoning"``/``"tool"``) spec the template describes, or ``None`` when the
    template has no such field (the output then has no reasoning / no tool calls).

    Raises:
        ValueError: missing or unsupported metadata (see the module docstring).
    """
    fields = template_of(tokenizer_config, name).get("fields") or {}
    if kind == "reasoning":
        field = fields.get("thinking")
        if field is None:
            return None
        return think_spec(
            name,
            start=_literals(field, "open", "thinking"),
            end=_literals(field, "close", "thinking"),
            reopen=True,
            drop_stray_end=True,
            choose_mode=prompt_decides(CONTENT_MODE),
        )
    field = fields.get("tool_calls")
    if field is None:
        return None
    if field.get("content", "text") != "json":
        raise ValueError("response_template field 'tool_calls': only the 'json' content parser is supported")
    ends = _literals(field, "close", "tool_calls")
    return atomic_tool_spec(name, _literals(field, "open", "tool_calls"), ends[0], _calls)
