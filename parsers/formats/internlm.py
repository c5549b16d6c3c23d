"""``internlm`` tool calls (InternLM2 / Intern-S1; vLLM 0.33 ``Internlm2ToolParser``).

Wire format: ``content<|action_start|><|plugin|>{"name": "f", "parameters": {..}}<|action_end|>``
(``arguments`` accepted too). Content = text before the call (trailing whitespace dropped when
a call follows); text after the call is dropped except further calls. Deliberate differences:
vLLM handles one call and its streaming is unfinished (xfail upstream); we stream every call
and batch equals stream. Malformed JSON stays content (vLLM raises).
"""

from __future__ import annotations

from .jsontools import json_tool_spec

SPEC = json_tool_spec("internlm", starts=("<|action_start|><|plugin|>",))
