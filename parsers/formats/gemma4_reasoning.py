"""``gemma4`` reasoning (Gemma 4; vLLM 0.33 ``Gemma4Parser`` engine).

Wire format: starts in content; ``<|channel>thought\\nreasoning<channel|>content``. The
``thought\\n`` prefix of a channel is stripped; ``<|tool_call>`` ends reasoning implicitly and
is handed on as content (a call drafted inside the channel — reasoning or ``<channel|>``
follows it — stays reasoning, as qwen3 BR25); a bare ``<channel|>`` in content is dropped;
trailing reasoning whitespace is dropped. An output that starts with ``thought\\n`` is a
channel whose opener the model left out (vLLM injects ``<|channel>``). A prompt that ends
inside an open ``<|channel>`` (after a tool response) starts in reasoning; turn boundaries
``<|turn>``, ``<|tool_response>``, ``<|tool_call>``. ``enable_thinking`` (default False) does
not change parsing, only ``reasoning_ended`` before any output: with thinking on the start
mode ``SW`` counts as reasoning not yet ended (vLLM ``wait_for_reasoning``).

Deliberate differences (vLLM batch/stream disagree, we follow streaming, chunk-independent):
a ``<channel|>`` without opener is dropped and the text before it stays content (vLLM batch
makes it reasoning); a channel holding only ``thought`` (no newline) keeps it as reasoning.

Modes: ``S``/``SW`` content at the start (``SW``: thinking on), ``C`` content, ``R0``
reasoning before the prefix is decided, ``R`` reasoning, ``TC0``/``TA0`` held tool call /
after it (see ``think.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..spec import CONTENT, HOLD, REASONING, FormatSpec, Transition

_KEEP = Transition("TC0", keep=True)
_RELEASE_TO_CONTENT = Transition("C", release="reasoning")


def _choose(kwargs: Mapping[str, Any], prompt_last: str | None) -> str:
    if prompt_last == "open":
        return "R0"
    return "SW" if kwargs.get("enable_thinking", False) else "S"


_START = {
    "START": Transition("R0"),
    "END": Transition("C"),
    "THOUGHT": Transition("R"),
}


SPEC = FormatSpec(
    name="gemma4",
    kind="reasoning",
    markers={
        "START": "<|channel>",
        "END": "<channel|>",
        "THOUGHT": "thought\n",
        "TOOL": "<|tool_call>",
        "TOOL_END": "<tool_call|>",
    },
    modes={
        "S": CONTENT,
        "SW": CONTENT,
        "C": CONTENT,
        "R0": REASONING,
        "R": REASONING,
        "TC0": HOLD,
        "TA0": HOLD,
    },
    transitions={
        **{(start, marker): tr for start in ("S", "SW") for marker, tr in _START.items()},
        ("C", "START"): Transition("R0"),
        ("C", "END"): Transition("C"),
        ("R0", "START"): Transition("R0"),
        ("R0", "END"): Transition("C"),
        ("R0", "THOUGHT"): Transition("R"),
        ("R0", "TOOL"): _KEEP,
        ("R", "START"): Transition("R"),
        ("R", "END"): Transition("C"),
        ("R", "TOOL"): _KEEP,
        ("TC0", "TOOL_END"): Transition("TA0", keep=True),
        ("TC0", "END"): _RELEASE_TO_CONTENT,
        ("TA0", "TOOL"): _KEEP,
        ("TA0", "END"): _RELEASE_TO_CONTENT,
    },
    initial_mode="S",
    reasoning_modes=frozenset({"SW", "R0", "R", "TC0", "TA0"}),
    break_on_text={
        "S": Transition("C"),
        "SW": Transition("C"),
        "R0": Transition("R"),
        "TA0": Transition("R", release="reasoning"),
    },
    finish_release={"TC0": CONTENT, "TA0": CONTENT},
    choose_mode=_choose,
    prompt_open="<|channel>",
    prompt_close="<channel|>",
    turn_boundaries=("<|turn>", "<|tool_response>", "<|tool_call>"),
    strip_reasoning_tail=True,
)
