"""The composed parser: reasoning phase first, then the tool phase on its content output.

Contract: ``parsers/README.md``. One :class:`Parser` per (reasoning parser, tool parser) pair;
it is immutable and holds no per-request data, so one instance serves all requests. The
per-request state is a plain JSON-compatible dict::

    {"v": 1, "ir": include_reasoning, "pt": parallel_tool_calls,
     "r": engine state of the reasoning spec or None,
     "t": engine state of the tool phase or None, "tk": "native" | "required" | "named" | None,
     "h": history_tool_call_cnt (numbers native call ids, FormatSpec.call_id),
     "nd": 1 once a call was dropped under "tk": "none" (absent before)}

Tool phase selection (vLLM 0.33 serving, parsers.md sections 1 and 9.9): no ``tools`` or
``tool_choice="none"`` → no tool parsing (markup stays content), except that specs with
``strip_on_none`` (vLLM engine parsers) still parse with ``"tk": "none"`` and drop the calls;
``auto`` → the native format when ``enable_auto_tool_choice``; ``required`` → guided JSON array
``[{"name", "parameters"}]``; named → the whole output is the arguments object. Formats whose
spec has ``guided_json=False`` parse their native syntax for required/named too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import machine
from .jsoncalls import JsonCalls
from .spec import BODY, CONTENT, DROP, FormatSpec
from .types import Delta, ParseContext, ParseResult, ToolCall, ToolCallDelta


def _guided(name: str, **options: Any) -> FormatSpec:
    """A markerless spec whose whole output is one JSON body (vLLM guided-JSON tool choice)."""
    return FormatSpec(
        name=name,
        kind="tool",
        markers={},
        transitions={},
        modes={"B": BODY, "A": DROP, "X": CONTENT},
        initial_mode="B",
        body=JsonCalls(),
        body_end_mode="A",
        reject_mode="X",
        body_options=options,
    )


_GUIDED = {
    "required": _guided("guided_required", array=True, args_keys=("parameters", "arguments")),
    "named": _guided("guided_named"),
}


@dataclass(frozen=True, slots=True)
class Parser:
    """A reasoning spec and/or a tool spec composed behind the contract of ``parsers/README.md``.

    Attributes:
        reasoning: the reasoning format, or ``None``.
        tool: the tool-call format, or ``None``.
        marker_token_ids: vocab ids of the marker texts both formats use.
        prompt_ids: ``(open id, close id, turn boundary ids)`` for the prompt scan, from the vocab.
    """

    reasoning: FormatSpec | None
    tool: FormatSpec | None
    marker_token_ids: frozenset[int] = frozenset()
    prompt_ids: tuple[int | None, int | None, frozenset[int]] = (None, None, frozenset())

    def start(self, ctx: ParseContext, prompt_token_ids: Sequence[int] | None = None) -> dict[str, Any]:
        """Initial state for one output (see module docstring). Reads the prompt's current
        turn backwards once: O(length of the current turn)."""
        st: dict[str, Any] = {
            "v": 1,
            "ir": ctx.include_reasoning,
            "pt": ctx.parallel_tool_calls,
            "r": None,
            "t": None,
            "tk": None,
            "h": ctx.history_tool_call_cnt,
        }
        if self.reasoning is not None:
            chooser = self.reasoning.choose_mode
            mode = (
                chooser(ctx.chat_template_kwargs or {}, self._prompt_last(prompt_token_ids))
                if chooser
                else None
            )
            undecided = ctx.structured_output and "U" in self.reasoning.modes
            if undecided and (mode or self.reasoning.initial_mode) == "R":
                mode = "U"  # think_factory: undecided until a reasoning marker shows up
            st["r"] = machine.start(self.reasoning, mode)
        kind, options = self._tool_kind(ctx)
        if kind is not None:
            st["tk"] = kind
            tspec = self._tool_spec(kind)
            context = tspec.tool_context(ctx.tools) if tspec.tool_context is not None else None
            forced = kind == "native" and ctx.tool_choice not in ("auto", None)
            mode = self.tool.forced_mode if forced and self.tool is not None else None
            st["t"] = machine.start(tspec, mode, options, context)
            if kind == "native" and tspec.drop_unknown_tools:
                st["kn"] = sorted({(t.get("function") or {}).get("name") or "" for t in ctx.tools or ()})
                st["dr"] = []
        return st

    def reasoning_ended(self, state: Mapping[str, Any]) -> bool | None:
        """``None`` without a reasoning parser, else whether reasoning has ended."""
        if self.reasoning is None:
            return None
        return state["r"]["mode"] not in self.reasoning.reasoning_modes

    def keeps_partial(self, state: Mapping[str, Any]) -> bool:
        """Whether a character left incomplete at the end of the output is text (U+FFFD) in the
        parser's present mode (``FormatSpec.finish_partial``), rather than dropped."""
        for key, spec in (("r", self.reasoning), ("t", self.tool)):
            sub = state.get(key)
            if spec is not None and sub is not None and sub["mode"] in spec.finish_partial:
                return True
        return False

    @staticmethod
    def dropped_calls(state: Mapping[str, Any]) -> bool:
        """Whether a ``strip_on_none`` format parsed a call and dropped it (vLLM 0.33's engine
        then treats the output as one with calls: whitespace-only content is ``null``)."""
        return bool(state.get("nd"))

    def feed(
        self, state: dict[str, Any], text: str, token_ids: Sequence[int] = (), *, in_place: bool = False
    ) -> tuple[dict[str, Any], list[Delta]]:
        """One chunk of new text (markers as text); ``token_ids`` are accepted but markers are
        matched on text. Returns a new state (the argument is not modified) and 0 or 1 deltas.
        Cost: O(len(text) + held-back text); copying the state is O(its size), which is flat.
        ``in_place``: the caller owns ``state`` and never looks back at it, so it is advanced
        and returned as the new state instead of copied first."""
        new = state if in_place else _copy_state(state)
        return new, self._step(new, text, final=False)

    def finish(self, state: dict[str, Any], *, in_place: bool = False) -> tuple[dict[str, Any], list[Delta]]:
        """End of stream: flush held partial markers, held calls and withheld arguments
        (``in_place`` as in :meth:`feed`)."""
        new = state if in_place else _copy_state(state)
        return new, self._step(new, "", final=True)

    def parse(
        self,
        ctx: ParseContext,
        prompt_token_ids: Sequence[int] | None,
        text: str,
        token_ids: Sequence[int] = (),
    ) -> ParseResult:
        """Batch parse = ``start`` + ``feed(text)`` + ``finish`` joined (one code path)."""
        state = self.start(ctx, prompt_token_ids)
        state, first = self.feed(state, text, token_ids)
        state, last = self.finish(state)
        return join_deltas(first + last)

    # -- internals --------------------------------------------------------------------

    @property
    def _combined(self) -> bool:
        """One format parses reasoning, content and calls (Harmony): both names resolve to
        the same spec. It runs once as the reasoning phase; its calls surface only when the
        tool phase is active (tools given, tool_choice not "none")."""
        return self.tool is not None and self.tool is self.reasoning

    def _prompt_last(self, prompt: Sequence[int] | None) -> str | None:
        open_id, close_id, bounds = self.prompt_ids
        if not prompt or (open_id is None and close_id is None):
            return None
        for tok in reversed(prompt):
            if tok == close_id:
                return "close"
            if tok == open_id:
                return "open"
            if tok in bounds:
                return None
        return None

    def _tool_kind(self, ctx: ParseContext) -> tuple[str | None, dict[str, Any] | None]:
        choice = ctx.tool_choice
        if not ctx.tools:  # vLLM 0.33: no tools means tool_choice "none", so engine formats strip
            choice = "none"
        if choice == "none":  # engine formats still strip their markup; calls are dropped
            strip = self.tool is not None and self.tool.strip_on_none and ctx.enable_auto_tool_choice \
                and not (ctx.tools and self.tool.raw_on_none_with_tools)
            return ("none" if strip else None), None
        native_forced = self.tool is not None and not self.tool.guided_json
        if isinstance(choice, Mapping):
            if native_forced:
                return "native", None
            name = (choice.get("function") or {}).get("name")
            return "named", {"fixed_name": name}
        if choice == "required":
            return ("native" if native_forced else "required"), None
        if self.tool is not None and ctx.enable_auto_tool_choice:
            return "native", None
        return None, None

    def _tool_spec(self, kind: str) -> FormatSpec:
        if kind in ("native", "none"):
            assert self.tool is not None
            return self.tool
        return _GUIDED[kind]

    def _step(self, st: dict[str, Any], text: str, final: bool) -> list[Delta]:
        events: list[Any] = []
        if st["r"] is not None:
            assert self.reasoning is not None  # a reasoning state exists only with a reasoning spec
            r_events = machine.feed(self.reasoning, st["r"], text) if text else []
            if final:
                r_events += machine.finish(self.reasoning, st["r"])
        else:
            r_events = [("content", text)] if text else []
        combined = self._combined
        tspec = self._tool_spec(st["tk"]) if st["t"] is not None and not combined else None
        for ev in r_events:
            if ev[0] == "content" and tspec is not None:
                events += machine.feed(tspec, st["t"], ev[1])
            elif ev[0] in ("content", "reasoning") or st["t"] is not None:
                events.append(ev)
        if final and tspec is not None:
            events += machine.finish(tspec, st["t"])
        if st["tk"] == "none":
            if not st.get("nd") and any(ev[0] == "name" for ev in events):
                st["nd"] = 1  # a call was parsed and dropped (see ``dropped_calls``)
            events = [ev for ev in events if ev[0] in ("content", "reasoning")]
        if "kn" in st:
            events = _drop_unknown(st, events)
        call_id = self.tool.call_id if self.tool is not None and st["t"] is not None else None
        return _to_deltas(events, st["ir"], st["pt"], _ids(call_id, st.get("h", 0)))


def _drop_unknown(st: dict[str, Any], events: list[Any]) -> list[Any]:
    """Drop the calls to tools the request did not declare (``FormatSpec.drop_unknown_tools``,
    SGLang's default) and renumber the later calls. ``st["dr"]`` lists the dropped indices (a
    new list on change: states are copied one level deep)."""
    out: list[Any] = []
    for ev in events:
        if ev[0] not in ("name", "args"):
            out.append(ev)
            continue
        index = ev[1]
        if ev[0] == "name" and ev[2] not in st["kn"] and index not in st["dr"]:
            st["dr"] = [*st["dr"], index]
        if index in st["dr"]:
            continue
        out.append((ev[0], index - sum(1 for d in st["dr"] if d < index), *ev[2:]))
    return out


def _copy_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """Copy the mutable levels (phase states and body states) so steps stay pure."""
    new = dict(state)
    for phase in ("r", "t"):
        if new.get(phase) is not None:
            new[phase] = dict(new[phase])
            if "j" in new[phase]:
                new[phase]["j"] = dict(new[phase]["j"])
            if new[phase]["body"] is not None:
                new[phase]["body"] = dict(new[phase]["body"])
    return new


IdFor = Callable[[int, str], str | None]


def _ids(call_id: Callable[[int, str], str] | None, history: int) -> IdFor:
    """Id of call ``index`` named ``name``: the spec's native id at its conversation position."""
    if call_id is None:
        return lambda index, name: None
    return lambda index, name: call_id(history + index, name)


def _to_deltas(events: list[Any], include_reasoning: bool, parallel: bool, ids: IdFor) -> list[Delta]:
    """Coalesce one step's events into at most one :class:`Delta`."""
    content: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCallDelta] = []
    for ev in events:
        kind = ev[0]
        if kind == "content":
            content.append(ev[1])
        elif kind == "reasoning":
            if include_reasoning:
                reasoning.append(ev[1])
        elif parallel or ev[1] == 0:
            _add_call_event(calls, ev, ids)
    delta = Delta(
        content="".join(content) or None,
        reasoning="".join(reasoning) if reasoning else None,  # "": FormatSpec.empty_reasoning
        tool_calls=tuple(calls),
    )
    return [delta] if delta.content or delta.reasoning is not None or delta.tool_calls else []


def _add_call_event(calls: list[ToolCallDelta], ev: tuple[Any, ...], ids: IdFor) -> None:
    """Add one engine call event; a name event's native id (``ev[3]``, e.g. Kimi's header)
    wins over the spec's ``call_id``."""
    kind, index, value = ev[:3]
    if kind == "name":
        native = ev[3] if len(ev) > 3 else None
        calls.append(ToolCallDelta(index=index, id=native or ids(index, value), name=value))
        return
    if not value:
        return
    last = calls[-1] if calls else None
    if last is not None and last.index == index:
        calls[-1] = ToolCallDelta(
            index=index, id=last.id, name=last.name, arguments=(last.arguments or "") + value
        )
    else:
        calls.append(ToolCallDelta(index=index, arguments=value))


def join_deltas(deltas: Sequence[Delta]) -> ParseResult:
    """Join stream deltas into a batch result (empty text → ``None``, except a reasoning ``""``
    that a delta carries, ``FormatSpec.empty_reasoning``; calls by index)."""
    content = "".join(d.content or "" for d in deltas) or None
    parts = [d.reasoning for d in deltas if d.reasoning is not None]
    reasoning = "".join(parts) if parts else None
    names: dict[int, str] = {}
    args: dict[int, list[str]] = {}
    ids: dict[int, str | None] = {}
    for d in deltas:
        for c in d.tool_calls:
            if c.name is not None:
                names[c.index] = c.name
                ids.setdefault(c.index, c.id)
            args.setdefault(c.index, []).append(c.arguments or "")
    calls = tuple(
        ToolCall(name=names[i], arguments="".join(args.get(i, [])), id=ids.get(i)) for i in sorted(names)
    )
    return ParseResult(content=content, reasoning=reasoning, tool_calls=calls)
