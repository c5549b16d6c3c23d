"""``internlm`` tool calls (InternLM2 / Intern-S1; vLLM 0.33 ``Internlm2ToolParser``).

Wire format: ``content<|action_start|><|plugin|>{"name": "f", "parameters": {..}}<|action_end|>``
(two special tokens before the JSON, each a marker so the derender keeps their text)
(``arguments`` accepted too). Content = text before the call (trailing whitespace dropped when
a call follows); text after the call is dropped except further calls. Deliberate differences:
vLLM handles one call and its streaming is unfinished (xfail upstream); we stream every call
and batch equals stream. Malformed JSON stays content (vLLM raises).
"""

from __future__ import annotations

from dataclasses import replace

from ..spec import CONTENT, HOLD, Transition
from .json_factory import json_tool_spec

_SPEC = json_tool_spec(
    "internlm",
    extra_markers={"ACTION": "<|action_start|>", "PLUGIN": "<|plugin|>", "END": "<|action_end|>"},
    extra_modes={"P": HOLD},
    extra_transitions={
        ("C", "ACTION"): Transition("P", keep=True),
        ("A", "ACTION"): Transition("P", keep=True),
        ("P", "PLUGIN"): Transition("B", release="drop"),
    },
)
#: ``<|action_start|>`` is held until ``<|plugin|>`` shows a call; any other text (e.g. the
#: ``<|interpreter|>`` action) gives it back as content.
SPEC = replace(_SPEC, break_on_text={"P": Transition("C", release=CONTENT)}, finish_release={"P": CONTENT})
