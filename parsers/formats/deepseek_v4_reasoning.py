"""``deepseek_v4`` / ``deepseek_v41`` reasoning (DeepSeek-V4 / V4.1; vLLM 0.33
``DeepSeekV4Parser`` / ``DeepSeekV41Parser`` reasoning side).

Wire format: ``<think>reasoning</think>content`` then DSML tool calls.

* Thinking switch: ``thinking`` / ``enable_thinking`` (default on when neither is given);
  ``reasoning_effort: "none"`` turns it off. Off: the output starts in content, where a
  ``<think>`` still opens reasoning (the engine's CONTENT → REASONING transition).
* A duplicate ``<think>`` in reasoning and a bare ``</think>`` in content are dropped.
* The DSML block start (V4: ``<｜DSML｜tool_calls>`` and its variants; V4.1:
  ``<｜DSML｜ calls>``) ends reasoning at once and the rest goes to the tool phase.
* Trailing reasoning whitespace is dropped (the engine config's default
  ``strip_trailing_reasoning_whitespace``; vLLM 0.33: ``<think>\n\n</think>x`` has reasoning null).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .deepseek_r1_reasoning import TURN_BOUNDARIES
from .think_factory import CONTENT_MODE, REASONING_MODE, think_spec, thinking_flag

_D = "｜DSML｜"


def _choose(kwargs: Mapping[str, Any], prompt_last: str | None) -> str:
    if not thinking_flag(kwargs, True) or kwargs.get("reasoning_effort") == "none":
        return CONTENT_MODE
    return CONTENT_MODE if prompt_last == "close" else REASONING_MODE


SPEC = think_spec(
    "deepseek_v4",
    direct_ends=(f"<{_D}tool_calls>", f"<{_D}toolcalls>", f"<{_D}tool>"),
    drop_stray_end=True,
    reopen=True,
    choose_mode=_choose,
    turn_boundaries=TURN_BOUNDARIES,
    strip_reasoning_tail=True,
)
V41 = think_spec(
    "deepseek_v41",
    direct_ends=(f"<{_D} calls>",),
    drop_stray_end=True,
    reopen=True,
    choose_mode=_choose,
    turn_boundaries=TURN_BOUNDARIES,
    strip_reasoning_tail=True,
)
