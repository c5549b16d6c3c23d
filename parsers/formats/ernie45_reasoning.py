"""``ernie45`` reasoning (ERNIE-4.5 Thinking; vLLM 0.33 ``Ernie45ReasoningParser``).

Wire format: ``reasoning\\n</think>\\n\\n<response>\\ncontent\\n</response>\\n`` or
``reasoning</think>content`` (the template opens reasoning; an optional ``<think>`` is dropped;
no ``</think>`` → all reasoning). Whitespace right after ``</think>`` and the
``<response>``/``</response>`` wrapper are removed (the whitespace after ``</response>`` too);
text inside the wrapper is kept verbatim.

Differences from vLLM: its batch keeps text after ``</response>`` out of the content only when
both wrapper tags are present, and strips only newlines after ``</think>``; we drop any
whitespace there and keep non-whitespace text after ``</response>`` as content (never lose
output). The prompt is not scanned.
"""

from __future__ import annotations

from ..spec import CONTENT, DROP, REASONING, FormatSpec, Transition
from .think_factory import ignore_prompt

SPEC = FormatSpec(
    name="ernie45",
    kind="reasoning",
    markers={"START": "<think>", "END": "</think>", "RESP": "<response>", "RESP_END": "</response>"},
    modes={"R": REASONING, "A": DROP, "C": CONTENT},
    transitions={
        ("R", "START"): Transition("R"),
        ("R", "END"): Transition("A"),
        ("A", "RESP"): Transition("C"),
        ("A", "RESP_END"): Transition("A"),
        ("C", "RESP_END"): Transition("A"),
    },
    initial_mode="R",
    reasoning_modes=frozenset({"R"}),
    break_on_text={"A": Transition("C")},
    choose_mode=ignore_prompt("R"),
    empty_reasoning=True,  # vLLM batch: "" for "</think>x" (BaseThinkingReasoningParser)
)
