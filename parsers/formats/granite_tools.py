"""Granite tool calls: ``granite`` (3.0/3.1), ``granite4`` and ``granite-20b-fc`` (vLLM 0.33
``granite`` engine parser, ``Granite4ToolParser``, ``Granite20bFCToolParser``).

* ``granite``: ``<|tool_call|>`` (3.0, special token) or ``<tool_call>`` (3.1, text), then a
  JSON array ``[{"name", "arguments"}, ..]`` with no closer; prose before and after the array
  is content. ``arguments`` may come before ``name`` (name-from-args: the call is sent when
  both are known).
* ``granite4``: ``<tool_call>{json}</tool_call>``; each call is emitted whole (name and
  arguments) when ``</tool_call>`` arrives; a call without ``</tool_call>`` (or with other
  text before it) is not a call and its text stays content (vLLM: error → whole output
  content); all text outside calls is content.
* ``granite-20b-fc``: ``<function_call> {json}`` repeated; content = text before the first
  marker. Deliberate difference: vLLM streaming needs the marker at the very start (xfail
  upstream); we find it anywhere in both modes.

All three drop trailing whitespace of content before a call (see ``json_factory``).
"""

from __future__ import annotations

from .json_factory import json_tool_spec

SPEC = json_tool_spec(
    "granite",
    starts=("<|tool_call|>", "<tool_call>"),
    after="content",
    options={"array": True, "raw_args": True},  # vLLM 0.33: arguments verbatim (spacing, escapes)
)
SPEC_4 = json_tool_spec(
    "granite4", starts=("<tool_call>",), after="content", options={"close": "</tool_call>"}
)
SPEC_20B_FC = json_tool_spec("granite-20b-fc", starts=("<function_call>",))
