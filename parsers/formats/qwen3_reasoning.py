"""``qwen3`` reasoning (Qwen3, Qwen3.5, Qwen3-Thinking-2507, QwQ; vLLM 0.33 ``qwen3_config``).

Wire format: ``[<think>]reasoning</think>content``; the chat template usually pre-opens
``<think>`` so the output often holds only ``</think>``.

* No ``</think>``: ``enable_thinking`` (default True) → all reasoning; False → all content,
  verbatim (identity: a literal ``<think></think>`` stays content, as vLLM 0.33).
* Prompt-aware: the last ``<think>``/``</think>`` of the prompt's current turn (turn boundary
  ``<|im_start|>``/``<|im_end|>``) decides the start mode (enable_thinking=False templates
  write ``<think>\\n\\n</think>\\n\\n``; continue_final_message).
* ``<tool_call>`` implicitly ends reasoning and is handed to the tool phase as content, unless
  reasoning resumes after the call (a draft: stays reasoning, BR25).
* A duplicate ``</think>`` in content is dropped; trailing reasoning whitespace is kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from .think_factory import CONTENT_MODE, IDENTITY_MODE, REASONING_MODE, prompt_decides, think_spec


def thinking_mode(kwargs: Mapping[str, Any]) -> str:
    """``enable_thinking`` (default True) → reasoning, False → content (the Qwen3 engine rule)."""
    return CONTENT_MODE if kwargs.get("enable_thinking", True) is False else REASONING_MODE


_BY_PROMPT = prompt_decides(thinking_mode)


def choose(kwargs: Mapping[str, Any], prompt_last: str | None) -> str:
    """``enable_thinking: false`` → identity: the whole output is content verbatim, a literal
    ``<think></think>`` included (measured on vLLM 0.33's render server); else the prompt's last
    marker decides, then ``enable_thinking``. A prompt that left ``<think>`` open still means
    reasoning (a thinking template that ignores the switch)."""
    if kwargs.get("enable_thinking", True) is False and prompt_last != "open":
        return IDENTITY_MODE
    return _BY_PROMPT(kwargs, prompt_last)


SPEC = think_spec(
    "qwen3",
    implicit_ends=(("<tool_call>", "</tool_call>"),),
    drop_stray_end=True,
    choose_mode=choose,
    identity=True,
    turn_boundaries=("<|im_start|>", "<|im_end|>"),
)

#: ``qwen3-thinking`` (SGLang's name for Qwen3-Thinking-2507, ``force_reasoning``): reasoning from the
#: first token whatever ``enable_thinking`` says (the prompt's current turn still decides).
THINKING = replace(SPEC, name="qwen3-thinking", choose_mode=prompt_decides(REASONING_MODE))

#: ``minicpmv`` (MiniCPM-V; vLLM 0.33 ``MiniCPMVUnifiedParser``): the qwen3 grammar, with the
#: literal ``\\n`` escapes the model writes recovered as newlines outside code and LaTeX.
MINICPMV = dataclasses.replace(SPEC, name="minicpmv", recover_newlines=True)
