"""Gemma-style compact tool calls: ``call:NAME{key:VALUE,...}`` between special tokens.

Used by ``gemma4`` (Gemma 4: ``<|tool_call>call:f{city:<|"|>Paris<|"|>}<tool_call|>``) and
``functiongemma`` (FunctionGemma: ``<start_function_call>call:f{city:<escape>Paris<escape>}
<end_function_call>``); source of the syntax: vLLM 0.33 ``vllm.parser.gemma4`` (its
``_parse_gemma4_args``) and ``FunctionGemmaToolParser``.

Values: a string between two ``quote`` delimiters (verbatim, may hold ``,`` ``}`` and quotes),
a nested ``{...}`` object, a ``[...]`` array, or a bare token (``true``/``false``/``null``,
numbers; any other bare token is a string). ``gemma4`` streams the arguments as they arrive
(:class:`CompactCalls`); ``functiongemma`` holds the call until its closing marker and emits it
whole (:class:`parsers.atomiccalls.AtomicCalls`, as vLLM 0.33 sends its arguments in one piece).
A body that is not ``call:NAME{...}`` is given back verbatim, never lost.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .spec import Event

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



#: The call header before the arguments' ``{``: ``call:NAME`` (``call`` and ``:`` optional).
_HEAD = re.compile(r"\s*(?:call)?:?\s*([\w.\-]+)\s*", re.DOTALL)
#: A header longer than this is not one: the block is given back as content (bounded state).
HEAD_LIMIT = 512
_SPACE = " \t\r\n"


@dataclass(frozen=True, slots=True)
class CompactCalls:
    """Streaming body handler for one ``call:NAME{key:VALUE,...}`` call (Gemma 4).

    The header is held until the arguments' ``{``; then the call is committed (its name sent)
    and the arguments stream as the JSON text ``json.dumps(parse_compact(...),
    ensure_ascii=False)`` gives, piece by piece: each key once its ``:`` arrives, a quoted
    string value as it arrives (a partial ``quote`` at the end is withheld), a bare value once
    it ends, a nested object or array once it closes (vLLM 0.33 ``vllm.parser.gemma4`` streams
    its converted JSON the same way). The body ends at the object's closing ``}``; text after
    it is the lexer's again.

    A header that is not ``call:NAME`` (or a block or stream that ends before ``{``) rejects
    the body: its text is given back as content. After the commit nothing is lost: at the end
    an open string is closed, a held bare value is typed, an unclosed nested value is
    converted if it parses, else sent as a string.

    State (JSON): ``raw`` held text until the commit (then ``None``), ``s`` phase (``head``,
    ``key``, ``val``, ``str``, ``nest``, ``bare``, ``done``), ``t`` held text of the phase,
    ``first`` (no key sent yet), nested scan ``nd`` depth / ``ns`` inside a string / ``ni``
    scan position in ``t``.
    """

    quote: str

    def start(self, marker: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """New body; the marker is kept so a rejected body gives back all its text."""
        return {"raw": marker, "s": "head", "t": "", "first": True, "nd": 0, "ns": False, "ni": 0}

    def feed(self, st: dict[str, Any], text: str) -> tuple[list[Event], int | None]:
        """Consume ``text``; see :class:`parsers.spec.BodyHandler`."""
        ev: list[Event] = []
        i = 0
        while i < len(text) and st["s"] != "done":
            phase = st["s"]
            if phase == "head":
                i = self._head(st, text, i, ev)
                if ev and ev[-1][0] == "reject":
                    return ev, i
            elif phase == "key":
                i = self._key(st, text, i, ev)
            elif phase == "val":
                i = self._value_start(st, text, i, ev)
            elif phase == "str":
                i = self._string(st, text, i, ev)
            elif phase == "nest":
                i = self._nested(st, text, i, ev)
            else:
                i = self._bare(st, text, i, ev)
        return ev, (i if st["s"] == "done" else None)

    def finish(self, st: dict[str, Any]) -> list[Event]:
        """End of the block or stream: reject an uncommitted body, else close the arguments."""
        phase, held = st["s"], st["t"]
        if phase == "head":
            return [("reject", st["raw"])]
        piece = ""
        if phase == "str":
            piece = _escaped(_strip_partial(held, self.quote)) + '"'
        elif phase == "nest":
            piece = _converted(held, self.quote)
        elif phase == "bare" or (phase == "val" and held):
            piece = json.dumps(_bare(held.strip()), ensure_ascii=False)
        elif phase == "val":
            piece = '""'
        elif phase == "key" and held.strip():
            piece = self._key_text(st, held) + '""'
        if phase == "done":
            return []
        st.update(s="done", t="")
        return [("args", piece + "}")]

    def _head(self, st: dict[str, Any], text: str, i: int, ev: list[Event]) -> int:
        brace = text.find("{", i)
        piece = text[i:] if brace < 0 else text[i:brace]
        st["t"] += piece
        st["raw"] += piece
        if brace < 0:
            if len(st["t"]) > HEAD_LIMIT:
                ev.append(("reject", st["raw"]))
            return len(text)
        m = _HEAD.fullmatch(st["t"])
        if m is None:
            ev.append(("reject", st["raw"]))
            return brace
        ev += [("name", m.group(1)), ("args", "{")]
        st.update(raw=None, s="key", t="")
        return brace + 1

    def _key(self, st: dict[str, Any], text: str, i: int, ev: list[Event]) -> int:
        """Key text up to ``:`` (separators before it skipped); ``}`` ends the object."""
        if not st["t"]:
            while i < len(text) and text[i] in _SPACE + ",":
                i += 1
            if i == len(text):
                return i
        stop = _first_of(text, i, ":}")
        st["t"] += text[i:stop]
        if stop == len(text):
            return stop
        key, st["t"] = st["t"], ""
        if text[stop] == "}":
            tail = self._key_text(st, key) + '""' if key.strip() else ""  # a key without a value
            ev.append(("args", tail + "}"))
            st["s"] = "done"
        else:
            ev.append(("args", self._key_text(st, key)))
            st["s"] = "val"
        return stop + 1

    def _key_text(self, st: dict[str, Any], raw: str) -> str:
        key, q = raw.strip(), self.quote
        if key.startswith(q) and key.endswith(q) and len(key) >= 2 * len(q):
            key = key[len(q) : -len(q)]
        sep = "" if st["first"] else ", "
        st["first"] = False
        return sep + json.dumps(key, ensure_ascii=False) + ": "

    def _value_start(self, st: dict[str, Any], text: str, i: int, ev: list[Event]) -> int:
        """Decide the value's kind from its first characters (a partial quote waits in ``t``)."""
        q = self.quote
        if not st["t"]:
            while i < len(text) and text[i] in _SPACE:
                i += 1
            if i == len(text):
                return i
        seen = st["t"] + text[i:]
        if seen.startswith(q):
            ev.append(("args", '"'))
            st.update(s="str", t="")
            return i + len(q) - (len(seen) - len(text[i:]))
        if q.startswith(seen):
            st["t"] = seen
            return len(text)
        if not st["t"] and text[i] in "{[":
            st.update(s="nest", t=text[i], nd=1, ns=False, ni=1)
            return i + 1
        st["s"] = "bare"  # ``t`` (a partial quote that was not one) is the bare value's start
        return i

    def _string(self, st: dict[str, Any], text: str, i: int, ev: list[Event]) -> int:
        """Quoted string text, streamed; a trailing partial quote is withheld."""
        q = self.quote
        seen = st["t"] + text[i:]
        end = seen.find(q)
        if end >= 0:
            ev.append(("args", _escaped(seen[:end]) + '"'))
            back = len(st["t"])
            st.update(s="key", t="")
            return i + end + len(q) - back
        kept = _strip_partial(seen, q)
        if kept:
            ev.append(("args", _escaped(kept)))
        st["t"] = seen[len(kept) :]
        return len(text)

    def _nested(self, st: dict[str, Any], text: str, i: int, ev: list[Event]) -> int:
        """Hold a nested object/array until its bracket closes (quoted text skipped)."""
        q = self.quote
        st["t"] += text[i:]
        held, j = st["t"], st["ni"]
        while j < len(held):
            if held.startswith(q, j):
                st["ns"] = not st["ns"]
                j += len(q)
                continue
            if len(held) - j < len(q) and q.startswith(held[j:]):
                break  # may be a quote: wait for more text
            c = held[j]
            j += 1
            if not st["ns"] and c in "{[":
                st["nd"] += 1
            elif not st["ns"] and c in "}]":
                st["nd"] -= 1
                if st["nd"] == 0:
                    ev.append(("args", _converted(held[:j], q)))
                    st.update(s="key", t="", ni=0)
                    return len(text) - (len(held) - j)
        st["ni"] = j
        return len(text)

    def _bare(self, st: dict[str, Any], text: str, i: int, ev: list[Event]) -> int:
        """A bare token up to ``,`` / ``}`` / ``]``, typed once it ends (``}`` ends the call)."""
        stop = _first_of(text, i, ",}]")
        st["t"] += text[i:stop]
        if stop == len(text):
            return stop
        value = json.dumps(_bare(st["t"].strip()), ensure_ascii=False)
        st["t"] = ""
        if text[stop] == "}":
            ev.append(("args", value + "}"))
            st["s"] = "done"
        else:
            ev.append(("args", value))
            st["s"] = "key"
        return stop + 1


def _first_of(text: str, i: int, chars: str) -> int:
    """Index of the first character of ``text[i:]`` in ``chars``, else ``len(text)``."""
    hits = [j for j in (text.find(c, i) for c in chars) if j >= 0]
    return min(hits, default=len(text))


def _strip_partial(text: str, quote: str) -> str:
    """``text`` without a trailing proper prefix of ``quote``."""
    for size in range(min(len(quote) - 1, len(text)), 0, -1):
        if quote.startswith(text[-size:]):
            return text[:-size]
    return text


def _escaped(text: str) -> str:
    """``text`` as the inside of a JSON string (``json.dumps(..., ensure_ascii=False)``)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _converted(raw: str, quote: str) -> str:
    """A nested ``{...}`` / ``[...]`` value (brackets included) as JSON; text that does not
    parse is sent as a JSON string (never lost)."""
    try:
        value, end = _value(raw, 0, quote, "")
    except ValueError:
        return json.dumps(raw, ensure_ascii=False)
    if raw[end:].strip():
        return json.dumps(raw, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False)
