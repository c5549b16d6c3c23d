"""Declarative format specs driven by the one engine in :mod:`parsers.machine`.

A format (one reasoning or tool-call family) is a frozen :class:`FormatSpec`: named text
markers, a set of modes each with a *sink* (where plain text in that mode goes), and a
transition table ``(mode, marker) -> Transition``. A marker with no transition from the
current mode is plain text of that mode. Tool-call bodies are handed to the spec's one
:class:`BodyHandler` (an argument converter such as :class:`parsers.jsoncalls.JsonCalls`).

Sinks:

* ``"content"`` / ``"reasoning"``: text is emitted as that kind.
* ``"drop"``: text is discarded (e.g. hermes text after a tool call).
* ``"hold"``: text (and kept markers) accumulate in ``state["hold"]`` until a transition
  releases them with ``Transition.release`` or finish releases them with
  ``FormatSpec.finish_release[mode]``. Used for tentative decisions (qwen3: is a
  ``<tool_call>`` inside reasoning a draft or the real call?).
* ``"body"``: text goes to ``FormatSpec.body`` until the handler reports the body's end, or
  until a marker with a transition from the body mode arrives (the engine then closes the
  body with ``BodyHandler.finish`` and applies the transition; used by formats whose calls
  end with a special token, e.g. Kimi ``<|tool_call_end|>``).

Headers (routing): a ``Transition`` with ``route=True`` picks its target from the text held
in ``state["hold"]`` (e.g. the call header ``functions.get_weather:0`` or a Harmony message
header ``<|start|>assistant<|channel|>commentary to=functions.f``): ``FormatSpec.route(header)``
returns the next mode (``None`` → ``Transition.to``). The header is consumed; when the target
is a body mode it is handed to ``BodyHandler.start`` in place of the marker text.

Call ids: a handler's name event may carry the native id read from the output
(``("name", name, id)``, Kimi's header ``functions.get_weather:0``); it wins over the id
``FormatSpec.call_id`` mints from the call's conversation position.

Example (a minimal ``<think>`` reasoning format)::

    SPEC = FormatSpec(
        name="mini", kind="reasoning",
        markers={"START": "<think>", "END": "</think>"},
        modes={"R": REASONING, "C": CONTENT},
        transitions={("R", "START"): Transition("R"), ("R", "END"): Transition("C")},
        initial_mode="R", reasoning_modes=frozenset({"R"}),
    )

Adding a family (see ``formats/hermes_tools.py`` and ``formats/qwen3_reasoning.py``):

1. Write ``parsers/formats/<family>_reasoning.py`` or ``<family>_tools.py`` (naming scheme in
   ``parsers/formats/__init__.py``) exposing ``SPEC``; reuse a factory when one fits
   (``formats.think_factory.think_spec`` for ``<think>``-style reasoning,
   ``formats.hermes_tools.hermes_spec`` for ``<tag>{json}</tag>`` calls,
   ``formats.json_factory.json_tool_spec`` for any start marker followed by a JSON call object
   or array: llama, granite, jamba, xlam, mistral ..., ``formats.xml_factory.xml_spec`` with a
   ``parsers.xmlcalls.XmlTags`` for XML-style calls, ``formats.pythonic_factory.pythonic_spec``
   for pythonic calls, ``parsers.rawargs.RawArgs`` with a routed header for verbatim arguments
   between special tokens: kimi, deepseek, harmony),
   else build a ``FormatSpec`` as above. Every special token the format reads must be a
   marker text (even one only the body handler reads), so the derender keeps that token's
   text. Schema-aware formats set ``tool_context`` (e.g. ``parsers.arguments.tool_types``)
   so the body handler gets the request's tool types.
2. Tool formats route call bodies to a ``"body"`` mode; write at most one ``BodyHandler``
   (``parsers.jsoncalls.JsonCalls`` covers JSON objects/arrays) with ``body_end_mode`` (where
   text after a call goes: ``"drop"`` or ``"content"`` sink) and ``reject_mode``.
3. Register the vLLM name in ``parsers/__init__.py`` (``_REASONING`` / ``_TOOL``).
4. Run ``python -m parsers.conformance ../shared/cases/parser_cases.jsonl --parser NAME``;
   record deliberate differences in ``parsers/conformance_overrides.json`` with a reason.

Rules the engine guarantees for every spec: markers split over chunks are found (the
partial tail is held back, at most the longest marker length - 1 chars, and flushed as text
at finish); the batch result is the joined stream; state stays a small JSON dict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

CONTENT: Final = "content"
REASONING: Final = "reasoning"
DROP: Final = "drop"
HOLD: Final = "hold"
BODY: Final = "body"
SINKS = frozenset({CONTENT, REASONING, DROP, HOLD, BODY})
#: Every character ``str.isspace`` accepts: ``text.rstrip(ANY_WHITESPACE) == text.rstrip()``.
ANY_WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)

#: An engine event: ``("content", text)``, ``("reasoning", text)``, ``("name", index, name[, id])``,
#: ``("args", index, fragment)``; handlers emit ``("name", name)`` or ``("name", name, id)``,
#: ``("args", fragment)``, ``("reject", raw_text)`` and the engine adds the call index.
Event = tuple[Any, ...]


class BodyHandler(Protocol):
    """Incremental converter of one tool-call body (the text after a start marker).

    Its state is a JSON-compatible dict owned by the engine (``state["body"]``).
    """

    def start(self, marker: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """New body state; ``marker`` is the start-marker text (kept for rejection), or the
        header text when the body was entered by a routed transition."""
        ...

    def feed(self, st: dict[str, Any], text: str) -> tuple[list[Event], int | None]:
        """Consume ``text``; return events and ``None`` (all consumed, body continues) or the
        index in ``text`` where the body ended (the rest goes back to the lexer; when the
        body ended inside text it buffered during an earlier call, a ``("back", tail)``
        event returns that buffered tail, which the lexer reads before ``text``). A
        ``("reject", raw)`` event means the body was not a call: ``raw`` becomes content and
        the engine switches to ``FormatSpec.reject_mode``."""
        ...

    def finish(self, st: dict[str, Any]) -> list[Event]:
        """End of stream (or a closing marker) inside the body: release withheld pieces or
        reject."""
        ...


@dataclass(frozen=True, slots=True)
class Transition:
    """What a marker does in a mode.

    Attributes:
        to: the next mode.
        keep: send the marker text to the *next* mode's sink instead of dropping it. Body
            modes receive the marker via ``BodyHandler.start`` (for rejection); with ``keep``
            the marker is instead the body's first text (``feed``), e.g. a ``{`` that both
            starts and opens a JSON call.
        release: before switching, release ``state["hold"]`` as ``"content"`` or
            ``"reasoning"``, or discard it (``"drop"``, e.g. whitespace-only content held
            until a tool call shows it is not wanted).
    """

    to: str
    keep: bool = False
    release: Literal["content", "reasoning", "drop"] | None = None
    route: bool = False


#: Chooses the initial mode of a reasoning spec from ``chat_template_kwargs`` and the last
#: reasoning marker of the prompt's current turn (``"open"``, ``"close"`` or ``None``).
ModeChooser = Callable[[Mapping[str, Any], str | None], str]


@dataclass(frozen=True, slots=True)
class FormatSpec:
    """One parser family as data. See the module docstring for the meaning of each part.

    Attributes:
        name: the vLLM parser name.
        kind: ``"reasoning"`` or ``"tool"``.
        markers: marker name -> literal text (special tokens appear as their text).
        modes: mode -> sink.
        transitions: ``(mode, marker name) -> Transition``.
        initial_mode: start mode (reasoning specs may override it with ``choose_mode``).
        reasoning_modes: modes in which reasoning has not ended (``Parser.reasoning_ended``).
        break_on_text: mode -> transition applied when non-whitespace plain text arrives
            in that mode (the text then goes to the new mode).
        finish_release: mode -> kind the held text is released as at end of stream.
        finish_partial: modes in which a character left incomplete at the end of the output
            (a ``length`` cut inside a multi-byte character) is kept as U+FFFD rather than
            dropped (Harmony's raw recovery of an unfinished header decodes the ids whole).
        body: the argument converter for ``"body"`` modes.
        body_end_mode: mode after a body ends normally.
        reject_mode: mode after a body is rejected (its raw text becomes content).
        body_options: passed to ``BodyHandler.start``.
        choose_mode: initial-mode chooser for reasoning specs (prompt/kwargs aware).
        prompt_open / prompt_close: reasoning markers looked for in the prompt's current turn.
        turn_boundaries: marker texts that end the backward prompt scan (e.g. ``<|im_start|>``).
        guided_json: tool specs only: ``tool_choice`` required/named parse vLLM's guided JSON
            (``supports_required_and_named``) instead of the native syntax.
        route: header text -> next mode, for ``Transition(route=True)``.
        hold_limit: hold mode -> ``(max characters, transition)`` applied when the held text
            grows past the limit (a header that never ends is not a header: release or drop
            it), so the state stays bounded.
        separators: sink kind (``"content"``/``"reasoning"``) -> text put between the texts
            of two separate visits to modes of that kind (Harmony joins messages with ``\n``).
        hold_trailing: content mode -> characters whose trailing run is withheld (in
            ``state["hold"]``, at most ``machine.MAX_TRAILING`` of them) until more text shows
            it is not the end of the content: dropped when a body then commits a call (e.g. the
            ``\n`` before ``<tool_call>``; content is stripped when tools are called), released
            as content otherwise (other transitions unless their ``release`` says otherwise,
            rejected bodies before their raw text, end of stream unless ``finish_release``
            says otherwise). ``ANY_WHITESPACE`` holds all whitespace (Python ``str.strip``).
        hold_blank_only: with ``hold_trailing``: the run withheld before the first call is
            content, not dropped, when the content before it has other text (``state["nw"]``):
            vLLM 0.33's engine streaming drops only whitespace-only content before a call and
            sends other content with its whitespace (``ParserEngine._events_to_delta``,
            ``_content_has_nonws``), where its batch strips the content of every output with
            calls; we follow its stream.
        call_id: native tool-call ids: ``call_id(position, name)`` where ``position`` counts
            the calls of the conversation (``history_tool_call_cnt`` + call index); the id is
            sent on the call's first delta (Mistral 9-char ids).
        tool_context: tool specs only: computes, once per request at ``Parser.start``, a small
            JSON value from the request's ``tools`` (e.g. declared names and parameter types);
            the engine keeps it in its state as ``ctx`` and passes it to the body handler as
            ``feed(st, text, ctx)`` / ``finish(st, ctx)``, so later chunks need no request.
        strip_on_none: tool specs only: with ``tool_choice="none"`` the format still runs and its
            markup is removed, only the calls are dropped (vLLM engine parsers).
        raw_on_none_with_tools: with ``strip_on_none``: when the request has ``tools`` and
            ``tool_choice="none"`` the format does not run, its markup stays content; it strips
            only without tools (vLLM 0.33 pre-v11 Mistral: ``tool_choice == "none" and tools``
            returns the output as content).
        forced_mode: ``guided_json=False`` specs: initial mode when ``tool_choice`` is
            required/named (e.g. Mistral: a bare JSON array may start the output).
        reject_to_origin: a rejected body's text goes to the sink of the mode the body started
            from, and the engine returns there (instead of ``reject_mode``): a ``{`` in prose
            after a llama call is dropped with that prose, before the first call it is content.
        strip_reasoning_tail: reasoning specs: trailing whitespace of reasoning is held back
            (``state["ws"]``) and sent only when more reasoning text follows; it is dropped
            when anything else follows or the stream ends (vLLM engine
            ``strip_trailing_reasoning_whitespace``, e.g. ``\n</think>``).
        preamble: text sent as content once, before anything else of the output, even for
            an empty output (``minimax_m2_append_think`` prepends ``<think>``).
        empty_reasoning: reasoning specs: when the result has reasoning ``""`` rather than
            ``None`` although no reasoning text came (vLLM 0.33's ``BaseThinkingReasoningParser``
            batch ``extract_reasoning``, which returns the text before the end marker even when
            it is empty): ``True`` once the output started in a reasoning mode or a marker
            opened one (R1 family: ``</think>x``, ``<think></think>x`` and an empty output
            give ``""``; MiniMax M3 ``<mm:think></mm:think>x``); ``False`` (default): empty
            reasoning is ``None`` (vLLM engine parsers). The engine sends the ``""`` at
            finish (``Delta.reasoning == ""``).
        strip_content_start: reasoning specs: characters dropped from the start of the content
            that follows the end of reasoning (Granite 4.2 thinking: ``"\\n"``, its template
            writes ``\\n</think>\\n``); state ``sl`` while only such characters came.
        recover_newlines: reasoning specs: literal ``\\n`` escapes in reasoning and content become
            newlines outside code and LaTeX (MiniCPM-V; :mod:`parsers.newlines`), state ``nl``.
        adapt: the spec to use for a model's ``(vocab, tokenizer_config)`` (``get_parser`` calls
            it when it is given a vocab or config), for checkpoints whose marker tokens carry a
            per-checkpoint suffix (Hunyuan ``<think:6124c78e>``).
        drop_unknown_tools: tool specs only: calls to tools the request did not declare are
            dropped and later calls renumbered (SGLang's detectors validate names against
            ``tools``; used by the SGLang aliases). Only the names are kept in the state.
    """

    name: str
    kind: Literal["reasoning", "tool"]
    markers: Mapping[str, str]
    modes: Mapping[str, str]
    transitions: Mapping[tuple[str, str], Transition]
    initial_mode: str
    reasoning_modes: frozenset[str] = frozenset()
    break_on_text: Mapping[str, Transition] = field(default_factory=dict)
    finish_release: Mapping[str, str] = field(default_factory=dict)
    finish_partial: frozenset[str] = frozenset()
    body: BodyHandler | None = None
    body_end_mode: str | None = None
    reject_mode: str | None = None
    body_options: Mapping[str, Any] = field(default_factory=dict)
    choose_mode: ModeChooser | None = None
    prompt_open: str | None = None
    prompt_close: str | None = None
    turn_boundaries: tuple[str, ...] = ()
    guided_json: bool = True
    route: Callable[[str], str | None] | None = None
    hold_limit: Mapping[str, tuple[int, Transition]] = field(default_factory=dict)
    separators: Mapping[str, str] = field(default_factory=dict)
    hold_trailing: Mapping[str, str] = field(default_factory=dict)
    hold_blank_only: bool = False
    call_id: Callable[[int, str], str] | None = None
    tool_context: Callable[[Any], Any] | None = None
    strip_on_none: bool = False
    raw_on_none_with_tools: bool = False
    forced_mode: str | None = None
    reject_to_origin: bool = False
    strip_reasoning_tail: bool = False
    preamble: str = ""
    drop_unknown_tools: bool = False
    empty_reasoning: bool = False
    strip_content_start: str = ""
    recover_newlines: bool = False
    adapt: Callable[[Mapping[str, int], Mapping[str, Any]], FormatSpec] | None = None

    def __post_init__(self) -> None:
        _check(self)


def _check(spec: FormatSpec) -> None:
    """Reject inconsistent tables early (unknown modes, markers, sinks, missing body)."""
    modes = spec.modes
    if spec.kind not in ("reasoning", "tool"):
        raise ValueError(f"{spec.name}: kind must be 'reasoning' or 'tool'")
    bad_sinks = {m: s for m, s in modes.items() if s not in SINKS}
    if bad_sinks:
        raise ValueError(f"{spec.name}: unknown sinks {bad_sinks}")
    targets = [t.to for t in spec.transitions.values()] + [t.to for t in spec.break_on_text.values()]
    targets += [m for m in (spec.initial_mode, spec.body_end_mode, spec.reject_mode) if m]
    targets += [t.to for _, t in spec.hold_limit.values()]
    targets += list(spec.hold_trailing) + ([spec.forced_mode] if spec.forced_mode else [])
    unknown = {m for m in targets if m not in modes} | {m for m, _ in spec.transitions if m not in modes}
    if unknown:
        raise ValueError(f"{spec.name}: unknown modes {sorted(unknown)}")
    missing = {k for _, k in spec.transitions if k not in spec.markers}
    if missing:
        raise ValueError(f"{spec.name}: transitions use undefined markers {sorted(missing)}")
    if BODY in modes.values() and (
        spec.body is None or spec.body_end_mode is None or spec.reject_mode is None
    ):
        raise ValueError(f"{spec.name}: a body mode needs body, body_end_mode and reject_mode")
    if any(t.route for t in spec.transitions.values()) and spec.route is None:
        raise ValueError(f"{spec.name}: a routed transition needs FormatSpec.route")
    if any(not text for text in spec.markers.values()):
        raise ValueError(f"{spec.name}: empty marker text")
