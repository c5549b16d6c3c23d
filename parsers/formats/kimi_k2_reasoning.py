"""``kimi_k2`` reasoning (Kimi K2 / K2.5 / K2-Thinking; vLLM 0.33 ``KimiK2Parser`` engine).

Wire format: ``[<think>]reasoning</think>content``; tool calls in a
``<|tool_calls_section_begin|> ... <|tool_calls_section_end|>`` block.

* Thinking switch: ``thinking`` / ``enable_thinking`` (default on). Off: identity (all content).
* The tool section start ends reasoning implicitly and is handed on as content; a section
  drafted inside reasoning stays reasoning (BR25 applies to Kimi too, per its notes).
* A stray ``</think>`` in content is dropped; trailing reasoning whitespace is dropped.
* Prompt-aware within the current turn (Kimi role tokens are the boundaries; vLLM has none
  for Kimi and would find ``</think>`` of an earlier turn in a streaming backward scan).
"""

from __future__ import annotations

from .think_factory import CONTENT_MODE, ignore_prompt, think_spec, thinking_switch

SPEC = think_spec(
    "kimi_k2",
    implicit_ends=(("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"),),
    drop_stray_end=True,
    identity=True,
    strip_reasoning_tail=True,
    choose_mode=thinking_switch(True),
    turn_boundaries=("<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>"),
)

#: ``kimi`` (SGLang's Kimi-VL / Kimi-1.5 detector, ``◁think▷reasoning◁/think▷content``): not
#: forced, text before ``◁think▷`` is content.
KIMI = think_spec(
    "kimi", start="◁think▷", end="◁/think▷", reopen=True, choose_mode=ignore_prompt(CONTENT_MODE)
)
