"""``inkling`` reasoning (Inkling; vLLM 0.33 ``InklingParser`` reasoning side).

Wire format: typed blocks, every marker a special token, in any order::

    <|message_model|><|content_thinking|>reasoning<|end_message|>
    <|message_model|><|content_text|>visible text<|end_message|>
    <|message_model|><|content_invoke_tool_json|>{"name": "f", "args": {...}}<|end_message|>

* The output starts in a message header (the prompt prefills ``<|message_model|>``); text in a
  header (an optional function name) is metadata, dropped when a block kind follows; header
  text longer than ``HEADER_LIMIT`` or left at the end of the stream is content.
* ``<|content_thinking|>`` blocks are reasoning (trailing whitespace dropped), ``<|content_text|>``
  blocks and raw/error tool blocks are content; a JSON tool block is content kept with its
  markers for the tool phase (``inkling_tools``).
* ``<|end_message|>`` or ``<|content_model_end_sampling|>`` ends any block.
"""

from __future__ import annotations

from typing import Literal

from ..spec import CONTENT, HOLD, REASONING, FormatSpec, Transition

MESSAGE_MODEL = "<|message_model|>"
CONTENT_TEXT = "<|content_text|>"
CONTENT_THINKING = "<|content_thinking|>"
TOOL_JSON = "<|content_invoke_tool_json|>"
TOOL_TEXT = "<|content_invoke_tool_text|>"
TOOL_ERROR = "<|content_tool_error|>"
END_MESSAGE = "<|end_message|>"
END_SAMPLING = "<|content_model_end_sampling|>"

#: A message header (an optional function name) longer than this is text: released as content.
HEADER_LIMIT = 256
_ENDS = ("END", "ENDS")
_BLOCKS = {"TEXT": "C", "TTEXT": "C", "TERR": "C", "THINK": "R"}

_trans: dict[tuple[str, str], Transition] = {}
for _mode in ("H", "C", "R"):
    drop: Literal["drop"] | None = "drop" if _mode == "H" else None
    _trans |= {(_mode, k): Transition(to, release=drop) for k, to in _BLOCKS.items()}
    _trans[(_mode, "TOOL")] = Transition("T", keep=True, release=drop)
    _trans[(_mode, "MSG")] = Transition("H")
    _trans |= {(_mode, e): Transition("C", release="content" if _mode == "H" else None) for e in _ENDS}
_trans |= {("T", e): Transition("C", keep=True) for e in _ENDS}

SPEC = FormatSpec(
    name="inkling",
    kind="reasoning",
    markers={
        "MSG": MESSAGE_MODEL,
        "TEXT": CONTENT_TEXT,
        "THINK": CONTENT_THINKING,
        "TOOL": TOOL_JSON,
        "TTEXT": TOOL_TEXT,
        "TERR": TOOL_ERROR,
        "END": END_MESSAGE,
        "ENDS": END_SAMPLING,
    },
    # H: message header (held), C: content, R: reasoning, T: JSON tool block (content)
    modes={"H": HOLD, "C": CONTENT, "R": REASONING, "T": CONTENT},
    transitions=_trans,
    initial_mode="H",
    reasoning_modes=frozenset({"H", "R"}),
    finish_release={"H": CONTENT},
    hold_limit={"H": (HEADER_LIMIT, Transition("C", release="content"))},
    strip_reasoning_tail=True,
)
