"""``jamba`` tool calls (AI21 Jamba; vLLM 0.33 ``JambaToolParser``).

Wire format: ``content<tool_calls>[{"name": "f", "arguments": {..}}, ..]</tool_calls>``.
Content = text before ``<tool_calls>``; its trailing whitespace is dropped when a call follows
(vLLM batch nulls only a lone ``" "``, its streaming keeps it: we take one rule for both).
Text after the array is dropped except further calls.
"""

from __future__ import annotations

from .json_factory import json_tool_spec

SPEC = json_tool_spec("jamba", starts=("<tool_calls>",), options={"array": True})
