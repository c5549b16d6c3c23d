"""``pythonic`` / ``llama4_pythonic`` tool calls (Llama 3.2/4 pythonic, ToolACE; vLLM 0.33
``PythonicToolParser`` / ``Llama4PythonicToolParser``).

Wire format: ``[get_weather(city='Paris', days=3), get_time()]`` at the start of the output
(after whitespace) or at the start of a line after prose, optionally wrapped in
``<|python_start|>…<|python_end|>`` (anywhere).
See :mod:`parsers.formats.pythonic_factory` for the shared rules.
"""

from __future__ import annotations

from .pythonic_factory import pythonic_spec

SPEC = pythonic_spec(
    "pythonic", starts=("<|python_start|>",), lead=("[",), drops=("<|python_end|>",), line_lead=True
)
