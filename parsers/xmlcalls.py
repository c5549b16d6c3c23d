"""One incremental body handler for XML-style tool calls, configured by small tag specs.

Families (parsers.md sections 3 and 9): qwen3_coder/qwen3_xml/step3p5/seed_oss
(``<function=F><parameter=K>V</parameter></function>``), glm45/glm47
(``NAME<arg_key>K</arg_key><arg_value>V</arg_value>``), minimax_m2
(``<invoke name="F"><parameter name="K">V</parameter></invoke>``) and DeepSeek DSML
(``<｜DSML｜invoke name="F"><｜DSML｜parameter name="K" string="true">V</｜DSML｜parameter>``).

The body is the text after the block's start marker up to ``XmlTags.block_end``. Tags are
``HEAD attrs >``; a tag split over chunks waits in ``buf`` (bounded by ``MAX_TAG``). Arguments
are built as JSON text with ``json.dumps`` spacing (``{"k": v, "k2": v2}``) and streamed:

* the name (with ``{``) once the call opener is complete; calls to undeclared tools are
  dropped when ``XmlTags.validate`` (GLM, MiniMax);
* a value that is always a JSON string (no schema or a string-only schema, no JSON decoding)
  streams as JSON-escaped fragments as it arrives; a held trailing newline or partial closing
  tag is withheld until it is known; other values are held and emitted converted
  (:func:`parsers.arguments.coerce`) when the value closes;
* only a value's own closing tag (or the next parameter opener) ends it: a block closer, call
  closer or call opener inside a value is value text when the closing tag follows
  (``</minimax:tool_call>`` in a string, ``</tool_call>`` in code being written); a value
  never closed ends at the first of them at the end of the stream; an unclosed call is
  closed by the next call opener or the block end; at end of stream both are closed.

A block in which no call opener appeared is rejected (its raw text becomes content). Text
between tags is ignored. State keys: ``buf``, ``ph`` phase, ``raw`` held raw text (``None`` once
a call opened), ``bare``, ``name`` (GLM name so far), call ``skip``/``types`` (this tool's
compact parameter schemas)/``nk`` (arguments sent), value ``key``/``dec`` (JSON-decode)/``st``
(streamed)/``go`` (first character seen)/``nl`` (held newline)/``val`` (held text)/``pend`` (DSML
wrapper held for unwrapping).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .arguments import coerce, dumps, is_string_only, json_value
from .spec import Event

MAX_TAG = 256
_NAME_END = re.compile(r"[\n<]")


@dataclass(frozen=True, slots=True)
class XmlTags:
    """Tag spec of one XML call family.

    Attributes:
        block_end: literal closing the block (the body ends after it).
        call_head: head of the call opener (``<function=``), or ``None`` when the call name is
            the text at the start of the block (GLM).
        call_attr: regex over the opener's attribute text; group 1..n: name alternatives.
        call_close: literal closing one call, or ``None`` (one call per block).
        param_head: head of a parameter opener (``<parameter=``, ``<arg_key>``).
        param_attr: regex over the parameter opener's attributes; group ``name`` and optional
            group ``string`` (DSML ``string="true|false"``).
        param_close: literal closing a value.
        key_close: GLM: the key is the text up to this literal, then ``value_open`` follows.
        value_open: GLM ``<arg_value>``.
        ignore: literals ignored inside the block (a nested block start).
        trim_newline: drop one leading and one trailing newline of each value (Qwen3).
        string_attr: values whose ``string`` attribute is not ``"true"`` are JSON-decoded.
        unwrap: lone wrapper parameter names unwrapped when undeclared (DSML).
        validate: drop calls to tools the request did not declare.
    """

    block_end: str
    call_head: str | None
    call_attr: str
    call_close: str | None
    param_head: str
    param_attr: str
    param_close: str
    key_close: str | None = None
    value_open: str | None = None
    ignore: tuple[str, ...] = ()
    trim_newline: bool = False
    string_attr: bool = False
    unwrap: tuple[str, ...] = ()
    validate: bool = False


def _alternation(literals: list[str]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(t) for t in sorted(set(literals), key=len, reverse=True)))


class XmlCalls:
    """Body handler for :class:`XmlTags` families (see module docstring). Stateless; the
    per-request tool context (:func:`parsers.arguments.tool_types`) comes with each call."""

    def __init__(self, tags: XmlTags) -> None:
        self.tags = tags
        self.call_attr = re.compile(tags.call_attr, re.DOTALL)
        self.param_attr = re.compile(tags.param_attr, re.DOTALL)
        opt = [t for t in (tags.call_head, tags.call_close) if t]
        heads = {
            "pre": opt + [tags.block_end, *tags.ignore],
            "args": opt + [tags.param_head, tags.param_close, tags.block_end, *tags.ignore],
            "vopen": [t for t in (tags.value_open, tags.param_head, tags.block_end) if t],
        }
        self.heads = {ph: sorted(set(hs), key=len, reverse=True) for ph, hs in heads.items()}
        ends = [tags.param_close, tags.param_head, tags.block_end] + opt
        self.value_end = _alternation(ends)
        self.value_prefixes = frozenset(t[:i] for t in ends for i in range(1, len(t)))
        self.key_end = _alternation([tags.key_close or tags.block_end, tags.block_end])

    def start(self, marker: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """New body; a marker that is the call head itself starts a bare call (no block)."""
        bare = self.tags.call_head is not None and marker == self.tags.call_head
        ph = "name" if self.tags.call_head is None else "pre"
        st = {"buf": marker if bare else "", "ph": ph, "raw": marker, "bare": bare}
        st.update(skip=True, types=None, nk=0, key=None, dec=False, st=False, go=False, nl=False)
        st.update(val="", pend=None, name="", wait=None)
        return st

    def feed(self, st: dict[str, Any], text: str, ctx: Any = None) -> tuple[list[Event], int | None]:
        """Consume ``text``; see :class:`parsers.spec.BodyHandler`."""
        ev: list[Event] = []
        old = len(st["buf"])
        st["buf"] += text
        full = st["buf"]
        end = self._run(st, ev, ctx or {}, final=False)
        if end is None:
            if st["raw"] is not None:
                st["raw"] += text
            return ev, None
        cut = end - old
        if cut < 0:  # the block ended inside text an earlier feed buffered: give it back
            ev.append(("back", full[end:old]))
            cut = 0
        if st["raw"] is not None:
            ev.append(("reject", st["raw"] + text[:cut]))
        return ev, cut

    def finish(self, st: dict[str, Any], ctx: Any = None) -> list[Event]:
        """End of stream: the rest is value text / junk; close the value and the call."""
        ev: list[Event] = []
        buf = st["buf"]
        end = self._run(st, ev, ctx or {}, final=True)
        rest = buf[end:] if end is not None else ""
        if st["ph"] == "name":
            self._open_call(st, st["name"] + st["buf"], ev, ctx or {})
        elif st["ph"] == "val":
            self._value_text(st, st["buf"], ev)
        st["buf"] = ""
        self._close_call(st, ev)
        if st["raw"] is not None:
            ev.append(("reject", st["raw"] + rest))
        elif rest:  # text after a block that waited for a value's closing tag: lexed again
            ev.append(("back", rest))
        return ev

    # -- scanning ------------------------------------------------------------------------

    def _run(self, st: dict[str, Any], ev: list[Event], ctx: Any, final: bool) -> int | None:
        """Process ``buf``; return the index in it where the body ended, else ``None``."""
        pos = 0
        while True:
            ph = st["ph"]
            if ph == "val":
                pos, more = self._scan_value(st, pos, ev, final)
            elif ph == "key":
                pos, more = self._scan_key(st, pos)
            elif ph == "name":
                pos, more = self._scan_name(st, pos, ev, ctx)
            else:
                pos, more = self._scan_tag(st, pos, ev, ctx)
            if st["ph"] == "end":
                st["buf"] = ""
                return pos
            if not more:
                st["buf"] = st["buf"][pos:]
                return None

    def _scan_tag(self, st: dict[str, Any], pos: int, ev: list[Event], ctx: Any) -> tuple[int, bool]:
        buf = st["buf"]
        i = buf.find("<", pos)
        if i < 0:
            return len(buf), False
        rest = buf[i : i + MAX_TAG]
        heads = self.heads[st["ph"]]
        head = next((h for h in heads if rest.startswith(h)), None)
        if head is None:
            waiting = any(h.startswith(rest) for h in heads)
            return (i, False) if waiting else (i + 1, True)
        if head.endswith(">"):
            self._tag(st, head, "", ev, ctx)
            return i + len(head), True
        close = rest.find(">", len(head))
        if close < 0:
            return (i, False) if len(rest) < MAX_TAG else (i + len(head), True)
        attrs = rest[len(head) : close]
        if "<" in attrs:  # malformed opener: keep what follows for the next tag
            attrs = attrs[: attrs.index("<")]
            self._tag(st, head, None, ev, ctx)
            return i + len(head) + len(attrs), True
        self._tag(st, head, attrs, ev, ctx)
        return i + close + 1, True

    def _tag(self, st: dict[str, Any], head: str, attrs: str | None, ev: list[Event], ctx: Any) -> None:
        tags = self.tags
        if head == tags.block_end:
            self._close_call(st, ev)
            st["ph"] = "end"
        elif head == tags.call_head:
            self._close_call(st, ev)
            m = self.call_attr.fullmatch(attrs) if attrs is not None else None
            name = next((g for g in m.groups() if g is not None), None) if m else None
            self._open_call(st, name, ev, ctx)
        elif head == tags.call_close:
            self._close_call(st, ev)
            st["ph"] = "end" if st["bare"] else "pre"
        elif head == tags.param_head and st["ph"] == "args":
            self._open_param(st, attrs, ev)
        elif head == tags.value_open and st["ph"] == "vopen":
            st["ph"] = "val"
            self._start_value(st, False, ev)

    def _scan_name(self, st: dict[str, Any], pos: int, ev: list[Event], ctx: Any) -> tuple[int, bool]:
        """GLM: the call name is the text before the first newline or tag."""
        buf = st["buf"]
        m = _NAME_END.search(buf, pos)
        if m is None:
            st["name"] += buf[pos:]
            return len(buf), False
        self._open_call(st, st["name"] + buf[pos : m.start()], ev, ctx)
        return m.start(), True

    def _scan_key(self, st: dict[str, Any], pos: int) -> tuple[int, bool]:
        """GLM: the key is the text up to ``key_close``; then ``value_open`` is expected."""
        buf = st["buf"]
        m = self.key_end.search(buf, pos)
        if m is None:
            return pos, False
        key = (st["key"] or "") + buf[pos : m.start()]
        st["key"] = key.strip() or None
        if m.group() == self.tags.block_end:
            st["ph"] = "args"
            return m.start(), True
        st["ph"] = "vopen"
        return m.end(), True

    def _scan_value(self, st: dict[str, Any], pos: int, ev: list[Event], final: bool) -> tuple[int, bool]:
        """Value text up to its own closing tag (or the next parameter opener: an unclosed value,
        as vLLM). A block or call closer or a call opener inside a value is part of the value
        when the value's closing tag follows
        later (``</tool_call>`` in code being written): from such a candidate on, the text waits
        in ``buf`` (``wait``: how much of it was searched) until the closing tag arrives, and
        only at the end of the stream without it does the value end at the candidate."""
        buf, close = st["buf"], self.tags.param_close
        if st.get("wait") is not None:
            found = buf.find(close, max(pos, pos + st["wait"] - len(close) + 1))
            if found < 0 and not final:
                st["wait"] = len(buf) - pos
                return pos, False
            st["wait"] = None
            if found >= 0:
                self._value_text(st, buf[pos:found], ev)
                self._close_value(st, ev)
                st["ph"] = "args"
                return found + len(close), True
        m = self.value_end.search(buf, pos)
        if m is None:
            keep = 0 if final else _partial(buf, pos, self.value_prefixes)
            self._value_text(st, buf[pos : len(buf) - keep], ev)
            return len(buf) - keep, False
        self._value_text(st, buf[pos : m.start()], ev)
        if m.group() not in (close, self.tags.param_head) and not final and st["key"] is not None:
            st["wait"] = 0  # a candidate end: decided by what follows (maybe already buffered)
            return m.start(), True
        self._close_value(st, ev)
        st["ph"] = "args"
        return (m.end() if m.group() == close else m.start()), True

    # -- JSON building -------------------------------------------------------------------

    def _open_call(self, st: dict[str, Any], name: str | None, ev: list[Event], ctx: Any) -> None:
        st.update(raw=None, ph="args", name="", nk=0, pend=None, key=None, types=None)
        name = name.strip() if name else ""
        names = ctx.get("names")
        declared = not self.tags.validate or not names or name in names
        st["skip"] = not name or not declared
        if not st["skip"]:
            st["types"] = (ctx.get("params") or {}).get(name)
            ev += [("name", name), ("args", "{")]

    def _open_param(self, st: dict[str, Any], attrs: str | None, ev: list[Event]) -> None:
        m = self.param_attr.fullmatch(attrs) if attrs is not None else None
        named = [v for k, v in m.groupdict().items() if k != "string" and v is not None] if m else []
        key = named[0].strip() if named else None
        if self.tags.key_close:
            st.update(ph="key", key="", go=False, nl=False, val="")
            return
        st.update(ph="val", key=key, go=False, nl=False, val="")
        string = m.groupdict().get("string") if m else None
        self._start_value(st, self.tags.string_attr and string != "true", ev)

    def _start_value(self, st: dict[str, Any], decode: bool, ev: list[Event]) -> None:
        key, types = st["key"], st["types"]
        if st["skip"] or not key:
            st.update(dec=False, st=False, key=None)
            return
        schema = types.get(key) if types else None
        wrapper = key in self.tags.unwrap and bool(types) and key not in types and st["nk"] == 0
        st.update(dec=decode, st=not decode and not wrapper and is_string_only(schema))
        if st["st"]:
            self._flush_pend(st, ev)
            ev.append(("args", self._sep(st) + dumps(key) + ': "'))

    def _value_text(self, st: dict[str, Any], text: str, ev: list[Event]) -> None:
        if not text or st["key"] is None:
            return
        if self.tags.trim_newline:
            if not st["go"]:
                st["go"] = True
                text = text.removeprefix("\n")
            text = ("\n" if st["nl"] else "") + text
            st["nl"] = text.endswith("\n")
            text = text[:-1] if st["nl"] else text
        if st["st"]:
            if text:
                ev.append(("args", dumps(text)[1:-1]))
        else:
            st["val"] += text

    def _close_value(self, st: dict[str, Any], ev: list[Event]) -> None:
        key = st["key"]
        if key is None:
            return
        if st["st"]:
            ev.append(("args", '"'))
        else:
            value: Any = st["val"]
            if st["dec"]:
                value = _decode(value)
            types = st["types"]
            value = coerce(value, types.get(key) if types else None)
            if key in self.tags.unwrap and types and key not in types and st["nk"] == 0:
                st["pend"] = [key, value]
            else:
                self._flush_pend(st, ev)
                ev.append(("args", self._sep(st) + dumps(key) + ": " + dumps(value)))
        st.update(key=None, val="", st=False)

    def _close_call(self, st: dict[str, Any], ev: list[Event]) -> None:
        if st["ph"] == "val":
            self._close_value(st, ev)
        if st["ph"] in ("val", "vopen", "key"):
            st.update(ph="args", key=None)
        if st["skip"]:
            return
        st["skip"] = True
        pend = st["pend"]
        if pend is not None and st["nk"] == 0:
            inner = _decode(pend[1]) if isinstance(pend[1], str) else pend[1]
            types = st["types"] or {}
            if isinstance(inner, dict) and set(inner) <= set(types):
                ev.append(("args", dumps({k: coerce(v, types[k]) for k, v in inner.items()})[1:]))
                return
        self._flush_pend(st, ev)
        ev.append(("args", "}"))

    def _flush_pend(self, st: dict[str, Any], ev: list[Event]) -> None:
        if st["pend"] is not None:
            key, value = st["pend"]
            st["pend"] = None
            ev.append(("args", self._sep(st) + dumps(key) + ": " + dumps(value)))

    @staticmethod
    def _sep(st: dict[str, Any]) -> str:
        st["nk"] += 1
        return ", " if st["nk"] > 1 else ""


def _decode(text: str) -> Any:
    """JSON-decode a DSML ``string="false"`` value; keep the text when it is not JSON."""
    ok, value = json_value(text)
    return value if ok else text


def _partial(buf: str, pos: int, prefixes: frozenset[str]) -> int:
    """Length of the longest suffix of ``buf[pos:]`` that is a proper prefix of a terminator."""
    longest = max(map(len, prefixes), default=0)
    i = buf.rfind("<", max(pos, len(buf) - longest))
    while i >= 0:
        if buf[i:] in prefixes:
            return len(buf) - i
        i = buf.rfind("<", max(pos, len(buf) - longest), i)
    return 0
