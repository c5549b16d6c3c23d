"""``ernie45`` tool calls (ERNIE-4.5; vLLM 0.33 ``Ernie45ToolParser``).

Wire format: ``content\\n<tool_call>\\n{"name": "f", "arguments": {..}}\\n</tool_call>\\n`` one
or more times. Content = text before the first ``<tool_call>`` with its trailing newlines
removed (vLLM ``rstrip("\\n")``); text after/between calls is dropped. A body that is not a
call object stays content.
"""

from __future__ import annotations

from .json_factory import json_tool_spec

SPEC = json_tool_spec("ernie45", starts=("<tool_call>",), trim="\n")
