"""One incremental body handler for pythonic tool calls: ``[f(a=1, b='x'), g()]`` (pythonic,
llama4_pythonic, lfm2) or newline-separated ``f(a=1)\\ng(b=2)`` up to an end tag (olmo3).

Each keyword value's source text is scanned (strings, brackets) until its ``,`` or ``)`` and
then converted with :func:`parsers.arguments.python_literal` (``ast``). Streaming emits only
what cannot change (BR33): a call's name once its first argument is complete (or at ``)``),
then each complete argument as JSON text with ``json.dumps`` spacing, then ``}``. Joined
fragments equal ``json.dumps`` of the arguments dict.

Repairs applied while scanning (vLLM 0.33 lfm2 rewrites, parsers.md section 3): control
characters inside strings (raw newlines, NUL) are escaped; leading-zero integers are read as
decimals; keyword names may be Python keywords; sets become arrays; with ``nested_quotes`` a
quote equal to the opening one closes the string only when followed by ``,)]}:`` (so
``'sed -n '1,2p' f'`` is one string). ``true/false/null`` are accepted (olmo3).

A body that fails before any call was committed is rejected (its raw text becomes content);
after a committed call, the body ends at the failing element, whose raw text is given back as
content. State keys: ``ph`` phase, ``raw`` body text while nothing is committed, ``el`` raw text
of the current uncommitted element, ``name``, ``kw``, ``v`` value source, ``q``/``esc``/``d``/
``pq``/``pw`` value scanner, ``cm`` current call committed, ``nk`` arguments sent, ``commits``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .arguments import dumps, python_literal
from .spec import Event

_IDENT_START = re.compile(r"[^\W\d]", re.UNICODE)
_IDENT = re.compile(r"[\w.]*", re.UNICODE)
_WORD = re.compile(r"\w*", re.UNICODE)
_WS = " \t\r\n"
_CLOSERS = ",)]}:"
_FAIL, _WAIT = -1, -2
_STR_PLAIN = {"'": re.compile(r"[^'\\\x00-\x1f]+"), '"': re.compile(r'[^"\\\x00-\x1f]+')}


class PyCalls:
    """Body handler for pythonic calls (see module docstring).

    Options (``FormatSpec.body_options``):
        bracketed: calls form a list ``[...]`` (the body ends after ``]``); else calls are
            separated by whitespace and the body ends after ``end_tag``.
        end_tag: closing literal of an unbracketed body (olmo3 ``</function_calls>``).
        nested_quotes: the lfm2 nested-quote repair.
    """

    def start(self, marker: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """New body; a ``[`` marker means the list is already open."""
        bracketed = bool(options.get("bracketed", True))
        st: dict[str, Any] = {
            "br": bracketed,
            "et": options.get("end_tag"),
            "nq": bool(options.get("nested_quotes")),
            "ph": "call" if marker.endswith("[") or not bracketed else "open",
            "raw": marker,
            "el": "",
            "commits": 0,
            "tail": "",
        }
        _new_call(st)
        _pack(st)
        return st

    def feed(self, st: dict[str, Any], text: str) -> tuple[list[Event], int | None]:
        """Consume ``text``; see :class:`parsers.spec.BodyHandler`."""
        _unpack(st)
        try:
            return self._feed(st, text)
        finally:
            _pack(st)

    def finish(self, st: dict[str, Any]) -> list[Event]:
        """End of stream: close a committed call (a partial argument is dropped), else reject."""
        _unpack(st)
        try:
            if st["ph"] == "val" and st["pq"]:
                st["v"].append(st["q"] + st["pw"])
                st.update(q="", pq=False, pw="")
            if st["cm"]:
                return [("args", "}")]
            return _fail(st, st["tail"])
        finally:
            _pack(st)

    @staticmethod
    def _feed(st: dict[str, Any], text: str) -> tuple[list[Event], int | None]:
        ev: list[Event] = []
        buf = st["tail"] + text
        st["tail"] = ""
        i, n, old = 0, len(buf), len(buf) - len(text)
        while i < n:
            j = _STEP[st["ph"]](st, buf, i, ev)
            if j == _FAIL:
                return ev + _fail(st, buf[i:old]), max(0, i - old)
            if j == _WAIT:  # an end-tag prefix: wait for more text
                st["tail"] = buf[i:]
                return ev, None
            _track(st, buf[i:j])
            if st["ph"] == "done":
                return ev, j - old
            i = j
        return ev, None


#: Growing texts are lists while a step runs (appends stay O(piece)), strings in the state.
_GROWING = ("raw", "el", "v")


def _unpack(st: dict[str, Any]) -> None:
    for key in _GROWING:
        if isinstance(st[key], str):
            st[key] = [st[key]]


def _pack(st: dict[str, Any]) -> None:
    for key in _GROWING:
        if isinstance(st[key], list):
            st[key] = "".join(st[key])


def _new_call(st: dict[str, Any]) -> None:
    st.update(name="", kw="", v=[], q="", esc=False, d=0, pq=False, pw="", cm=False, nk=0, el=[])


def _track(st: dict[str, Any], consumed: str) -> None:
    """Keep raw text for rejection while nothing (or not this element) is committed."""
    if st["raw"] is not None:  # nothing committed yet: the whole body is the rejectable text
        st["raw"].append(consumed)
    elif not st["cm"]:
        st["el"].append(consumed)


def _fail(st: dict[str, Any], unread: str) -> list[Event]:
    """Unexpected text (or end of stream): reject everything when nothing was committed, else
    close the committed call / give back the uncommitted element; ``unread`` is held text
    that goes back as content too."""
    if st["commits"] == 0 and not st["cm"]:
        return [("reject", "".join(st["raw"]) + unread)]
    ev: list[Event] = [("args", "}")] if st["cm"] else []
    back = ("" if st["cm"] else "".join(st["el"])) + unread
    return ev + [("reject", back)] if back else ev


def _skip_ws(buf: str, i: int) -> int:
    while i < len(buf) and buf[i] in _WS:
        i += 1
    return i


def _expect(st: dict[str, Any], buf: str, j: int, char: str, phase: str) -> int:
    """After optional whitespace from ``j``, ``char`` switches to ``phase``; other text fails."""
    j = _skip_ws(buf, j)
    if j == len(buf):
        return j
    if buf[j] != char:
        return _FAIL
    st["ph"] = phase
    return j + 1


def _open(st: dict[str, Any], buf: str, i: int, ev: list[Event]) -> int:
    return _expect(st, buf, i, "[", "call")


def _call(st: dict[str, Any], buf: str, i: int, ev: list[Event]) -> int:
    """Between calls: a name starts a call; ``,`` separates; ``]`` / the end tag ends."""
    c = buf[i]
    if c in _WS or (c == "," and st["br"] and st["commits"]):
        return i + 1
    if _IDENT_START.match(c):
        _new_call(st)
        st["ph"] = "name"
        return i
    if st["br"] and c == "]" and st["commits"]:
        st["ph"] = "done"
        return i + 1
    et = st["et"]
    if et and not st["br"] and st["commits"]:
        if buf.startswith(et, i):
            st["ph"] = "done"
            return i + len(et)
        if et.startswith(buf[i:]):
            return _WAIT
    return _FAIL


def _name(st: dict[str, Any], buf: str, i: int, ev: list[Event]) -> int:
    m = _IDENT.match(buf, i)
    assert m is not None
    st["name"] += m.group()
    if m.end() < len(buf):
        st["ph"] = "paren"
    return m.end()


def _paren(st: dict[str, Any], buf: str, i: int, ev: list[Event]) -> int:
    return _expect(st, buf, i, "(", "kw")


def _kw(st: dict[str, Any], buf: str, i: int, ev: list[Event]) -> int:
    c = buf[i]
    if c in _WS or (c == "," and st["nk"]):
        return i + 1
    if c == ")":
        _end_call(st, ev)
        return i + 1
    if _IDENT_START.match(c):
        st.update(ph="kwname", kw="", v=[], q="", esc=False, d=0, pq=False, pw="")
        return i
    return _FAIL


def _kwname(st: dict[str, Any], buf: str, i: int, ev: list[Event]) -> int:
    m = _WORD.match(buf, i)
    assert m is not None
    st["kw"] += m.group()
    if m.end() < len(buf):
        st["ph"] = "eq"
    return m.end()


def _eq(st: dict[str, Any], buf: str, i: int, ev: list[Event]) -> int:
    return _expect(st, buf, i, "=", "val")


def _val(st: dict[str, Any], buf: str, i: int, ev: list[Event]) -> int:
    """Scan value source up to its ``,``/``)`` at depth 0 (one string run or char per step)."""
    c = buf[i]
    if st["q"]:
        return _in_string(st, buf, i)
    if c in "'\"":
        st["q"] = c
        st["v"].append(c)
    elif c in "([{":
        st["d"] += 1
        st["v"].append(c)
    elif c in ")]}" and st["d"]:
        st["d"] -= 1
        st["v"].append(c)
    elif c in ",)" and not st["d"]:
        if not _end_value(st, ev):
            return _FAIL
        if c == ")":
            _end_call(st, ev)
        else:
            st["ph"] = "kw"
    elif c in ")]}":
        return _FAIL
    else:
        st["v"].append(c)
    return i + 1


def _in_string(st: dict[str, Any], buf: str, i: int) -> int:
    c, q = buf[i], st["q"]
    if st["pq"]:  # nested-quote repair: is the previous quote a closer?
        if c in _WS:
            st["pw"] += c
            return i + 1
        closes = c in _CLOSERS
        st["v"].append((q if closes else "\\" + q) + st["pw"])
        st.update(pq=False, pw="", q="" if closes else q)
        return i  # reprocess c
    if st["esc"]:
        st["esc"] = False
        st["v"].append(c)
    elif c == "\\":
        st["esc"] = True
        st["v"].append(c)
    elif c == q:
        if st["nq"]:
            st["pq"] = True
        else:
            st["q"] = ""
            st["v"].append(c)
    elif c < " ":
        st["v"].append(repr(c)[1:-1])
    else:
        m = _STR_PLAIN[q].match(buf, i)
        assert m is not None
        st["v"].append(m.group())
        return m.end()
    return i + 1


def _end_value(st: dict[str, Any], ev: list[Event]) -> bool:
    try:
        value = python_literal("".join(st["v"]))
    except ValueError:
        return False
    piece = dumps(st["kw"]) + ": " + dumps(value)
    if not st["cm"]:
        _commit(st, ev)
        ev.append(("args", "{" + piece))
    else:
        ev.append(("args", ", " + piece))
    st["nk"] += 1
    return True


def _commit(st: dict[str, Any], ev: list[Event]) -> None:
    st.update(cm=True, raw=None, el=[])
    st["commits"] += 1
    ev.append(("name", st["name"]))


def _end_call(st: dict[str, Any], ev: list[Event]) -> None:
    if st["cm"]:
        ev.append(("args", "}"))
    else:
        _commit(st, ev)
        ev.append(("args", "{}"))
    st.update(cm=False, el=[], ph="call")


_STEP = {
    "open": _open,
    "call": _call,
    "name": _name,
    "paren": _paren,
    "kw": _kw,
    "kwname": _kwname,
    "eq": _eq,
    "val": _val,
}
