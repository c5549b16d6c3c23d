"""``longcat`` tool calls (LongCat-Flash; vLLM 0.33 ``LongcatFlashToolParser``): hermes with
``<longcat_tool_call>`` / ``</longcat_tool_call>`` (see ``formats.hermes_tools``)."""

from __future__ import annotations

from .hermes_tools import hermes_spec

SPEC = hermes_spec("longcat", "<longcat_tool_call>", "</longcat_tool_call>")
