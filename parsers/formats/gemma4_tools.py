"""``gemma4`` and ``functiongemma`` tool calls (Gemma 4, FunctionGemma; vLLM 0.33
``Gemma4EngineToolParser`` / ``FunctionGemmaToolParser``).

Wire format (compact call syntax, :mod:`parsers.compactcalls`)::

    content<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>
    content<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>

* Each block holds one call; strings are between the quote tokens (``<|"|>`` / ``<escape>``),
  numbers/booleans bare, objects ``{}`` and arrays ``[]`` nest.
* Content before a call is kept (its trailing whitespace dropped when a call follows); text
  after a call is content. A block that is not ``call:NAME{...}`` is content, never lost.
* Calls are emitted whole when the block closes (arguments do not stream piecewise).
"""

from __future__ import annotations

from ..compactcalls import compact_call_parser
from .json_factory import atomic_tool_spec

SPEC = atomic_tool_spec("gemma4", ("<|tool_call>",), "<tool_call|>", compact_call_parser('<|"|>'))
FUNCTIONGEMMA = atomic_tool_spec(
    "functiongemma", ("<start_function_call>",), "<end_function_call>", compact_call_parser("<escape>")
)
