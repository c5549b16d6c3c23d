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

from collections.abc import Mapping
from typing import Any

from .think import IDENTITY_MODE, REASONING_MODE, prompt_decides, think_spec, thinking_flag


def _mode(kwargs: Mapping[str, Any]) -> str:
    return REASONING_MODE if thinking_flag(kwargs, True) else IDENTITY_MODE


def _choose(kwargs: Mapping[str, Any], prompt_last: str | None) -> str:
    mode = _mode(kwargs)
    return mode if mode == IDENTITY_MODE else prompt_decides(REASONING_MODE)(kwargs, prompt_last)


SPEC = think_spec(
    "glm45",
    implicit_ends=(("<tool_call>", "</tool_call>"),),
    drop_stray_end=True,
    reopen=True,
    identity=True,
    strip_reasoning_tail=True,
    choose_mode=_choose,
    turn_boundaries=("<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"),
)
