"""``inkling`` tool calls (Inkling; vLLM 0.33 ``InklingEngineToolParser``).

Wire format: ``<|content_invoke_tool_json|>{"name": "get_weather", "args": {"city": "SF"}}<|end_message|>``
(blocks framed as in ``inkling_reasoning``); the arguments key is ``args``.

* Arguments stream as the raw JSON text of ``args``; text outside tool blocks is content.
* Whitespace-only content before a call is dropped; other content is kept as is.
"""

from __future__ import annotations

from .inkling_reasoning import END_MESSAGE, END_SAMPLING, MESSAGE_MODEL, TOOL_JSON
from .json_factory import json_tool_spec

SPEC = json_tool_spec(
    "inkling",
    starts=(TOOL_JSON,),
    ends=(END_MESSAGE, END_SAMPLING),
    drops=(MESSAGE_MODEL,),
    after="content",
    options={"args_keys": ("args", "arguments")},
)
