"""The one incremental engine: ``feed(spec, state, text) -> events`` and ``finish``.

State (a JSON-compatible dict, mutated in place and returned by the caller's facade):

* ``mode``: current mode of the spec.
* ``buf``: held-back text that may be the start of a marker (at most the longest marker
  length minus one characters).
* ``hold``: text of ``"hold"`` modes awaiting a decision (see :mod:`parsers.spec`).
* ``body``: the body handler's state while a tool-call body is open, else ``None``.
* ``n``: number of tool calls started so far (the next call's index).
* ``j`` (only for specs with ``separators``): per kind 0 = no text yet, 1 = text in the
  current visit, 2 = text earlier and a new visit started (the next text gets the separator).
* ``ctx`` (only for specs with ``tool_context``): the per-request value the body handler reads.
* ``ws`` (specs with ``strip_reasoning_tail``): trailing reasoning whitespace held back.
* ``pre`` (specs with a ``preamble``): whether the preamble is still to be sent.
* ``er`` (specs with ``empty_reasoning``): an empty reasoning ``""`` is owed at finish (a
  reasoning section was entered and no reasoning text has been sent yet).

Cost per ``feed``: O(len(buf) + len(text)) regex work plus the body handler's own linear
scan; nothing is re-read from earlier chunks. Markers are matched on text: the derender keeps
marker special tokens as their text, so a marker split over several chunks is still found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from . import newlines
from .spec import BODY, CONTENT, DROP, HOLD, REASONING, Event, FormatSpec, Transition

#: At most this many trailing characters are withheld by ``FormatSpec.hold_trailing`` (the
#: rest of a longer run is released at once), so state and per-chunk cost stay flat.
MAX_TRAILING = 256


@dataclass(frozen=True, slots=True)
class _Mode:
    """Compiled lookup for one mode: marker regex, marker text -> name, partial prefixes."""

    regex: re.Pattern[str] | None
    names: dict[str, str]
    prefixes: frozenset[str]
    longest: int
    #: the first characters of the mode's markers (a text without any holds no partial marker)
    firsts: frozenset[str] = frozenset()


_COMPILED: dict[int, tuple[FormatSpec, dict[str, _Mode]]] = {}


def _compile(spec: FormatSpec) -> dict[str, _Mode]:
    hit = _COMPILED.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    table: dict[str, _Mode] = {}
    for mode in spec.modes:
        names = {spec.markers[k]: k for (m, k) in spec.transitions if m == mode}
        texts = sorted(names, key=len, reverse=True)
        regex = re.compile("|".join(map(re.escape, texts))) if texts else None
        prefixes = frozenset(t[:i] for t in texts for i in range(1, len(t)))
        table[mode] = _Mode(regex, names, prefixes, max(map(len, prefixes), default=0),
                            frozenset(t[0] for t in texts if t))
    _COMPILED[id(spec)] = (spec, table)
    return table


def start(
    spec: FormatSpec, mode: str | None = None, options: dict[str, Any] | None = None, context: Any = None
) -> dict[str, Any]:
    """Initial engine state in ``mode`` (default ``spec.initial_mode``).

    When that mode is a body mode the body starts at once (guided-JSON tool choice), with
    ``options`` overriding ``spec.body_options``. ``context`` is the spec's ``tool_context``
    value for this request (kept as ``state["ctx"]`` when the spec has one).
    """
    st: dict[str, Any] = {"mode": mode or spec.initial_mode, "buf": "", "hold": "", "body": None, "n": 0}
    if spec.separators:
        st["j"] = dict.fromkeys(spec.separators, 0)
    if spec.tool_context is not None:
        st["ctx"] = context
    if spec.strip_reasoning_tail:
        st["ws"] = ""
    if spec.recover_newlines:
        st["nl"] = {REASONING: newlines.start(), CONTENT: newlines.start()}
    if spec.preamble:
        st["pre"] = True
    if spec.empty_reasoning:
        st["er"] = spec.modes[st["mode"]] == REASONING
    if spec.modes[st["mode"]] == BODY and spec.body is not None:
        st["body"] = spec.body.start("", {**spec.body_options, **(options or {})})
    return st


def feed(spec: FormatSpec, st: dict[str, Any], text: str, final: bool = False) -> list[Event]:
    """Consume new ``text``; return events in output order. ``final`` holds nothing back."""
    return _post(spec, st, _scan(spec, st, text, final), final=False)


def _scan(spec: FormatSpec, st: dict[str, Any], text: str, final: bool) -> list[Event]:
    table = _compile(spec)
    buf = st["buf"] + text
    st["buf"] = ""
    out: list[Event] = []
    pos = 0
    while pos < len(buf):
        mode = st["mode"]
        info = table[mode]
        if spec.modes[mode] == BODY and info.regex is None:
            buf, pos = _feed_body(spec, st, buf, pos, out)
            continue
        match = info.regex.search(buf, pos) if info.regex else None
        if match and not final and _may_grow(buf, match.start(), info):
            match = None  # a marker that may still grow into a longer one (`[` / `[TOOL_CALLS]`)
        end = match.start() if match else len(buf) - (0 if final else _partial(buf, pos, info))
        if spec.modes[mode] == BODY:
            step = _feed_closable_body(spec, st, buf, pos, end, match, out)
            if step is None:
                st["buf"] = buf[end:]
                break
            buf, pos = step
            continue
        broke = _emit_text(spec, st, buf[pos:end], out)
        if broke is not None:
            pos += broke
            continue
        if match is None:
            st["buf"] = buf[end:]
            break
        _apply(spec, st, spec.transitions[(mode, info.names[match.group()])], match.group(), out)
        pos = match.end()
    return out


def finish(spec: FormatSpec, st: dict[str, Any]) -> list[Event]:
    """End of stream: flush held-back partial markers as text, close bodies, release holds."""
    out = _scan(spec, st, "", final=True)
    while spec.modes[st["mode"]] == BODY and spec.body is not None:
        events = _body_finish(spec, st)
        back = _given_back(events)
        _handle(spec, st, events, 0 if back else None, out)
        if not back:
            break
        out += _scan(spec, st, back, final=True)  # text after the body is lexed like any other
    kind = spec.finish_release.get(st["mode"], CONTENT if st["mode"] in spec.hold_trailing else None)
    if st["hold"]:
        hold, st["hold"] = st["hold"], ""
        if kind in (CONTENT, REASONING):
            _new_visit(spec, st, kind)
            _sink(kind, st, _joined(spec, st, kind, hold), out)
    out = _post(spec, st, out, final=True)
    if st.get("er"):
        st["er"] = False
        out.append((REASONING, ""))  # FormatSpec.empty_reasoning: the section was there, empty
    return out


def _post(spec: FormatSpec, st: dict[str, Any], events: list[Event], final: bool) -> list[Event]:
    """Per-spec output rules applied to one step's events: the preamble goes first (once);
    trailing reasoning whitespace is held back while it may still be inner whitespace."""
    if st.get("pre"):
        st["pre"] = False
        events = [(CONTENT, spec.preamble), *events]
    if spec.recover_newlines:
        events = _recovered(st, events, final)
    if not spec.strip_reasoning_tail:
        return _owed(st, events)
    out: list[Event] = []
    for ev in events:
        if ev[0] == REASONING:
            text = st["ws"] + ev[1]
            kept = text.rstrip()
            st["ws"] = text[len(kept) :]
            if kept:
                out.append((REASONING, kept))
        else:
            st["ws"] = ""  # something else followed: the reasoning tail is dropped
            out.append(ev)
    if final:
        st["ws"] = ""
    return _owed(st, out)


def _recovered(st: dict[str, Any], events: list[Event], final: bool) -> list[Event]:
    """``FormatSpec.recover_newlines``: each kind through its own :mod:`parsers.newlines` state;
    reasoning's held tail is released once content follows (vLLM 0.33 ``minicpmv``)."""
    states = st["nl"] = {k: dict(v) for k, v in st["nl"].items()}
    out: list[Event] = []
    for ev in events:
        if ev[0] == CONTENT:
            _sink(REASONING, st, newlines.recover(states[REASONING], "", True), out)
        if ev[0] in (CONTENT, REASONING):
            _sink(ev[0], st, newlines.recover(states[ev[0]], ev[1], False), out)
        else:
            out.append(ev)
    if final:
        _sink(REASONING, st, newlines.recover(states[REASONING], "", True), out)
        _sink(CONTENT, st, newlines.recover(states[CONTENT], "", True), out)
    return out


def _owed(st: dict[str, Any], events: list[Event]) -> list[Event]:
    """Clear the owed empty reasoning (``FormatSpec.empty_reasoning``) once reasoning text is sent."""
    if st.get("er") and any(ev[0] == REASONING for ev in events):
        st["er"] = False
    return events


def _may_grow(buf: str, start: int, info: _Mode) -> bool:
    """Whether the rest of ``buf`` from ``start`` is a proper prefix of a (longer) marker."""
    return len(buf) - start <= info.longest and buf[start:] in info.prefixes


def _partial(buf: str, pos: int, info: _Mode) -> int:
    """Length of the longest suffix of ``buf[pos:]`` that is a proper prefix of a marker."""
    longest = min(info.longest, len(buf) - pos)
    if longest <= 0 or info.firsts.isdisjoint(buf[len(buf) - longest:]):
        return 0  # no marker starts in the tail (most text: one set test instead of a loop)
    for size in range(longest, 0, -1):
        if buf[len(buf) - size :] in info.prefixes:
            return size
    return 0


def _emit_text(spec: FormatSpec, st: dict[str, Any], text: str, out: list[Event]) -> int | None:
    """Send plain text to the mode's sink. If the mode breaks on non-whitespace text, send the
    whitespace prefix, apply the break transition and return how much was consumed."""
    if not text:
        return None
    cut = 0
    if st.get("sl"):  # FormatSpec.strip_content_start
        kept = text.lstrip(spec.strip_content_start)
        cut, text = len(text) - len(kept), kept
        if not text:
            return None
        st["sl"] = False
    broke = _emit_kept(spec, st, text, out)
    return None if broke is None else broke + cut


def _emit_kept(spec: FormatSpec, st: dict[str, Any], text: str, out: list[Event]) -> int | None:
    mode = st["mode"]
    brk = spec.break_on_text.get(mode)
    if brk is not None:
        stripped = len(text) - len(text.lstrip())
        if stripped < len(text):
            _sink(spec.modes[mode], st, text[:stripped], out)
            _apply(spec, st, brk, "", out)
            return stripped
    trail = spec.hold_trailing.get(mode)
    if trail is not None:
        text = st["hold"] + text
        keep = len(text) - len(text.rstrip(trail))
        if spec.hold_blank_only and keep < len(text):
            st["nw"] = True  # the content has other text than the held characters
        keep = min(keep, MAX_TRAILING)
        st["hold"] = text[len(text) - keep :]
        text = text[: len(text) - keep]
    sink = spec.modes[mode]
    _sink(sink, st, _joined(spec, st, sink, text), out)
    limit = spec.hold_limit.get(mode)
    if limit is not None and len(st["hold"]) > limit[0]:
        _apply(spec, st, limit[1], "", out)  # not a header after all: bounded state
    return None


def _joined(spec: FormatSpec, st: dict[str, Any], kind: str, text: str) -> str:
    """Prefix the kind's separator when this is the first text of a later visit."""
    flags = st.get("j")
    if not text or flags is None or kind not in flags:
        return text
    prefix = spec.separators[kind] if flags[kind] == 2 else ""
    flags[kind] = 1
    return prefix + text


def _new_visit(spec: FormatSpec, st: dict[str, Any], kind: str) -> None:
    flags = st.get("j")
    if flags is not None and flags.get(kind) == 1:
        flags[kind] = 2


def _sink(sink: str, st: dict[str, Any], text: str, out: list[Event]) -> None:
    if not text or sink == DROP:
        return
    if sink == HOLD:
        st["hold"] += text
    elif out and out[-1][0] == sink:
        out[-1] = (sink, out[-1][1] + text)
    else:
        out.append((sink, text))


def _apply(spec: FormatSpec, st: dict[str, Any], tr: Transition, marker: str, out: list[Event]) -> None:
    """Switch mode: release the hold if asked, start a body or keep the marker text.

    Trailing text withheld by ``hold_trailing`` is released as content when the mode is left
    for a non-body mode without an explicit ``release``; into a body it stays held until the
    body commits a call (dropped) or is rejected (given back as content, see ``_handle``).
    A ``keep`` transition into a body feeds the marker text to the body as its first text
    (e.g. llama's ``{`` both starts and opens the call object). A ``route`` transition takes
    the held header instead (see :mod:`parsers.spec`)."""
    to, release = tr.to, tr.release
    if tr.route:
        assert spec.route is not None
        marker, st["hold"] = st["hold"], ""
        to = spec.route(marker) or tr.to
    sink = spec.modes[to]
    if release is None and st["mode"] in spec.hold_trailing and sink != BODY:
        release = CONTENT
    _new_visit(spec, st, sink)
    if release is not None and st["hold"]:
        if release != sink:
            _new_visit(spec, st, release)
        _sink(release, st, _joined(spec, st, release, st["hold"]), out)  # "drop" discards
        st["hold"] = ""
    if sink == BODY and spec.reject_to_origin:
        st["from"] = st["mode"]
    if spec.strip_content_start:
        st["sl"] = sink == CONTENT and st["mode"] in spec.reasoning_modes
    if "er" in st and sink == REASONING and spec.modes[st["mode"]] != REASONING:
        st["er"] = True  # a marker opened reasoning (FormatSpec.empty_reasoning)
    st["mode"] = to
    if sink == BODY and spec.body is not None:
        st["body"] = spec.body.start("" if tr.keep else marker, spec.body_options)
        if tr.keep:
            events, end = _body_feed(spec, st, marker)
            _handle(spec, st, events, end, out)
    elif tr.keep:
        _sink(sink, st, marker, out)


def _feed_body(
    spec: FormatSpec, st: dict[str, Any], buf: str, pos: int, out: list[Event]
) -> tuple[str, int]:
    """Feed ``buf[pos:]`` to an open body; return the text still to scan and where to go on."""
    assert spec.body is not None
    text = buf[pos:]
    events, end = _body_feed(spec, st, text)
    back = _given_back(events)
    _handle(spec, st, events, end, out)
    if end is None:
        return buf, len(buf)
    return (back + buf[pos + end :], 0) if back else (buf, pos + end)


def _given_back(events: list[Event]) -> str:
    """Remove the body's ``("back", tail)`` events (see ``BodyHandler.feed``); return the tail."""
    back = "".join(ev[1] for ev in events if ev[0] == "back")
    if back:
        events[:] = [ev for ev in events if ev[0] != "back"]
    return back


def _body_feed(spec: FormatSpec, st: dict[str, Any], text: str) -> tuple[list[Event], int | None]:
    """``BodyHandler.feed``, with the request context when the spec has ``tool_context``."""
    assert spec.body is not None
    if "ctx" in st:
        return spec.body.feed(st["body"], text, st["ctx"])  # type: ignore[call-arg]
    return spec.body.feed(st["body"], text)


def _body_finish(spec: FormatSpec, st: dict[str, Any]) -> list[Event]:
    """``BodyHandler.finish``, with the request context when the spec has ``tool_context``."""
    assert spec.body is not None
    if "ctx" in st:
        return spec.body.finish(st["body"], st["ctx"])  # type: ignore[call-arg]
    return spec.body.finish(st["body"])


def _feed_closable_body(
    spec: FormatSpec,
    st: dict[str, Any],
    buf: str,
    pos: int,
    end: int,
    match: re.Match[str] | None,
    out: list[Event],
) -> tuple[str, int] | None:
    """A body mode with marker transitions: feed the text before the marker, then close the
    body (``finish``) and apply the marker's transition. Returns the text still to scan and
    the next position in it, or ``None`` when the chunk is used up (a partial marker stays in
    ``buf``)."""
    assert spec.body is not None
    mode = st["mode"]
    events, stop = _body_feed(spec, st, buf[pos:end])
    back = _given_back(events)
    _handle(spec, st, events, stop, out)
    if stop is not None or st["body"] is None:
        nxt = pos + (end - pos if stop is None else stop)
        return (back + buf[nxt:], 0) if back else (buf, nxt)
    if match is None:
        return None
    events = _body_finish(spec, st)
    back = _given_back(events)
    _handle(spec, st, events, 0 if back else None, out)
    if back:  # text the body held after its end: lexed before the marker
        return back + buf[match.start() :], 0
    if st["mode"] != mode:  # rejected: the marker is text of the reject mode
        return buf, match.start()
    st["body"] = None
    _apply(spec, st, spec.transitions[(mode, _compile(spec)[mode].names[match.group()])], match.group(), out)
    return buf, match.end()


def _handle(
    spec: FormatSpec, st: dict[str, Any], events: list[Event], end: int | None, out: list[Event]
) -> None:
    """Number the handler's call events and switch mode when the body ended or was rejected."""
    rejected = False
    back = st.pop("from", None) if (end is not None or any(e[0] == "reject" for e in events)) else None
    back = back or spec.reject_mode
    for ev in events:
        if ev[0] == "name":
            if spec.hold_blank_only and st["n"] == 0 and st.get("nw") and st["hold"]:
                _sink(CONTENT, st, st["hold"], out)  # FormatSpec.hold_blank_only: kept
            if spec.hold_trailing:
                st["hold"] = ""  # withheld text before a committed call is dropped
            out.append(("name", st["n"], *ev[1:]))  # (name[, native id])
            st["n"] += 1
        elif ev[0] == "args":
            out.append(("args", st["n"] - 1, ev[1]))
        elif ev[0] == "reject":
            rejected = True
            held = st["hold"] if spec.hold_trailing else ""
            if held:
                st["hold"] = ""
            _sink(CONTENT, st, held, out)
            assert back is not None, "a body that can be rejected has a reject mode"
            _sink(spec.modes[back], st, ev[1], out)  # reject_to_origin: e.g. dropped after a call
    if rejected or end is not None:
        st["body"] = None
        st["mode"] = back if rejected else spec.body_end_mode
