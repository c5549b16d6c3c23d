"""``phi4_mini_json`` tool calls (Phi-4-mini; vLLM 0.33 ``Phi4MiniJsonToolParser``).

Wire format: ``functools[{"name": "f", "arguments": {..}}, ..]``. Content = text before
``functools`` (vLLM: ``None`` when calls are found; text after the array is dropped).
Deliberate difference: vLLM has no streaming for this format (returns nothing, xfail
upstream); we stream with the shared JSON-array body, and batch equals stream.
"""

from __future__ import annotations

from .json_factory import json_tool_spec

SPEC = json_tool_spec("phi4_mini_json", starts=("functools",), options={"array": True})
