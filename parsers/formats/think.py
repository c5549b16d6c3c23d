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

Modes: ``R`` reasoning, ``C`` content, ``TC<i>``/``TA<i>`` held tool call / after it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..spec import CONTENT, HOLD, REASONING, FormatSpec, ModeChooser, Transition

REASONING_MODE = "R"
CONTENT_MODE = "C"


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


def think_spec(
    name: str,
    *,
    start: str = "<think>",
    end: str = "</think>",
    implicit_ends: tuple[tuple[str, str], ...] = (),
    drop_stray_end: bool = False,
    choose_mode: ModeChooser | None = None,
    turn_boundaries: tuple[str, ...] = (),
) -> FormatSpec:
    """Build a ``<think>``-style reasoning spec (see module docstring for the options)."""
    markers = {"START": start, "END": end}
    modes = {REASONING_MODE: REASONING, CONTENT_MODE: CONTENT}
    trans = {
        (REASONING_MODE, "START"): Transition(REASONING_MODE),
        (REASONING_MODE, "END"): Transition(CONTENT_MODE),
    }
    if drop_stray_end:
        trans[(CONTENT_MODE, "END")] = Transition(CONTENT_MODE)
    breaks, finish = {}, {}
    for i, (tool_start, tool_end) in enumerate(implicit_ends):
        call, after, ts, te = f"TC{i}", f"TA{i}", f"TOOL_START{i}", f"TOOL_END{i}"
        markers |= {ts: tool_start, te: tool_end}
        modes |= {call: HOLD, after: HOLD}
        trans |= {
            (REASONING_MODE, ts): Transition(call, keep=True),
            (call, te): Transition(after, keep=True),
            (call, "END"): Transition(CONTENT_MODE, release="reasoning"),
            (after, ts): Transition(call, keep=True),
            (after, "END"): Transition(CONTENT_MODE, release="reasoning"),
        }
        breaks[after] = Transition(REASONING_MODE, release="reasoning")
        finish |= {call: CONTENT, after: CONTENT}
    return FormatSpec(
        name=name,
        kind="reasoning",
        markers=markers,
        modes=modes,
        transitions=trans,
        initial_mode=REASONING_MODE,
        reasoning_modes=frozenset(m for m in modes if m != CONTENT_MODE),
        break_on_text=breaks,
        finish_release=finish,
        choose_mode=choose_mode or prompt_decides(REASONING_MODE),
        prompt_open=start,
        prompt_close=end,
        turn_boundaries=turn_boundaries,
    )
