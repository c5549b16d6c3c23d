"""``glm45`` / ``glm47`` reasoning (GLM-4.5/4.6/4.7/5; vLLM 0.33 ``Glm47MoeParser`` engine).

Wire format: the template pre-opens ``<think>``; output ``reasoning</think>content``.

* Thinking switch: ``thinking`` / ``enable_thinking`` (default on; either true turns it on).
  Off: the parser is the identity (everything is content, markers included).
* ``<think>`` in content opens reasoning again; a stray ``</think>`` in content is dropped.
* ``<tool_call>`` ends reasoning implicitly and is handed on as content; a call drafted inside
  reasoning (reasoning text or ``</think>`` follows it) stays reasoning (as qwen3, BR25).
* Trailing reasoning whitespace is dropped (engine default). Prompt-aware within the current
  turn (GLM role tokens are the boundaries).
* Not copied: GLM-5.3's template without a thinking switch forces thinking on in vLLM (it
  inspects the chat template); here ``thinking=false`` always means off.
"""

from __future__ import annotations

from .think_factory import think_spec, thinking_switch

SPEC = think_spec(
    "glm45",
    implicit_ends=(("<tool_call>", "</tool_call>"),),
    drop_stray_end=True,
    reopen=True,
    identity=True,
    strip_reasoning_tail=True,
    choose_mode=thinking_switch(True),
    turn_boundaries=("<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"),
)
