"""``apertus`` tool calls (Swiss AI Apertus; vLLM 0.33 ``ApertusToolParser``).

Wire format: ``content<|tools_prefix|>[{"get_weather": {"city": "Paris"}}, ...]<|tools_suffix|>``:
a JSON array of single-key objects, function name → arguments object.

* Content before the block is kept (trailing whitespace dropped when calls follow); text after
  it is content. A block that is not such an array is content, never lost.
* Calls are emitted whole when the block closes.
"""

from __future__ import annotations

import json
from typing import Any

from .json_factory import atomic_tool_spec


def parse(body: str) -> list[tuple[str, Any]] | None:
    """``[(name, arguments)]`` of an Apertus call array, ``None`` if it is not one."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(c, dict) and len(c) == 1 for c in value):
        return None
    calls = [next(iter(c.items())) for c in value]
    return [(name, args if isinstance(args, dict) else {}) for name, args in calls]


SPEC = atomic_tool_spec("apertus", ("<|tools_prefix|>",), "<|tools_suffix|>", parse)
