"""The per-checkpoint suffix of Hunyuan structural tokens (``<think:6124c78e>``,
``<tool_call:6124c78e>``, ...), read as vLLM 0.33 reads it: HY-V4 from the vocabulary (the
first token that is a structural tag, ``detect_token_suffix``), HY-V3 from the tokenizer
config's ``token_suffix``. Specs built for a suffix are cached per suffix."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_STRUCTURAL = re.compile(r"<(?:think|tool_calls|tool_call|arg_key|arg_value)(:[^\s>]+)?>")


def vocab_suffix(vocab: Mapping[str, int]) -> str:
    """The suffix (with its leading ``:``) of the first structural tag in ``vocab``, or ``""``."""
    for token in vocab:
        if token.startswith("<") and (match := _STRUCTURAL.fullmatch(token)):
            return match.group(1) or ""
    return ""


def config_suffix(tokenizer_config: Mapping[str, Any]) -> str:
    """HY-V3: the tokenizer config's ``token_suffix`` (``""`` when absent)."""
    value = tokenizer_config.get("token_suffix")
    return value if isinstance(value, str) else ""


def suffix_for(name: str, vocab: Mapping[str, int], tokenizer_config: Mapping[str, Any]) -> str:
    """The suffix parser ``name`` (``hy_v3`` or ``hy_v4``) uses for this model."""
    return config_suffix(tokenizer_config) if name == "hy_v3" else vocab_suffix(vocab)
