"""Factory for ``<think>``-style reasoning formats (qwen3, deepseek_r1 and their relatives).

Wire format: optional ``START`` (often pre-opened by the chat template), reasoning text,
``END``, content. Start markers inside reasoning are dropped. Options cover the differences
the vLLM 0.33 families show (parsers.md section 2):

* ``implicit_ends``: tool-call ``(start, end)`` marker pairs that end reasoning implicitly
  (qwen3: ``<tool_call>``). The call is *held*: if reasoning text or ``END`` follows the call
  it was a draft and stays reasoning (BR25); if only calls/whitespace follow until the end of
  the stream, reasoning ended before the first held call and the held text becomes content
  (handed to the tool phase). The held text is the unsent part of open calls.
* ``drop_stray_end``: a duplicate ``END`` in content is dropped (qwen3) instead of kept.
* ``choose_mode``: initial mode from ``chat_template_kwargs`` and the prompt's current turn.
* ``start`` / ``end`` may be tuples of equivalent markers (the first is the one looked for in
  the prompt), e.g. Mistral ``[THINK]`` (v13 special token) and ``<think>`` (v11 text).
* ``reopen``: ``START`` in content opens reasoning again (GLM, Mistral, which start in content).
* ``drop_leading_end``: adds mode ``C0``, content at the very start of the output, where an
  ``END`` is dropped (MiniMax M3 without prefilled thinking: vLLM strips a leading
  ``</mm:think>``); the first non-whitespace text or marker leaves it for ``C``.
* ``direct_ends``: markers that end reasoning and stay in content at once, for tool formats
  without an end marker (Mistral ``[TOOL_CALLS]``): no draft detection is possible there.
  From the marker on (from reasoning or content) the rest is content of mode ``T``, where the
  reasoning markers are plain text: they belong to the tool calls' arguments (vLLM's engine
  is in its tool states there and has no think transitions).
* Tool calls in content (``implicit_ends`` pairs) run in mode ``CT<i>`` up to their end
  marker, where reasoning markers are plain text too (a ``</think>`` inside arguments is not a
  stray end to drop, a ``<think>`` not a reopening).
* ``identity``: adds mode ``I`` where every marker is plain content (thinking switched off in
  parsers that then delegate to vLLM's identity parser: deepseek_v3, holo2, glm45, kimi_k2).
* ``strip_reasoning_tail``: see :class:`parsers.spec.FormatSpec` (vLLM engine default).
* ``empty_reasoning``: see :class:`parsers.spec.FormatSpec` (on for the families on
  vLLM's legacy ``BaseThinkingReasoningParser``, whose batch reasoning is ``""``, not null).

* Structured output (``ParseContext.structured_output``): where the chooser picks ``R``, the
  parser starts in ``U`` (undecided) instead: text is held until a reasoning marker shows it
  was reasoning (``END``: released as reasoning) or not (``START``: released as content, then
  reasoning; a tool-call start or direct end: content), and is content at the end of the
  stream or beyond ``UNDECIDED_LIMIT`` characters. A JSON answer with no ``<think>`` is content.

Modes: ``R`` reasoning, ``C`` content, ``I`` identity, ``U`` undecided (structured output),
``TC<i>``/``TA<i>`` held tool call / after it (inside reasoning), ``CT<i>`` tool call in
content, ``T`` after a direct end.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..spec import CONTENT, HOLD, REASONING, FormatSpec, ModeChooser, Transition

REASONING_MODE = "R"
CONTENT_MODE = "C"
IDENTITY_MODE = "I"
TOOLS_MODE = "T"
UNDECIDED_MODE = "U"
LEADING_MODE = "C0"
#: Held undecided text beyond this many characters is content (bounded state).
UNDECIDED_LIMIT = 8192


def prompt_decides(default: str | Callable[[Mapping[str, Any]], str]) -> ModeChooser:
    """Chooser: the prompt's last reasoning marker in this turn wins, else ``default`` (a mode,
    or a function of ``chat_template_kwargs`` returning one)."""

    def choose(kwargs: Mapping[str, Any], prompt_last: str | None) -> str:
        if prompt_last == "close":
            return CONTENT_MODE
        if prompt_last == "open":
            return REASONING_MODE
        return default if isinstance(default, str) else default(kwargs)

    return choose


def ignore_prompt(default: str | Callable[[Mapping[str, Any]], str]) -> ModeChooser:
    """Chooser that does not look at the prompt (formats without known turn-boundary tokens,
    where a backward scan would find ``</think>`` of an earlier turn)."""

    def choose(kwargs: Mapping[str, Any], prompt_last: str | None) -> str:
        return default if isinstance(default, str) else default(kwargs)

    return choose


def thinking_flag(kwargs: Mapping[str, Any], default: bool) -> bool:
    """vLLM's ``thinking``/``enable_thinking`` rule (glm45, kimi_k2, deepseek_v3, holo2):
    ``default`` when neither key is given, else ``bool(thinking) or bool(enable_thinking)``."""
    thinking, enable = kwargs.get("thinking"), kwargs.get("enable_thinking")
    if thinking is None and enable is None:
        return default
    return bool(thinking) or bool(enable)


def thinking_switch(default: bool) -> ModeChooser:
    """Chooser for parsers with a ``thinking``/``enable_thinking`` switch (see
    :func:`thinking_flag`): on → the prompt decides (default reasoning); off → identity."""
    on = prompt_decides(REASONING_MODE)

    def choose(kwargs: Mapping[str, Any], prompt_last: str | None) -> str:
        return on(kwargs, prompt_last) if thinking_flag(kwargs, default) else IDENTITY_MODE

    return choose


def _names(prefix: str, texts: str | tuple[str, ...]) -> dict[str, str]:
    texts = (texts,) if isinstance(texts, str) else texts
    return {prefix if i == 0 else f"{prefix}{i}": t for i, t in enumerate(texts)}


def think_spec(
    name: str,
    *,
    start: str | tuple[str, ...] = "<think>",
    end: str | tuple[str, ...] = "</think>",
    implicit_ends: tuple[tuple[str, str], ...] = (),
    direct_ends: tuple[str, ...] = (),
    drop_stray_end: bool = False,
    reopen: bool = False,
    identity: bool = False,
    strip_reasoning_tail: bool = False,
    choose_mode: ModeChooser | None = None,
    turn_boundaries: tuple[str, ...] = (),
    empty_reasoning: bool = False,
    drop_leading_end: bool = False,
) -> FormatSpec:
    """Build a ``<think>``-style reasoning spec (see module docstring for the options)."""
    starts, ends = _names("START", start), _names("END", end)
    markers = {**starts, **ends}
    modes = {REASONING_MODE: REASONING, CONTENT_MODE: CONTENT, UNDECIDED_MODE: HOLD}
    if identity:
        modes[IDENTITY_MODE] = CONTENT
    trans = {(REASONING_MODE, k): Transition(REASONING_MODE) for k in starts}
    trans |= {(UNDECIDED_MODE, k): Transition(REASONING_MODE, release="content") for k in starts}
    trans |= {(UNDECIDED_MODE, k): Transition(CONTENT_MODE, release="reasoning") for k in ends}
    trans |= {(REASONING_MODE, k): Transition(CONTENT_MODE) for k in ends}
    if drop_stray_end:
        trans |= {(CONTENT_MODE, k): Transition(CONTENT_MODE) for k in ends}
    if reopen:
        trans |= {(CONTENT_MODE, k): Transition(REASONING_MODE) for k in starts}
    for i, text in enumerate(direct_ends):
        markers[f"DIRECT{i}"] = text
        modes[TOOLS_MODE] = CONTENT
        for mode in (REASONING_MODE, CONTENT_MODE):
            trans[(mode, f"DIRECT{i}")] = Transition(TOOLS_MODE, keep=True)
        trans[(UNDECIDED_MODE, f"DIRECT{i}")] = Transition(TOOLS_MODE, keep=True, release="content")
    breaks: dict[str, Transition] = {}
    if drop_leading_end:
        modes[LEADING_MODE] = CONTENT
        trans |= {(LEADING_MODE, k): Transition(CONTENT_MODE) for k in ends}
        if reopen:
            trans |= {(LEADING_MODE, k): Transition(REASONING_MODE) for k in starts}
        breaks[LEADING_MODE] = Transition(CONTENT_MODE)
    finish: dict[str, str] = {UNDECIDED_MODE: CONTENT}
    for i, (tool_start, tool_end) in enumerate(implicit_ends):
        call, after, ts, te = f"TC{i}", f"TA{i}", f"TOOL_START{i}", f"TOOL_END{i}"
        markers |= {ts: tool_start, te: tool_end}
        modes |= {call: HOLD, after: HOLD, f"CT{i}": CONTENT}
        trans |= {
            (REASONING_MODE, ts): Transition(call, keep=True),
            (call, te): Transition(after, keep=True),
            (after, ts): Transition(call, keep=True),
            (CONTENT_MODE, ts): Transition(f"CT{i}", keep=True),
            (UNDECIDED_MODE, ts): Transition(f"CT{i}", keep=True, release="content"),
            (f"CT{i}", te): Transition(CONTENT_MODE, keep=True),
        }
        for k in ends:
            trans[(call, k)] = Transition(CONTENT_MODE, release="reasoning")
            trans[(after, k)] = Transition(CONTENT_MODE, release="reasoning")
        breaks[after] = Transition(REASONING_MODE, release="reasoning")
        finish |= {call: CONTENT, after: CONTENT}
    return FormatSpec(
        name=name,
        kind="reasoning",
        markers=markers,
        modes=modes,
        transitions=trans,
        initial_mode=REASONING_MODE,
        reasoning_modes=frozenset(m for m, sink in modes.items() if sink != CONTENT),
        break_on_text=breaks,
        finish_release=finish,
        hold_limit={UNDECIDED_MODE: (UNDECIDED_LIMIT, Transition(CONTENT_MODE, release="content"))},
        choose_mode=choose_mode or prompt_decides(REASONING_MODE),
        prompt_open=starts["START"],
        prompt_close=ends["END"],
        turn_boundaries=turn_boundaries,
        strip_reasoning_tail=strip_reasoning_tail,
        empty_reasoning=empty_reasoning,
    )
