"""``hunyuan_a13b`` reasoning (Hunyuan-A13B; vLLM 0.33 ``HunyuanA13BReasoningParser``).

Wire format: ``<think>\\nreasoning\\n</think>\\n<answer>\\ncontent\\n</answer>`` (markers as text;
vLLM matches the token sequences). Text outside ``<think>`` is content (no match → all
content); the wrappers including their newlines are removed; an empty think block gives
reasoning ``null``. ``</think>\\n<answer>\\n`` without the leading newline is accepted too
(vLLM's "fast" sequence). After ``\\n</answer>`` a new ``<think>\\n`` block may start.
Reasoning counts as ended only inside the answer (vLLM ``is_reasoning_end`` is its state
machine being in the response state), so a prompt never ends it.

Not copied: vLLM also accepts the fast start ``<think>\\n\\n`` (one token ``>\\n\\n``); matching it
as text would make the result depend on chunking, so its second newline stays reasoning.
"""

from __future__ import annotations

from ..spec import CONTENT, REASONING, FormatSpec, Transition

SPEC = FormatSpec(
    name="hunyuan_a13b",
    kind="reasoning",
    markers={
        "THINK": "<think>\n",
        "ANSWER": "\n</think>\n<answer>\n",
        "ANSWER_FAST": "</think>\n<answer>\n",
        "ANSWER_END": "\n</answer>",
    },
    modes={"I": CONTENT, "T": REASONING, "A": CONTENT},
    transitions={
        ("I", "THINK"): Transition("T"),
        ("T", "ANSWER"): Transition("A"),
        ("T", "ANSWER_FAST"): Transition("A"),
        ("A", "ANSWER_END"): Transition("I"),
    },
    initial_mode="I",
    reasoning_modes=frozenset({"I", "T"}),
)
