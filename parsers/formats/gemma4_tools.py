"""``gemma4`` and ``functiongemma`` tool calls (Gemma 4, FunctionGemma; vLLM 0.33
``Gemma4EngineToolParser`` / ``FunctionGemmaToolParser``).

Wire format (compact call syntax, :mod:`parsers.compactcalls`)::

    content<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>
    content<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>

* Each block holds one call; strings are between the quote tokens (``<|"|>`` / ``<escape>``),
  numbers/booleans bare, objects ``{}`` and arrays ``[]`` nest.
* Content before a call is kept (its trailing whitespace dropped when a call follows); text
  after a call is content. A block that is not ``call:NAME{...}`` is content, never lost.
* ``gemma4``: the name is sent once the arguments' ``{`` arrives, then the arguments stream as
  their JSON grows (keys, string text as it comes, other values once complete), as vLLM 0.33
  streams them (measured at one token per chunk, ``tools/record_parser_cases_with_vllm.py``);
  :class:`parsers.compactcalls.CompactCalls`. The block's own close (``<tool_call|>``) after the
  call's ``}`` is dropped; other text after the ``}`` is content.
* ``functiongemma``: each call is emitted whole when its block closes (vLLM 0.33 sends the name
  first, then the arguments in one piece at the block's end).
"""

from __future__ import annotations

from ..compactcalls import CompactCalls, compact_call_parser
from ..spec import Transition
from .json_factory import atomic_tool_spec, json_tool_spec

SPEC = json_tool_spec(
    "gemma4",
    starts=("<|tool_call>",),
    after="content",
    body=CompactCalls('<|"|>'),
    extra_markers={"END": "<tool_call|>"},
    extra_transitions={("B", "END"): Transition("A"), ("A", "END"): Transition("A", release="drop")},
)
FUNCTIONGEMMA = atomic_tool_spec(
    "functiongemma", ("<start_function_call>",), "<end_function_call>", compact_call_parser("<escape>")
)
