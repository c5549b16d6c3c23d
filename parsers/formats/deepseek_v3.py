"""``deepseek_v3`` and ``holo2`` reasoning (DeepSeek-V3.1/V3.2 hybrid, HCompany Holo2;
vLLM 0.33 ``DeepSeekV3ReasoningParser`` / ``DeepSeekV3ReasoningWithThinkingParser``).

Thinking on → exactly ``deepseek_r1`` (``reasoning</think>content``, everything reasoning
without ``</think>``, prompt-aware); off → identity (all content, markers included).
Switch: ``thinking`` or ``enable_thinking`` true. deepseek_v3 defaults to off; holo2 to on
when neither key is given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..spec import ModeChooser
from .deepseek_r1 import TURN_BOUNDARIES
from .think import IDENTITY_MODE, REASONING_MODE, prompt_decides, think_spec, thinking_flag


def _chooser(default: bool) -> ModeChooser:
    r1: Callable[[Mapping[str, Any], str | None], str] = prompt_decides(REASONING_MODE)

    def choose(kwargs: Mapping[str, Any], prompt_last: str | None) -> str:
        return r1(kwargs, prompt_last) if thinking_flag(kwargs, default) else IDENTITY_MODE

    return choose


SPEC = think_spec("deepseek_v3", identity=True, choose_mode=_chooser(False), turn_boundaries=TURN_BOUNDARIES)
HOLO2 = think_spec("holo2", identity=True, choose_mode=_chooser(True), turn_boundaries=TURN_BOUNDARIES)
