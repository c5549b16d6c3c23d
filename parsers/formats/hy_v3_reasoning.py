"""``hy_v3`` reasoning (Tencent Hunyuan Hy3; vLLM 0.33 ``HYV3ReasoningParser``).

``chat_template_kwargs.reasoning_effort`` decides: ``"no_think"`` (the default) → identity
(everything content); any other value → ``<think>``-style reasoning like deepseek_r1
(``reasoning</think>content``, all reasoning without ``</think>``, optional ``<think>``
stripped). The markers carry the checkpoint's suffix (``<think{suffix}>``: the tokenizer
config's ``token_suffix``, as vLLM reads it); the prompt is not scanned.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

from ..spec import FormatSpec
from .hunyuan_suffix import suffix_for
from .think_factory import IDENTITY_MODE, REASONING_MODE, ignore_prompt, think_spec


def _mode(kwargs: Mapping[str, Any]) -> str:
    return IDENTITY_MODE if (kwargs.get("reasoning_effort") or "no_think") == "no_think" else REASONING_MODE




def _v4_mode(kwargs: Mapping[str, Any]) -> str:
    return IDENTITY_MODE if (kwargs.get("reasoning_effort") or "high") == "no_think" else REASONING_MODE


@functools.cache
def _hy(name: str, suffix: str) -> FormatSpec:
    """The spec for a checkpoint whose think tokens carry ``suffix`` (``""``: plain)."""
    spec = think_spec(
        name,
        start=f"<think{suffix}>",
        end=f"</think{suffix}>",
        identity=True,
        choose_mode=ignore_prompt(_mode if name == "hy_v3" else _v4_mode),
        empty_reasoning=True,
    )
    return dataclasses.replace(spec, adapt=lambda vocab, config: _hy(name, suffix_for(name, vocab, config)))


SPEC = _hy("hy_v3", "")
#: ``hy_v4`` (vLLM 0.33 ``HYV4ReasoningParser``): the same ``<think>`` grammar, but the chat
#: template's default ``reasoning_effort`` is ``"high"``: thinking unless ``"no_think"``.
#: Checkpoints with suffixed structural tokens read them from the vocabulary
#: (``<think:6124c78e>``; ``hunyuan_suffix``).
HY_V4 = _hy("hy_v4", "")
