"""``apertus`` tool calls (Swiss AI Apertus; vLLM 0.33 ``ApertusToolParser``).

Wire format: ``content<|tools_prefix|>[{"get_weather": {"city": "Paris"}}, ...]<|tools_suffix|>``:
a JSON array of single-key objects, function name → arguments object.

* Content before the block is kept (trailing whitespace dropped when calls follow); text after
  it is content. A block that is not such an array is content, never lost (a call is committed
  once its name key and the start of its arguments object are read, :mod:`parsers.jsoncalls`).
* Arguments stream as they arrive (vLLM 0.33 streams them token by token, measured with
  ``tools/record_parser_cases_with_vllm.py``), written as vLLM's batch ``json.dumps`` writes them.
"""

from __future__ import annotations

from .json_factory import json_tool_spec

SPEC = json_tool_spec(
    "apertus",
    starts=("<|tools_prefix|>",),
    ends=("<|tools_suffix|>",),
    after="content",
    options={"either": True, "name_is_key": True, "args_keys": ("arguments",)},
)
