"""``step3p5`` reasoning (Step-3.5-Flash / Step-3.7; vLLM 0.33 ``Step3p5Parser``: the Qwen3
engine grammar with two differences).

* The template always prefills ``<think>\\n`` and has no thinking switch: ``enable_thinking``
  is ignored; an output without ``</think>`` is all reasoning.
* The model closes reasoning with ``\\n</think>\\n``: trailing reasoning whitespace is dropped.

Otherwise as ``qwen3`` (``<tool_call>`` implicit end with draft detection, stray ``</think>``
dropped, prompt-aware within the ChatML turn).
"""

from __future__ import annotations

from .think_factory import REASONING_MODE, prompt_decides, think_spec

SPEC = think_spec(
    "step3p5",
    implicit_ends=(("<tool_call>", "</tool_call>"),),
    drop_stray_end=True,
    strip_reasoning_tail=True,
    choose_mode=prompt_decides(REASONING_MODE),
    turn_boundaries=("<|im_start|>", "<|im_end|>"),
)
