"""``kimi_k2`` tool calls (Kimi K2 / K2.5; vLLM 0.33 ``KimiK2Parser``).

Wire format (markers are special tokens)::

    content<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{json}<|tool_call_end|>...<|tool_calls_section_end|>

* The header ``functions.NAME:IDX`` is Kimi's native call id: a header matching ``.+:<digits>``
  is sent verbatim as the id, the name is the part before ``:`` without ``functions.``.
* Sanitised headers (BR44, sglang#21377): ``functionsexec5``, ``functions_exec_5``,
  ``functions.exec_5`` give the name (``exec``); their id is minted as ``functions.NAME:N``
  with ``N`` = tool calls in the conversation history + this call's index, continuing the
  conversation's count. Any other header (``functions.invalid.0``) skips the call (vLLM).
* Arguments are verbatim (invalid JSON passed through), stripped, ``{}`` when empty.
* Content before the section is kept verbatim (trailing spaces included); whitespace-only
  content before a section is dropped; text after the section is dropped, calls after it
  are still parsed (vLLM stays in its tool preamble state). ``tool_choice="none"`` still
  strips the markup (vLLM engine parser), calls dropped. The singular section tokens
  ``<|tool_call_section_begin|>``/``<|tool_call_section_end|>`` are accepted too.
* A call with no ``<|tool_call_argument_begin|>`` (ended by ``<|tool_call_end|>``, the section
  end or the end of the stream) or with a header longer than ``HEADER_LIMIT`` gives its text
  back as content from its ``<|tool_call_begin|>`` on (vLLM drops it): output is never lost.
"""

from __future__ import annotations

import re

from ..rawargs import RawArgs
from ..spec import BODY, CONTENT, DROP, HOLD, FormatSpec, Transition

_NATIVE = re.compile(r".+:\d+", re.DOTALL)
_SANITISED = re.compile(r"functions[._]?([A-Za-z0-9_-]+?)[:_]?\d+")


def parse_header(header: str) -> tuple[str, str | None] | None:
    """``(name, native id or None)`` for a call header (held with its ``<|tool_call_begin|>``),
    ``None`` to skip the call."""
    text = header.removeprefix("<|tool_call_begin|>").strip()
    if _NATIVE.fullmatch(text):
        name = text.split(":")[0].removeprefix("functions.")
        return (name, text) if name else None
    m = _SANITISED.fullmatch(text)
    return (m.group(1), None) if m else None


def _route(header: str) -> str | None:
    return "B" if parse_header(header) else None


#: A call header longer than this is not a header: its text is content (bounded state).
HEADER_LIMIT = 512


_SECTION = ("SEC", "SEC1")
_SECTION_END = ("SEC_END", "SEC_END1")

SPEC = FormatSpec(
    name="kimi_k2",
    kind="tool",
    markers={
        "SEC": "<|tool_calls_section_begin|>",
        "SEC1": "<|tool_call_section_begin|>",
        "SEC_END": "<|tool_calls_section_end|>",
        "SEC_END1": "<|tool_call_section_end|>",
        "CALL": "<|tool_call_begin|>",
        "ARGS": "<|tool_call_argument_begin|>",
        "END": "<|tool_call_end|>",
    },
    # W: whitespace-only content so far (held), C: content, S: section / after it,
    # H: call header, B: arguments, K: skipped call, X: a header that was not one (content).
    modes={"W": HOLD, "C": CONTENT, "S": DROP, "H": HOLD, "B": BODY, "K": DROP, "X": CONTENT},
    transitions={
        **{(m, s): Transition("S", release="drop") for m in ("W", "C") for s in _SECTION},
        **{(m, "CALL"): Transition("H", keep=True) for m in ("S", "B", "K", "X")},
        **{("X", e): Transition("S") for e in ("END", *_SECTION_END)},
        **{(m, "END"): Transition("S") for m in ("B", "K")},
        **{(m, e): Transition("S", release="drop") for m in ("B", "K") for e in _SECTION_END},
        **{("H", e): Transition("S", release="content") for e in _SECTION_END},
        ("H", "ARGS"): Transition("K", route=True),
        ("H", "END"): Transition("S", release="content"),
    },
    initial_mode="W",
    break_on_text={"W": Transition("C", release="content")},
    finish_release={"W": CONTENT, "H": CONTENT},
    hold_limit={"H": (HEADER_LIMIT, Transition("X", release="content"))},
    body=RawArgs(parse_header),
    body_end_mode="S",
    reject_mode="S",
    route=_route,
    call_id=lambda n, name: f"functions.{name}:{n}",
    strip_on_none=True,
)
