"""``hunyuan_a13b`` tool calls (Hunyuan-A13B; vLLM 0.33 ``HunyuanA13BToolParser``).

Wire format: ``content<tool_calls>[{"name": "f", "arguments": {..}}, ..]</tool_calls>``.
``<tool_calls>`` inside ``<think>…</think>`` is text, not a call (the think block stays
content for a reasoning parser to split off). Content = text before the call, kept verbatim
(trailing space included, as vLLM); text after the array is dropped except further calls.
The template artifact ``助手：`` is dropped from content (vLLM drops its first occurrence
when there is no call).
"""

from __future__ import annotations

from ..spec import CONTENT, Transition
from .json_factory import json_tool_spec

SPEC = json_tool_spec(
    "hunyuan_a13b",
    starts=("<tool_calls>",),
    drops=("助手：",),
    options={"array": True},
    trim=None,
    extra_markers={"THINK": "<think>", "THINK_END": "</think>"},
    extra_modes={"T": CONTENT},
    extra_transitions={
        ("C", "THINK"): Transition("T", keep=True),
        ("T", "THINK_END"): Transition("C", keep=True),
    },
)
