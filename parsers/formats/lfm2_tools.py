"""``lfm2`` tool calls (LiquidAI LFM2/LFM2.5; vLLM 0.33 ``Lfm2ToolParser``).

Wire format: ``<|tool_call_start|>[f(a=1), g()]<|tool_call_end|>`` followed or preceded by
prose, which is content. Repairs (vLLM rewrites): raw control characters in strings,
leading-zero integers, sets, reserved keyword names, and nested quotes of the same kind
(``command='sed -n '1,2p' f'``).
"""

from __future__ import annotations

from .pythonic_factory import pythonic_spec

SPEC = pythonic_spec(
    "lfm2",
    starts=("<|tool_call_start|>",),
    drops=("<|tool_call_end|>",),
    options={"nested_quotes": True},
)
