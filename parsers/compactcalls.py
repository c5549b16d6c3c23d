"""Gemma-style compact tool calls: ``call:NAME{key:VALUE,...}`` between special tokens.

Used by ``gemma4`` (Gemma 4: ``<|tool_call>call:f{city:<|"|>Paris<|"|>}<tool_call|>``) and
``functiongemma`` (FunctionGemma: ``<start_function_call>call:f{city:<escape>Paris<escape>}
<end_function_call>``); source of the syntax: vLLM 0.33 ``vllm.parser.gemma4`` (its
``_parse_gemma4_args``) and ``FunctionGemmaToolParser``.

Values: a string between two ``quote`` delimiters (verbatim, may hold ``,`` ``}`` and quotes),
a nested ``{...}`` object, a ``[...]`` array, or a bare token (``true``/``false``/``null``,
numbers; any other bare token is a string). The call is atomic: the body is held until its
closing marker (or the end of the stream) and then emitted whole
(:class:`parsers.atomiccalls.AtomicCalls`); a body that is not ``call:NAME{...}`` is given back
verbatim, never lost.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

_CALL = re.compile(r"\s*(?:call)?:?\s*([\w.\-]+)\s*\{(.*)\}\s*", re.DOTALL)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


class _Malformed(ValueError):
    pass


def parse_compact(text: str, quote: str) -> dict[str, Any]:
    """The object ``key:value,...`` (without its braces) as a dict.

    Raises:
        ValueError: unbalanced brackets or an unterminated quoted string.
    """
    value, pos = _object(text, 0, quote, top=True)
    return value


def _object(text: str, i: int, quote: str, *, top: bool = False) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    n = len(text)
    while True:
        while i < n and text[i] in " \t\r\n,":
            i += 1
        if i >= n:
            if top:
                return out, i
            raise _Malformed("unterminated object")
        if text[i] == "}":
            if top:
                raise _Malformed("unbalanced }")
            return out, i + 1
        colon = text.find(":", i)
        if colon < 0:
            raise _Malformed("key without value")
        key = text[i:colon].strip()
        if key.startswith(quote) and key.endswith(quote) and len(key) >= 2 * len(quote):
            key = key[len(quote) : -len(quote)]
        out[key], i = _value(text, colon + 1, quote, "}" if not top else "")


def _value(text: str, i: int, quote: str, closer: str) -> tuple[Any, int]:
    n = len(text)
    while i < n and text[i] in " \t\r\n":
        i += 1
    if text.startswith(quote, i):
        end = text.find(quote, i + len(quote))
        if end < 0:
            raise _Malformed("unterminated string")
        return text[i + len(quote) : end], end + len(quote)
    if i < n and text[i] == "{":
        return _object(text, i + 1, quote)
    if i < n and text[i] == "[":
        items: list[Any] = []
        i += 1
        while True:
            while i < n and text[i] in " \t\r\n,":
                i += 1
            if i >= n:
                raise _Malformed("unterminated array")
            if text[i] == "]":
                return items, i + 1
            item, i = _value(text, i, quote, "]")
            items.append(item)
    j = i
    while j < n and text[j] not in ",}]":
        j += 1
    token = text[i:j].strip()
    return _bare(token), j


def _bare(token: str) -> Any:
    if token in ("true", "false"):
        return token == "true"
    if token in ("null", "None"):
        return None
    if _NUMBER.fullmatch(token):
        return json.loads(token)
    return token


def compact_call_parser(quote: str) -> Callable[[str], list[tuple[str, Any]] | None]:
    """A :class:`parsers.atomiccalls.AtomicCalls` parse function for ``call:NAME{...}`` bodies
    whose strings are delimited by ``quote``."""

    def parse(body: str) -> list[tuple[str, Any]] | None:
        m = _CALL.fullmatch(body)
        if m is None:
            return None
        try:
            return [(m.group(1), parse_compact(m.group(2), quote))]
        except ValueError:
            return None

    return parse
