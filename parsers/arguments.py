"""Shared argument converters for XML-style and pythonic tool calls.

* **Tool context** (:func:`tool_types`): the request's ``tools`` reduced, once per request, to
  the part parsing needs: ``{"names": [declared names], "params": {name: {param: types}}}``
  where ``types`` is a compact schema ``{"t": [json types], "p": {nested props}, "i": items}``.
  It is the ``FormatSpec.tool_context`` of the XML formats, so later chunks need no request.
* **Schema coercion** (:func:`coerce`): a raw XML string value (or an already decoded JSON
  value) converted to the parameter's JSON-schema type. Rules (vLLM 0.33
  ``coerce_to_schema_type`` / ``ParserEngine._coerce_value`` behaviour, parsers.md section 9.4):
  candidate types are tried in the order null, integer, number, boolean, object, array,
  string; the first that converts wins; a value that fits none is JSON-decoded if possible,
  else kept as the raw string (BR35: ``"2026-01-15"`` for an integer stays a string). A
  parameter without schema stays a string (BR36: zip code ``"03106"``). Deliberate
  difference: an object/array decoded from text is coerced by its nested ``properties`` /
  ``items`` too (vLLM recurses only into values that arrive already decoded).
* **Pythonic literals** (:func:`python_literal`): the source text of one keyword-argument value
  (``'x'``, ``[1, 2]``, ``{'a': None}``, ``{'a', 'b'}``) to a JSON value via :mod:`ast`:
  ``None``/``True``/``False`` and also ``null``/``true``/``false`` (olmo3), tuples and sets
  become arrays, negative numbers allowed. Raises ``ValueError`` for anything else.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

_ALIASES = {
    "str": "string", "text": "string", "varchar": "string", "char": "string", "enum": "string",
    "int": "integer", "int32": "integer", "int64": "integer", "uint": "integer", "uint32": "integer",
    "uint64": "integer", "long": "integer", "short": "integer", "unsigned": "integer",
    "float": "number", "float32": "number", "float64": "number", "double": "number",
    "bool": "boolean", "dict": "object", "arr": "array", "list": "array", "sequence": "array",
}  # fmt: skip
_ORDER = ("null", "integer", "number", "boolean", "object", "array", "string")
_ENUM_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
               (list, "array"), (dict, "object"))  # fmt: skip


def tool_types(tools: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    """Compact tool context: declared names and per-parameter compact schemas.

    Accepts OpenAI tools (``{"type": "function", "function": {...}}``) and bare function
    objects (``{"name", "parameters"}``); entries without a name are ignored.
    """
    names: list[str] = []
    params: dict[str, dict[str, Any]] = {}
    for tool in tools or ():
        fn = tool.get("function", tool) if isinstance(tool, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            continue
        names.append(fn["name"])
        schema = fn.get("parameters")
        props = schema.get("properties") if isinstance(schema, Mapping) else None
        if isinstance(props, Mapping) and props:
            params[fn["name"]] = {k: compact(v) for k, v in props.items()}
    return {"names": names, "params": params}


def compact(schema: Any) -> dict[str, Any]:
    """Compact schema: ``t`` the possible JSON types (``["string"]`` when unknown), ``p``
    nested properties, ``i`` the items schema (only when present)."""
    out: dict[str, Any] = {"t": sorted(_types(schema)) or ["string"]}
    if isinstance(schema, Mapping):
        props = schema.get("properties")
        if isinstance(props, Mapping):
            out["p"] = {k: compact(v) for k, v in props.items()}
        if isinstance(schema.get("items"), Mapping):
            out["i"] = compact(schema["items"])
    return out


def _types(schema: Any) -> set[str]:
    if not isinstance(schema, Mapping):
        return set()
    found: set[str] = set()
    kind = schema.get("type")
    for t in [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else []:
        if isinstance(t, str):
            found.add(t)
    for value in schema.get("enum") or () if isinstance(schema.get("enum"), list) else ():
        found.add("null" if value is None else next(n for k, n in _ENUM_TYPES if isinstance(value, k)))
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list):
            for choice in schema[key]:
                found |= _types(choice) or {"string"}
    return found


def is_string_only(schema: Mapping[str, Any] | None) -> bool:
    """Whether a value of this parameter always serialises as a JSON string (so it may
    stream before it is closed): no schema, or a schema whose only type is string."""
    return schema is None or {_ALIASES.get(t.lower(), t.lower()) for t in schema["t"]} == {"string"}


def coerce(value: Any, schema: Mapping[str, Any] | None) -> Any:
    """Convert ``value`` (raw string or decoded JSON) to the compact ``schema``'s type."""
    if schema is None:
        return value
    if isinstance(value, str):
        value = coerce_text(value, schema["t"])
        return coerce(value, schema) if isinstance(value, (dict, list)) else value
    if isinstance(value, dict):
        props = schema.get("p")
        return {k: coerce(v, props.get(k)) for k, v in value.items()} if props else value
    if isinstance(value, list):
        items = schema.get("i")
        return [coerce(v, items) for v in value] if items else value
    return coerce_text(json.dumps(value), schema["t"])


def coerce_text(value: str, types: Sequence[str]) -> Any:
    """A raw string converted to the first of ``types`` (in priority order) it fits."""
    wanted = {_ALIASES.get(t.strip().lower(), t.strip().lower()) for t in types}
    for kind in _ORDER:
        if kind not in wanted:
            continue
        if kind == "string":
            return value
        ok, result = _TRY[kind](value)
        if ok:
            return result
    ok, result = json_value(value)
    return result if ok else value


def _null(value: str) -> tuple[bool, Any]:
    return value.lower() == "null", None


def _integer(value: str) -> tuple[bool, Any]:
    try:
        return True, int(value)
    except ValueError:
        return False, None


def _number(value: str) -> tuple[bool, Any]:
    ok, result = _integer(value)
    if ok:
        return ok, result
    try:
        num = float(value)
    except ValueError:
        return False, None
    if not math.isfinite(num):
        return False, None
    return True, int(num) if num == int(num) else num


def _boolean(value: str) -> tuple[bool, Any]:
    low = value.strip().lower()
    if low in ("true", "1", "false", "0"):
        return True, low in ("true", "1")
    return False, None


def json_value(value: str) -> tuple[bool, Any]:
    """Decode JSON text; non-finite numbers and nesting deeper than Python can recurse fail."""
    try:
        result = json.loads(value)
        return _finite(result), result
    except (ValueError, RecursionError):
        return False, None


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


_TRY = {"null": _null, "integer": _integer, "number": _number, "boolean": _boolean,
        "object": json_value, "array": json_value}  # fmt: skip


def dumps(value: Any) -> str:
    """JSON text as vLLM writes arguments (``json.dumps``, ``ensure_ascii=False``)."""
    return json.dumps(value, ensure_ascii=False)


# -- pythonic literals ------------------------------------------------------------------

_NAMES = {"None": None, "True": True, "False": False, "null": None, "true": True, "false": False}
_LEADING_ZEROS = re.compile(r"""('(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*")|(?<![\w.])0+(?=\d)""")


def python_literal(source: str) -> Any:
    """One pythonic argument value (source text) as a JSON value.

    Raises:
        ValueError: not a literal (names, calls, operators, syntax errors).
    """
    try:
        try:
            tree = ast.parse(source.strip(), mode="eval")
        except SyntaxError:
            tree = ast.parse(_LEADING_ZEROS.sub(lambda m: m.group(1) or "", source.strip()), mode="eval")
        return _literal(tree.body)
    except (SyntaxError, RecursionError, MemoryError) as exc:
        raise ValueError(f"not a python literal: {source[:80]!r}") from exc


def _literal(node: ast.expr) -> Any:
    if (
        isinstance(node, ast.Constant)
        and not isinstance(node.value, (bytes, complex))
        and node.value is not ...
    ):
        if isinstance(node.value, float) and not math.isfinite(node.value):
            raise ValueError("non-finite number")
        return node.value
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise ValueError("dict unpacking is not a literal")
        return {_key(_literal(k)): _literal(v) for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _literal(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    raise ValueError(f"not a literal: {ast.dump(node)[:80]}")


def _key(value: Any) -> str:
    """JSON object keys are strings (as ``json.dumps`` writes non-string keys)."""
    return value if isinstance(value, str) else json.dumps(value)
