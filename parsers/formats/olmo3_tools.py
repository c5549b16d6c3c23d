"""``olmo3`` tool calls (Olmo 3; vLLM 0.33 ``Olmo3PythonicToolParser``).

Wire format: ``<function_calls>\\nf(a=1)\\ng(b='x')\\n</function_calls>`` — newline-separated
pythonic calls without list brackets; JSON literals ``true``/``false``/``null`` are allowed.
Text outside the block is content (see ``pythonic_factory`` for the shared rules).
"""

from __future__ import annotations

from .pythonic_factory import pythonic_spec

SPEC = pythonic_spec(
    "olmo3",
    starts=("<function_calls>",),
    options={"bracketed": False, "end_tag": "</function_calls>"},
)
