"""``minimax_m3`` reasoning (MiniMax M3; vLLM 0.33 ``MiniMaxM3ReasoningParser``).

Wire format: ``<mm:think>reasoning</mm:think>content``.

* ``chat_template_kwargs.thinking_mode == "enabled"``: the template prefills ``<mm:think>``, the
  output starts in reasoning; otherwise it starts in content and ``<mm:think>`` opens
  reasoning.
* Reasoning without ``</mm:think>`` stays reasoning to the end of the stream.
* Without prefilled thinking a ``</mm:think>`` that starts the output is dropped; an empty
  ``<mm:think></mm:think>`` gives reasoning ``""`` (vLLM 0.33 batch, measured:
  ``tests/parsers/cases/vllm033_measured.jsonl``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .think_factory import LEADING_MODE, REASONING_MODE, ignore_prompt, think_spec


def _mode(kwargs: Mapping[str, Any]) -> str:
    return REASONING_MODE if kwargs.get("thinking_mode") == "enabled" else LEADING_MODE


SPEC = think_spec(
    "minimax_m3",
    start="<mm:think>",
    end="</mm:think>",
    reopen=True,
    choose_mode=ignore_prompt(_mode),
    empty_reasoning=True,
    drop_leading_end=True,
)
