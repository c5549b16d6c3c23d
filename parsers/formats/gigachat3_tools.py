"""``gigachat3`` tool calls (GigaChat 3 / 3.1; vLLM 0.33 ``GigaChat3ToolParser``).

Wire format: v3 ``content<|message_sep|>\\n\\nfunction call<|role_sep|>\\n{"name", "arguments"}``;
v3.1 ``content<|function_call|>{"name", "arguments"}``; a trailing ``</s>`` is dropped.
Content = text before ``<|message_sep|>`` / ``<|function_call|>`` (trailing whitespace dropped
when a call follows); ``<|message_sep|>`` is a separator token and is dropped. Text after the
call is dropped. vLLM parses one call; further calls are accepted here.
"""

from __future__ import annotations

from .json_factory import json_tool_spec

SPEC = json_tool_spec(
    "gigachat3",
    starts=("function call<|role_sep|>", "<|function_call|>"),
    drops=("<|message_sep|>", "</s>"),
    options={"decode_string_args": True},
    # the tokenizer's added tokens carry the newlines: listed so their ids are kept as text
    extra_markers={"MSG_SEP": "<|message_sep|>\n\n", "ROLE_SEP": "<|role_sep|>\n"},
)
