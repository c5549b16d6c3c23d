"""``plamo3`` reasoning (PLaMo 3; vLLM 0.33 ``Plamo3Parser`` reasoning side).

Wire format: ``<|plamo:begin_think:plamo|>reasoning<|plamo:end_think:plamo|>content``; tool
requests start with ``<|plamo:begin_tool_requests:plamo|>`` (``plamo3_tools``).

* ``enable_thinking`` (default True): the output starts in reasoning; False: all content, the
  think markers plain text.
* A ``begin_think`` in content opens reasoning; a duplicate in reasoning and a bare
  ``end_think`` in content are dropped; the tool-requests start ends reasoning at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .think_factory import IDENTITY_MODE, REASONING_MODE, prompt_decides, think_spec

BEGIN_THINK = "<|plamo:begin_think:plamo|>"
END_THINK = "<|plamo:end_think:plamo|>"
BEGIN_TOOL_REQUESTS = "<|plamo:begin_tool_requests:plamo|>"


def _mode(kwargs: Mapping[str, Any]) -> str:
    return IDENTITY_MODE if kwargs.get("enable_thinking", True) is False else REASONING_MODE


_ON = prompt_decides(REASONING_MODE)

SPEC = think_spec(
    "plamo3",
    start=BEGIN_THINK,
    end=END_THINK,
    direct_ends=(BEGIN_TOOL_REQUESTS,),
    drop_stray_end=True,
    reopen=True,
    identity=True,
    choose_mode=lambda kwargs, last: IDENTITY_MODE if _mode(kwargs) == IDENTITY_MODE else _ON(kwargs, last),
    turn_boundaries=("<|plamo:tag|>",),
)
