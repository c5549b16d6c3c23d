"""``deepseek_r1`` reasoning (DeepSeek-R1, R1-0528, R1-Distill; vLLM 0.33 ``DeepSeekR1ReasoningParser``).

Wire format: the template ends in ``<think>\\n`` so the output is ``reasoning</think>content``;
an optional ``<think>`` in the output is stripped. No ``</think>`` → all reasoning.
Prompt-aware like qwen3 (a ``</think>`` in the prompt's current turn, e.g. a Qwen3 template
with enable_thinking=False, BR17, starts in content). Markers after ``</think>`` are content.

Empty reasoning is ``""`` (``</think>x``, ``<think></think>x``, an empty output), as vLLM's
batch gives (``FormatSpec.empty_reasoning``; its streaming sends nothing there: our stream
carries the ``""`` so that it equals our batch). Deliberate difference: text before a late
``<think>`` stays reasoning in batch too (vLLM streaming behaviour; its batch drops it).
"""

from __future__ import annotations

from .think_factory import REASONING_MODE, prompt_decides, think_spec

#: Turn tokens of the templates R1-style parsers run under (Qwen-based distills, DeepSeek).
TURN_BOUNDARIES = ("<|im_start|>", "<|im_end|>", "<｜User｜>", "<｜Assistant｜>")

SPEC = think_spec(
    "deepseek_r1",
    choose_mode=prompt_decides(REASONING_MODE),
    turn_boundaries=TURN_BOUNDARIES,
    empty_reasoning=True,
)
