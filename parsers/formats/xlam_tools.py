"""``xlam`` tool calls (Salesforce xLAM; vLLM 0.33 ``xLAMToolParser``).

Wire format: a JSON array ``[{"name": "f", "arguments": {..}}, ..]``, bare, in a
```` ```json ```` fence, after ``[TOOL_CALLS]``, inside ``<tool_call>…</tool_call>``, or after
``</think>``. Content = the output minus the call block: text before (trailing whitespace
dropped when a call follows; a ``<think>…</think>`` prefix stays content) and after (the
closing fence / ``</tool_call>`` dropped). A ``[`` in prose that does not open a call array
is given back as content at once. Ids are assigned by the derender (vLLM ``call_<i>_<uuid>``
is random, nothing depends on its shape).
"""

from __future__ import annotations

from .json_factory import json_tool_spec

SPEC = json_tool_spec(
    "xlam",
    starts=("```json", "[TOOL_CALLS]", "<tool_call>"),
    opens=("[",),
    ends=("```", "</tool_call>"),
    after="content",
    options={"array": True, "decode_string_args": True},
)
