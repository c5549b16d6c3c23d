"""``granite`` reasoning (IBM Granite 3.x; vLLM 0.33 ``GraniteReasoningParser``).

Wire format: plain-text phrases, no special tokens:
``Here is my thought process:<reasoning>Here is my response:<content>`` (``Here's`` is accepted
for both). Without the thought-process phrase everything is content; text before it is
content. Partial phrases (``Here``...) are held back across chunks.

Deliberate difference: vLLM's batch needs both phrases (thought process without a response
phrase → everything content) and drops text before the first phrase, while its streaming
sends reasoning as soon as the first phrase is seen; we follow streaming, so batch == stream.
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
)
