"""The one incremental engine: ``feed(spec, state, text) -> events`` and ``finish``.

State (a JSON-compatible dict, mutated in place and returned by the caller's facade):

* ``mode``: current mode of the spec.
* ``buf``: held-back text that may be the start of a marker (at most the longest marker
  length minus one characters).
* ``hold``: text of ``"hold"`` modes awaiting a decision (see :mod:`parsers.spec`).
* ``body``: the body handler's state while a tool-call body is open, else ``None``.
* ``n``: number of tool calls started so far (the next call's index).
* ``ws`` (specs with ``strip_reasoning_tail``): trailing reasoning whitespace held back.
* ``pre`` (specs with a ``preamble``): whether the preamble is still to be sent.

Cost per ``feed``: O(len(buf) + len(text)) regex work plus the body handler's own linear
scan; nothing is re-read from earlier chunks. Markers are matched on text: the derender keeps
marker special tokens as their text, so a marker split over several chunks is still found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .spec import BODY, CONTENT, DROP, HOLD, REASONING, Event, FormatSpec, Transition


@dataclass(frozen=True, slots=True)
class _Mode:
    """Compiled lookup for one mode: marker regex, marker text -> name, partial prefixes."""

    regex: re.Pattern[str] | None
    names: dict[str, str]
    prefixes: frozenset[str]
    longest: int


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
        table[mode] = _Mode(regex, names, prefixes, max(map(len, prefixes), default=0))
    _COMPILED[id(spec)] = (spec, table)
    return table


def start(spec: FormatSpec, mode: str | None = None, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Initial engine state in ``mode`` (default ``spec.initial_mode``).

    When that mode is a body mode the body starts at once (guided-JSON tool choice), with
    ``options`` overriding ``spec.body_options``.
    """
    st: dict[str, Any] = {"mode": mode or spec.initial_mode, "buf": "", "hold": "", "body": None, "n": 0}
    if spec.strip_reasoning_tail:
        st["ws"] = ""
    if spec.preamble:
        st["pre"] = True
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
        if spec.modes[mode] == BODY:
            pos = _feed_body(spec, st, buf, pos, out)
            continue
        info = table[mode]
        match = info.regex.search(buf, pos) if info.regex else None
        end = match.start() if match else len(buf) - (0 if final else _partial(buf, pos, info))
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
    if spec.modes[st["mode"]] == BODY and spec.body is not None:
        _handle(spec, st, spec.body.finish(st["body"]), None, out)
    kind = spec.finish_release.get(st["mode"])
    if st["hold"]:
        hold, st["hold"] = st["hold"], ""
        if kind in (CONTENT, REASONING):
            out.append((kind, hold))
    return _post(spec, st, out, final=True)


def _post(spec: FormatSpec, st: dict[str, Any], events: list[Event], final: bool) -> list[Event]:
    """Per-spec output rules applied to one step's events: the preamble goes first (once);
    trailing reasoning whitespace is held back while it may still be inner whitespace."""
    if st.get("pre"):
        st["pre"] = False
        events = [(CONTENT, spec.preamble), *events]
    if not spec.strip_reasoning_tail:
        return events
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
    return out


def _partial(buf: str, pos: int, info: _Mode) -> int:
    """Length of the longest suffix of ``buf[pos:]`` that is a proper prefix of a marker."""
    for size in range(min(info.longest, len(buf) - pos), 0, -1):
        if buf[len(buf) - size :] in info.prefixes:
            return size
    return 0


def _emit_text(spec: FormatSpec, st: dict[str, Any], text: str, out: list[Event]) -> int | None:
    """Send plain text to the mode's sink. If the mode breaks on non-whitespace text, send the
    whitespace prefix, apply the break transition and return how much was consumed."""
    if not text:
        return None
    mode = st["mode"]
    brk = spec.break_on_text.get(mode)
    if brk is not None:
        stripped = len(text) - len(text.lstrip())
        if stripped < len(text):
            _sink(spec.modes[mode], st, text[:stripped], out)
            _apply(spec, st, brk, "", out)
            return stripped
    _sink(spec.modes[mode], st, text, out)
    return None


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
    """Switch mode: release the hold if asked, start a body or keep the marker text."""
    if tr.release is not None and st["hold"]:
        _sink(tr.release, st, st["hold"], out)  # "drop" discards
        st["hold"] = ""
    st["mode"] = tr.to
    sink = spec.modes[tr.to]
    if sink == BODY and spec.body is not None:
        st["body"] = spec.body.start(marker, spec.body_options)
    elif tr.keep:
        _sink(sink, st, marker, out)


def _feed_body(spec: FormatSpec, st: dict[str, Any], buf: str, pos: int, out: list[Event]) -> int:
    assert spec.body is not None
    events, end = spec.body.feed(st["body"], buf[pos:])
    _handle(spec, st, events, end, out)
    return len(buf) if end is None else pos + end


def _handle(
    spec: FormatSpec, st: dict[str, Any], events: list[Event], end: int | None, out: list[Event]
) -> None:
    """Number the handler's call events and switch mode when the body ended or was rejected."""
    rejected = False
    for ev in events:
        if ev[0] == "name":
            out.append(("name", st["n"], ev[1]))
            st["n"] += 1
        elif ev[0] == "args":
            out.append(("args", st["n"] - 1, ev[1]))
        elif ev[0] == "reject":
            rejected = True
            _sink(CONTENT, st, ev[1], out)
    if rejected or end is not None:
        st["body"] = None
        st["mode"] = spec.reject_mode if rejected else spec.body_end_mode
