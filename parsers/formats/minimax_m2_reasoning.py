"""``minimax_m2`` and ``minimax_m2_append_think`` reasoning (MiniMax-M2; vLLM 0.33
``MinimaxM2Parser`` engine and ``MiniMaxM2AppendThinkReasoningParser``).

minimax_m2: the output has only ``</think>``: ``reasoning</think>content``; no end marker →
all reasoning. ``<minimax:tool_call>`` ends reasoning implicitly (drafts inside reasoning stay
reasoning), a stray ``</think>`` in content is dropped, trailing reasoning whitespace is
dropped. The prompt is not scanned: MiniMax keeps ``<think>...</think>`` in the history and
has no turn-boundary terminals in vLLM, so a backward scan would see an earlier turn.

minimax_m2_append_think: no reasoning at all; the content is ``"<think>" + output`` (the
reasoning stays inline for clients that re-send it). ``<think>`` goes out once before the
first text, and for an empty output too (vLLM batch; its streaming sends nothing for an empty
output). Reasoning counts as ended after ``</think>`` (vLLM ``is_reasoning_end``).
"""

from __future__ import annotations

from ..spec import CONTENT, FormatSpec, Transition
from .think_factory import REASONING_MODE, ignore_prompt, think_spec

SPEC = think_spec(
    "minimax_m2",
    implicit_ends=(("<minimax:tool_call>", "</minimax:tool_call>"),),
    drop_stray_end=True,
    strip_reasoning_tail=True,
    choose_mode=ignore_prompt(REASONING_MODE),
)

APPEND_THINK = FormatSpec(
    name="minimax_m2_append_think",
    kind="reasoning",
    markers={"START": "<think>", "END": "</think>"},
    modes={"R": CONTENT, "C": CONTENT},
    transitions={("R", "END"): Transition("C", keep=True), ("C", "START"): Transition("R", keep=True)},
    initial_mode="R",
    reasoning_modes=frozenset({"R"}),
    preamble="<think>",
)
