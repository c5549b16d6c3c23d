"""``granite`` reasoning (IBM Granite 3.x; vLLM 0.33 ``GraniteReasoningParser``).

Wire format: plain-text phrases, no special tokens:
``Here is my thought process:<reasoning>Here is my response:<content>`` (``Here's`` is accepted
for both). The thought-process phrase counts only at the start of the output (after optional
whitespace); otherwise everything is content. Partial phrases (``Here``...) are held back.

Deliberate difference: vLLM's batch finds the phrases anywhere but needs both (thought process
without a response phrase → everything content), while its streaming accepts the first phrase
only at the start and sends reasoning as soon as it is seen; we follow streaming in both
modes, so batch == stream.
"""

from __future__ import annotations

from ..spec import CONTENT, REASONING, FormatSpec, Transition

_THINK = ("Here is my thought process:", "Here's my thought process:")
_RESPONSE = ("Here is my response:", "Here's my response:")

SPEC = FormatSpec(
    name="granite",
    kind="reasoning",
    markers={"THINK": _THINK[0], "THINK2": _THINK[1], "RESP": _RESPONSE[0], "RESP2": _RESPONSE[1]},
    modes={"P": CONTENT, "R": REASONING, "C": CONTENT},
    transitions={
        ("P", "THINK"): Transition("R"),
        ("P", "THINK2"): Transition("R"),
        ("R", "RESP"): Transition("C"),
        ("R", "RESP2"): Transition("C"),
    },
    initial_mode="P",
    reasoning_modes=frozenset({"R"}),
    break_on_text={"P": Transition("C")},
)
