"""``hy_v3`` reasoning (Tencent Hunyuan Hy3; vLLM 0.33 ``HYV3ReasoningParser``).

``chat_template_kwargs.reasoning_effort`` decides: ``"no_think"`` (the default) → identity
(everything content); any other value → ``<think>``-style reasoning like deepseek_r1
(``reasoning</think>content``, all reasoning without ``</think>``, optional ``<think>``
stripped). Not copied: vLLM appends the tokenizer's ``token_suffix`` to the markers
(``<think{suffix}>``); we use the plain markers, and the prompt is not scanned.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .think_factory import IDENTITY_MODE, REASONING_MODE, ignore_prompt, think_spec


def _mode(kwargs: Mapping[str, Any]) -> str:
    return IDENTITY_MODE if (kwargs.get("reasoning_effort") or "no_think") == "no_think" else REASONING_MODE


SPEC = think_spec("hy_v3", identity=True, choose_mode=ignore_prompt(_mode), empty_reasoning=True)


def _v4_mode(kwargs: Mapping[str, Any]) -> str:
    return IDENTITY_MODE if (kwargs.get("reasoning_effort") or "high") == "no_think" else REASONING_MODE


#: ``hy_v4`` (vLLM 0.33 ``HYV4ReasoningParser``): the same ``<think>`` grammar, but the chat
#: template's default ``reasoning_effort`` is ``"high"``: thinking unless ``"no_think"``.
#: Checkpoints with suffixed structural tokens (``<think:6124c78e>``) are not read here.
HY_V4 = think_spec("hy_v4", identity=True, choose_mode=ignore_prompt(_v4_mode), empty_reasoning=True)
