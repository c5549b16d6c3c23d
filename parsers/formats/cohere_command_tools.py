"""``cohere_command3`` / ``cohere_command4`` tool calls (Command A family; vLLM 0.33
``CohereCommand3ToolParser`` / ``CohereCommand4ToolParser`` over ``cohere_melody``).

Wire format::

    <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather",
                      "parameters": {"city": "Paris"}}]<|END_ACTION|>

* A JSON array of actions (one object accepted too); ``tool_name`` and ``parameters``.
* Text outside actions is content (the reasoning spec drops the response framing); an action
  block that is not such JSON is content, never lost (:mod:`parsers.jsoncalls` rules: a call is
  committed once its name and the start of its parameters are read).
* Arguments stream as they arrive, as generated (vLLM 0.33 streams the ``parameters`` text
  verbatim, one fragment per token, measured with ``tools/record_parser_cases_with_vllm.py``).
"""

from __future__ import annotations

from ..spec import FormatSpec
from .json_factory import json_tool_spec

_FRAMING = ("<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>")
_OPTIONS = {"either": True, "name_key": "tool_name", "args_keys": ("parameters",), "raw_args": True}


def _spec(name: str) -> FormatSpec:
    return json_tool_spec(
        name,
        starts=("<|START_ACTION|>",),
        ends=("<|END_ACTION|>",),
        drops=_FRAMING,
        after="content",
        options=_OPTIONS,
    )


SPEC = _spec("cohere_command3")
CMD4 = _spec("cohere_command4")
