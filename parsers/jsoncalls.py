"""Incremental JSON tool-call bodies: ``{"name": .., "arguments": {..}}`` objects, arrays of
them, or a bare arguments value, streamed without re-parsing.

Used by hermes-style formats (``<tool_call>{json}</tool_call>``) and by vLLM's guided-JSON
forms of ``tool_choice``: ``required`` → ``[{"name": .., "parameters": {..}}, ..]``, named →
the whole output is the arguments object (source: vLLM 0.33 ``ToolParser`` required/named
paths, parsers.md section 1).

Streaming rules (parsers.md section 9, points 4 and 8):

* The name is sent once, complete, when the call is *committed*: the name string is closed
  and the arguments value has started (or the object closed without one → ``"{}"``). Until
  then the raw body is held so a body that turns out not to be a call (invalid JSON,
  truncated before the arguments) can be given back verbatim as content ("reject").
* Arguments are the raw JSON text of the value (spacing as generated), streamed as it
  arrives; only a bare scalar value is withheld until it ends. Joined fragments == batch.
* Structure is scanned with a string-aware character scanner, so a literal ``</tool_call>``
  inside a JSON string cannot end the call (BR26); ``<`` outside a string ends the body.

State keys (JSON-compatible): ``s`` scanner state, ``raw`` held text (``None`` once a call is
committed), ``key`` current key, ``esc`` escape flag, value scan ``vk/vd/vs/ve/sc``, current call
``name/sent/has/pend``, ``commits`` count, and the fixed options.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .spec import Event

_WS = " \t\r\n"
_STR_STOP = re.compile(r'["\\]')
_SCALAR_END = re.compile(r"[,}\]\s]")


class JsonCalls:
    """Body handler for JSON tool calls (see module docstring).

    Options (``FormatSpec.body_options`` or set by the facade for guided JSON):
        array: the body is a JSON array of call objects.
        name_key: key of the function name (``"name"``).
        args_keys: keys accepted for the arguments value.
        fixed_name: named tool choice: the body is the bare arguments value of this function.
        require_args: a call object without an arguments key is not a call (llama: rejected).
        decode_string_args: arguments given as a JSON *string* are the call's arguments text
            (withheld until the string ends, then decoded: ``"{\"a\": 1}"`` → ``{"a": 1}``), as
            vLLM mistral pre-v11, xlam and gigachat3 keep string arguments as they are.
            Without it a string argument is still withheld, and decoded once when it holds a
            JSON object (never double-encoded); other strings stay JSON strings.
        raw_args: object/array arguments are sent exactly as generated (spacing and escapes;
            vLLM 0.33 granite), instead of as vLLM's batch ``json.dumps(json.loads(..),
            ensure_ascii=False)`` writes them (see ``_normalise``).
        either: the body is one call object or an array of them (Cohere actions); ``array``
            is then decided by the body's first character.
        name_is_key: a call object is ``{NAME: ARGUMENTS}`` (Apertus): its first key is the
            function name and that key's value the arguments.
        close: text that must follow the JSON (after optional whitespace) for the body to be
            a call (granite4 ``</tool_call>``). The body's calls are then *atomic*: withheld
            until ``close`` arrives and emitted whole, and the body is rejected (its raw text
            becomes content) when anything else follows or the stream ends first.
    """

    def start(self, marker: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """New body state; ``marker`` is kept in ``raw`` so a rejected body loses no text."""
        fixed = options.get("fixed_name")
        st: dict[str, Any] = {
            "array": bool(options.get("array")),
            "nk": options.get("name_key", "name"),
            "ak": list(options.get("args_keys", ("arguments",))),
            "s": "val_pre" if fixed else "pre",
            "raw": marker,
            "key": "",
            "esc": False,
            "commits": 0,
            "req": bool(options.get("require_args")),
            "dec": bool(options.get("decode_string_args")),
            "raw_args": bool(options.get("raw_args")),
            "close": options.get("close"),
        }
        if st["close"]:
            st.update(cm=0, m0=len(marker), je=0)
        if options.get("either"):
            st["either"] = True
        if options.get("name_is_key"):
            st["nik"] = True
        _new_call(st)
        if fixed:
            st.update(name=fixed, key=st["ak"][0], fixed=True)
        return st

    def feed(self, st: dict[str, Any], text: str) -> tuple[list[Event], int | None]:
        """Scan ``text``; see :class:`parsers.spec.BodyHandler`."""
        if not st["close"]:
            return _feed(st, text)
        return _feed_atomic(st, text)

    def finish(self, st: dict[str, Any]) -> list[Event]:
        """End of stream: release a withheld scalar, or reject an uncommitted body."""
        ev: list[Event] = []
        if st["close"] or (st["commits"] == 0 and not st["sent"]):
            return [("reject", st["raw"] or "")]
        if st["sent"] and st["pend"]:
            ev.append(("args", st["pend"]))
            st["pend"] = ""
        return ev


def _feed(st: dict[str, Any], text: str) -> tuple[list[Event], int | None]:
    """The scanner: events for ``text`` and where the body ended (``None``: not yet)."""
    ev: list[Event] = []
    i, end = 0, None
    while i < len(text):
        s = st["s"]
        if s == "val":
            i = _value(st, text, i, ev)
            if st["s"] == "bad":
                return _stop(st, text, i, ev)
        elif s == "key":
            i = _key(st, text, i)
        elif text[i] in _WS:
            i += 1
        else:
            step = _structural(st, text[i], ev)
            if step == "ok":
                i += 1
                if st["s"] == "done":
                    end = i
                    break
            elif step == "value":
                st["s"] = "val"
            else:
                return _stop(st, text, i, ev)
    if st["raw"] is not None:
        st["raw"] += text[: len(text) if end is None else end]
    return ev, end


def _feed_atomic(st: dict[str, Any], text: str) -> tuple[list[Event], int | None]:
    """``close`` mode: scan the JSON (events discarded), then match the closing text; at the
    closer the kept raw JSON is scanned once more for the calls, emitted whole. The state
    holds only the raw text of the open call (no event queue)."""
    i = 0
    if st["s"] != "close":
        ev, end = _feed(st, text)
        if any(e[0] == "reject" for e in ev):
            return ev, end
        if end is None:
            return [], None
        st.update(s="close", je=len(st["raw"]))
        i = end
    close = st["close"]
    j = i
    while j < len(text):
        c = text[j]
        if st["cm"] == 0 and c in _WS:
            j += 1
        elif c == close[st["cm"]]:
            st["cm"] += 1
            j += 1
            if st["cm"] == len(close):
                return _rescan(st), j
        else:
            return [("reject", st["raw"] + text[i:j])], j
    st["raw"] += text[i:]
    return [], None


def _rescan(st: dict[str, Any]) -> list[Event]:
    """The calls of the complete JSON kept in ``raw`` (scanned by a fresh streaming state)."""
    options = {"array": st["array"], "name_key": st["nk"], "args_keys": st["ak"], "require_args": st["req"]}
    fresh = JsonCalls().start("", {**options, "decode_string_args": st["dec"]})
    events, _ = _feed(fresh, st["raw"][st["m0"] : st["je"]])
    return events


def _new_call(st: dict[str, Any]) -> None:
    st.update(name=None, sent=False, has=False, pend="", vk="", vd=0, vs=False, ve=False, sc=False, ds=False)


def _structural(st: dict[str, Any], c: str, ev: list[Event]) -> str:
    """One non-space character outside strings and values: ``ok``, ``value`` or ``bad``."""
    s = st["s"]
    if s == "pre":
        if st.get("either") and c in "[{":
            st["array"] = c == "["
        if c == ("[" if st["array"] else "{"):
            st["s"] = "elem" if st["array"] else "key_pre"
            return "ok"
    elif s == "elem":
        if c == "{":
            st["s"] = "key_pre"
            return "ok"
        if c == ",":
            return "ok"
        if c == "]" and st["commits"] > 0:  # an empty array is not a call: given back
            st["s"] = "done"
            return "ok"
    elif s == "key_pre":
        if c == '"':
            st.update(s="key", key="", esc=False)
            return "ok"
        if c == ",":
            return "ok"
        if c == "}":
            return "ok" if _close_object(st, ev) else "bad"
    elif s == "colon":
        if c == ":":
            st["s"] = "val_pre"
            return "ok"
    elif s == "val_pre":
        return _open_value(st, c, ev)
    return "bad"


def _open_value(st: dict[str, Any], c: str, ev: list[Event]) -> str:
    key = st["key"]
    if key == st["nk"] and st["name"] is None:
        if c != '"':
            return "bad"
        st.update(vk="name", pend_name="")
    elif key in st["ak"] and not st["has"]:
        st.update(vk="args", has=True, sc=c not in '{["', ds=c == '"', ns=False, nb="")
        if c not in "{[":  # objects/arrays commit once their first token is seen (_value)
            _maybe_commit(st, ev)
    else:
        st["vk"] = "skip"
    st.update(vd=0, vs=False, ve=False)
    return "value"


def _key(st: dict[str, Any], text: str, i: int) -> int:
    """Read key characters up to the closing quote; then expect ``:``."""
    while i < len(text):
        c = text[i]
        i += 1
        if st["esc"]:
            st["esc"] = False
        elif c == "\\":
            st["esc"] = True
        elif c == '"':
            st["key"] = _decode(st["key"])
            if st.get("nik") and st["name"] is None:  # {NAME: ARGUMENTS}
                st["name"], st["key"] = st["key"], st["ak"][0]
            st["s"] = "colon"
            return i
        st["key"] += c
    return i


def _decode(raw: str) -> str:
    try:
        return str(json.loads(f'"{raw}"'))
    except ValueError:
        return raw


def _value(st: dict[str, Any], text: str, i: int, ev: list[Event]) -> int:
    """Consume value characters from ``text[i:]``; return the new index."""
    start = i
    if st["vk"] != "name" and st["vd"] == 0 and not st["vs"] and (st["sc"] or text[i] not in '{["'):
        st["sc"] = True
        m = _SCALAR_END.search(text, i)
        i = m.start() if m else len(text)
        done = m is not None
    elif st["vk"] == "args" and not st["sent"] and not st["sc"] and st["name"] is not None:
        # an uncommitted object/array: scanned only up to the token that decides whether it is
        # JSON, so a rejected body ends at its offending character whatever the chunking (the
        # text after it is scanned again for markers and calls: stream == batch)
        i, done = _scan_nested(st, text, i, _deciding_end(st["pend"], text, i))
        _value_out(st, text[start:i], ev)
        start = i
        ok = _first_token_ok(st["pend"])
        if ok is False:
            st["s"] = "bad"
            return i - 1  # the offending character is text again
        if ok and not done:
            i, done = _scan_nested(st, text, i)
    else:
        i, done = _scan_nested(st, text, i)
    _value_out(st, text[start:i], ev)
    if st["vk"] == "args" and not st["sent"] and not st["sc"] and st["name"] is not None:
        if _first_token_ok(st["pend"]):
            _maybe_commit(st, ev)
    if done:
        _value_done(st, ev)
    return i


def _first_token_ok(pend: str) -> bool | None:
    """Whether an object/array arguments value starts like JSON (``{"``, ``{}``, ``[1`` ...):
    the call is committed only then, so ``{invalid json}`` is rejected before its name is
    sent (vLLM batch: invalid JSON → content). ``None``: not known yet."""
    body = pend.lstrip()
    if body[:1] not in ("{", "["):
        return True
    rest = body[1:].lstrip()
    if not rest:
        return None
    return rest[0] in ('"}' if body[0] == "{" else '{["-0123456789tfn]')


def _deciding_end(pend: str, text: str, i: int) -> int:
    """Index just past the character of ``text[i:]`` that decides :func:`_first_token_ok` for
    arguments whose held text is ``pend`` (the opening bracket, then the first token after
    whitespace), or ``len(text)`` when this text does not decide it."""
    bracket = not pend.strip()
    for j in range(i, len(text)):
        if text[j] in _WS:
            continue
        if not bracket:
            return j + 1
        bracket = False
    return len(text)


def _scan_nested(st: dict[str, Any], text: str, i: int, n: int | None = None) -> tuple[int, bool]:
    """Scan a string/object/array value in ``text[i:n]`` (``n`` defaults to the end of the
    text); return (index, value finished)."""
    n = len(text) if n is None else n
    while i < n:
        if st["vs"]:
            if st["ve"]:
                st["ve"] = False
                i += 1
                continue
            m = _STR_STOP.search(text, i, n)
            if m is None:
                return n, False
            i = m.end()
            if m.group() == "\\":
                st["ve"] = True
                continue
            st["vs"] = False
            if st["vd"] == 0:
                return i, True
            continue
        c = text[i]
        i += 1
        if c == '"':
            st["vs"] = True
        elif c in "{[":
            st["vd"] += 1
        elif c in "}]":
            st["vd"] -= 1
            if st["vd"] == 0:
                return i, True
    return i, False


def _value_out(st: dict[str, Any], piece: str, ev: list[Event]) -> None:
    if not piece:
        return
    if st["vk"] == "name":
        st["pend_name"] += piece
    elif st["vk"] == "args":
        if not st["sc"] and not st["ds"] and not st.get("fixed") and not st["raw_args"]:
            piece = _normalise(st, piece)  # a bare arguments value (named choice): verbatim
        if st["sent"] and not st["sc"] and not st["ds"]:
            ev.append(("args", piece))
        else:
            st["pend"] += piece


def _normalise(st: dict[str, Any], piece: str) -> str:
    """Object/array arguments text re-written as ``json.dumps(..., ensure_ascii=False)`` writes
    it after ``json.loads`` (vLLM 0.33's batch): ``", "`` and ``": "`` separators, no other
    whitespace outside strings, and inside strings each escape in its canonical form
    (``\\u00fc`` → ``ü``, a ``\\ud83d\\ude00`` pair → one character, ``\\/`` → ``/``,
    ``\\u000a`` → ``\\n``; ``\\"``, ``\\\\`` and control characters stay escaped). Incremental
    (``ns``: inside a string, ``nb``: an escape not yet complete, at most 12 characters), so
    streamed fragments join to the batch result."""
    out: list[str] = []
    for i, c in enumerate(piece):
        if st["ns"]:
            if st["nb"] or c == "\\":
                st["nb"] += c
                text, rest = _unescape(st["nb"])
                if text is None:
                    continue
                out.append(text)
                st["nb"] = ""
                if rest:  # not part of the escape after all: read again as string text
                    out.append(_normalise(st, rest + piece[i + 1 :]))
                    break
            elif c == '"':
                st["ns"] = False
                out.append(c)
            else:
                out.append(c)
        elif c == '"':
            st["ns"] = True
            out.append(c)
        elif c in _WS:
            continue
        elif c in ",:":
            out.append(c + " ")
        else:
            out.append(c)
    return "".join(out)


#: ``json.dumps(..., ensure_ascii=False)`` forms of the one-character JSON escapes.
_SIMPLE_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "/"} | {k: "\\" + k for k in "bfnrt"}
_HEX = frozenset("0123456789abcdefABCDEF")


def _unescape(buf: str) -> tuple[str | None, str]:
    """The canonical form of the escape at the start of ``buf`` (``\\`` + at least one
    character) and the text after it, or ``(None, "")`` while it may still grow. Malformed
    escapes and lone surrogates stay as written."""
    if len(buf) < 2:
        return None, ""
    if buf[1] != "u":
        return _SIMPLE_ESCAPES.get(buf[1], buf[:2]), buf[2:]
    bad = next((i for i in range(2, min(len(buf), 6)) if buf[i] not in _HEX), None)
    if bad is not None:
        return buf[:bad], buf[bad:]
    if len(buf) < 6:
        return None, ""
    code = int(buf[2:6], 16)
    if 0xD800 <= code < 0xDC00:  # a high surrogate: one character with the low one after it
        tail = buf[6:12]
        if not "\\u".startswith(tail[:2]) or any(ch not in _HEX for ch in tail[2:]):
            return buf[:6], buf[6:]
        if len(buf) < 12:
            return None, ""
        low = int(buf[8:12], 16)
        if not 0xDC00 <= low < 0xE000:
            return buf[:6], buf[6:]
        return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)), buf[12:]
    if 0xDC00 <= code < 0xE000:
        return buf[:6], buf[6:]
    return json.dumps(chr(code), ensure_ascii=False)[1:-1], buf[6:]


def _value_done(st: dict[str, Any], ev: list[Event]) -> None:
    kind = st["vk"]
    if kind == "args" and st["ds"]:
        st["pend"] = _decode_string(st["pend"]) if st["dec"] else _string_object(st["pend"])
    st.update(s="key_pre", vk="", key="", sc=False, ds=False)
    if kind == "name":
        try:
            name = json.loads(st.pop("pend_name"))
        except ValueError:
            name = None
        st["name"] = name if isinstance(name, str) else None
        _maybe_commit(st, ev)
    elif kind == "args" and not st["sent"]:
        _maybe_commit(st, ev)
    elif kind == "args" and st["pend"]:
        ev.append(("args", st["pend"]))
        st["pend"] = ""
    if st.get("fixed"):
        st["s"] = "done"


def _decode_string(raw: str) -> str:
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if isinstance(value, str) else raw


def _string_object(raw: str) -> str:
    """Arguments emitted as a JSON string holding a JSON object (``"{\"a\": 1}"``, Granite and
    others): the object's text, decoded once, so the call's arguments are that object and not a
    double-encoded string. Any other string stays the JSON string it was."""
    text = _decode_string(raw)
    if text is raw:
        return raw
    try:
        value = json.loads(text)
    except ValueError:
        return raw
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else raw


def _maybe_commit(st: dict[str, Any], ev: list[Event]) -> None:
    """Send the name (and any withheld arguments) once both are known to be a call."""
    if st["sent"] or st["name"] is None or not st["has"]:
        return
    st["sent"] = True
    st["commits"] += 1
    if not st["close"]:
        st["raw"] = None
    ev.append(("name", st["name"]))
    if st["pend"] and not st["sc"]:
        ev.append(("args", st["pend"]))
        st["pend"] = ""


def _close_object(st: dict[str, Any], ev: list[Event]) -> bool:
    """``}`` of a call object: commit a call without arguments as ``{}``."""
    if st["name"] is None or (st["req"] and not st["has"]):
        return False
    if not st["sent"]:
        st["has"] = True
        _maybe_commit(st, ev)
        ev.append(("args", "{}"))
    st["s"] = "elem" if st["array"] else "done"
    _new_call(st)
    return True


def _stop(st: dict[str, Any], text: str, i: int, ev: list[Event]) -> tuple[list[Event], int]:
    """Unexpected character at ``text[i]``: reject an uncommitted body, else end it here."""
    if st["close"] or (st["commits"] == 0 and not st["sent"]):
        return [("reject", (st["raw"] or "") + text[:i])], i
    if st["sent"] and st["pend"]:
        ev.append(("args", st["pend"]))
        st["pend"] = ""
    return ev, i
