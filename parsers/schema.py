"""Compact parameter-type information from a request's OpenAI ``tools`` list.

Formats whose arguments are text values (XML-like tags) coerce them with the declared JSON
schema type (vLLM 0.33 ``_cast_arguments`` / engine schema coercion). The parser state keeps
only ``{tool name: {parameter: type}}`` so it stays small and JSON-compatible.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any


def schema_types(tools: Iterable[Mapping[str, Any]] | None) -> dict[str, dict[str, str]]:
    """``{tool name: {parameter: JSON-schema type}}`` for the function tools given.

    A list type (``["integer", "null"]``) or ``anyOf`` gives its first non-null type;
    parameters without a type are left out (kept as strings by the coercion).
    """
    out: dict[str, dict[str, str]] = {}
    for tool in tools or ():
        fn = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            continue
        params = fn.get("parameters") or {}
        props = params.get("properties") if isinstance(params, Mapping) else None
        types = {}
        for key, prop in (props or {}).items():
            kind = _type_of(prop)
            if kind:
                types[key] = kind
        out[fn["name"]] = types
    return out


def _type_of(prop: Any) -> str | None:
    if not isinstance(prop, Mapping):
        return None
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind is None and isinstance(prop.get("anyOf"), list):
        kind = next((k for k in map(_type_of, prop["anyOf"]) if k and k != "null"), None)
    return kind if isinstance(kind, str) else None


def coerce(value: str, kind: str | None) -> Any:
    """A text value as the declared type; unparseable values stay strings.

    ``string`` → stripped text; ``integer``/``number`` → int/float; ``boolean`` → true/false
    (case-insensitive); ``null`` → None for ``"null"``; ``object``/``array`` → the JSON value
    when the text parses as one of that kind.
    """
    text = value.strip()
    try:
        if kind == "integer":
            return int(text)
        if kind == "number":
            return float(text)
    except ValueError:
        return text
    if kind == "boolean" and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if kind == "null" and text.lower() == "null":
        return None
    if kind in ("object", "array"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return text
        return parsed if isinstance(parsed, dict if kind == "object" else list) else text
    return text
