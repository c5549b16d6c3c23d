"""``step3`` tool calls (StepFun Step-3; vLLM 0.33 ``Step3ToolParser``).

Wire format (markers are special tokens)::

    content<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="F">
    <steptml:parameter name="K">V</steptml:parameter>...</steptml:invoke><｜tool_call_end｜>...
    <｜tool_calls_end｜>

* The name is sent once ``<steptml:invoke name="F">`` is complete; the arguments are sent
  whole when the call ends (vLLM streams them the same way): parameter values stripped,
  coerced with the request's schema (:func:`parsers.arguments.coerce`), dumped with
  ``ensure_ascii=False``; no parameters → ``{}`` (vLLM streaming sends no arguments, batch
  ``{}``).
* Content before and after the block is kept; whitespace-only content before the block is
  dropped. The ``function<｜tool_sep｜>`` prefix is optional (vLLM streaming does not need
  it; its batch does, a known upstream batch bug: the cases mark batch xfail).
* A call body with no ``<steptml:invoke name=..>`` is given back as content.
* Deliberate differences: vLLM batch strips content and needs ``<｜tool_calls_end｜>``; we
  follow its streaming path (batch == stream). Coercion is the shared schema coercion of the
  XML formats (anyOf, objects/arrays decoded from JSON; vLLM step3 keeps those strings).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..arguments import coerce, tool_types
from ..spec import BODY, CONTENT, DROP, HOLD, Event, FormatSpec, Transition

_INVOKE = re.compile(r'<steptml:invoke name="([^"]+)">')
_PARAM = re.compile(r'<steptml:parameter name="([^"]+)">(.*?)</steptml:parameter>', re.DOTALL)
_LOOKBACK = 256  # an invoke tag split over chunks is found within this many held characters


class StepInvoke:
    """Body handler: buffers one call body (state grows only while the call is open)."""

    def start(self, marker: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """New body; keeps the marker for rejection."""
        return {"raw": marker, "skip": len(marker), "nm": None}

    def feed(self, st: dict[str, Any], text: str, ctx: Any = None) -> tuple[list[Event], int | None]:
        """Buffer ``text``; send the name once the invoke tag is complete."""
        st["raw"] += text
        if st["nm"] is not None:
            return [], None
        m = _INVOKE.search(st["raw"], max(st["skip"], len(st["raw"]) - len(text) - _LOOKBACK))
        if m is None:
            return [], None
        st["nm"] = m.group(1)
        return [("name", st["nm"])], None

    def finish(self, st: dict[str, Any], ctx: Any = None) -> list[Event]:
        """Call end: the coerced arguments (``ctx`` = :func:`parsers.arguments.tool_types`),
        or the raw body as content when no invoke tag named the call."""
        ev: list[Event] = []
        if st["nm"] is None:
            m = _INVOKE.search(st["raw"], st["skip"])
            if m is None:
                return [("reject", st["raw"])]
            st["nm"] = m.group(1)
            ev.append(("name", st["nm"]))
        schema = ((ctx or {}).get("params") or {}).get(st["nm"]) or {}
        params = {k: coerce(v.strip(), schema.get(k)) for k, v in _PARAM.findall(st["raw"])}
        return [*ev, ("args", json.dumps(params, ensure_ascii=False))]


_BLOCK = ("W", "C")

SPEC = FormatSpec(
    name="step3",
    kind="tool",
    markers={
        "CALLS": "<｜tool_calls_begin｜>",
        "CALLS_END": "<｜tool_calls_end｜>",
        "CALL": "<｜tool_call_begin｜>",
        "END": "<｜tool_call_end｜>",
        "SEP": "<｜tool_sep｜>",
    },
    # W: whitespace-only content so far (held), C: content, S: inside the block,
    # B: a call body, A: after the block (content), R: a rejected body's text (content) up to
    # its closing marker.
    modes={"W": HOLD, "C": CONTENT, "S": DROP, "B": BODY, "A": CONTENT, "R": CONTENT},
    transitions={
        **{(m, "CALLS"): Transition("S", release="drop") for m in _BLOCK},
        ("S", "CALL"): Transition("B"),
        ("S", "CALLS_END"): Transition("A"),
        ("B", "END"): Transition("S"),
        ("B", "CALL"): Transition("B"),
        ("B", "CALLS_END"): Transition("A"),
        ("A", "CALLS"): Transition("S"),
        ("R", "END"): Transition("S"),
        ("R", "CALL"): Transition("B"),
        ("R", "CALLS_END"): Transition("A"),
    },
    initial_mode="W",
    break_on_text={"W": Transition("C", release="content")},
    finish_release={"W": CONTENT},
    body=StepInvoke(),
    body_end_mode="S",
    reject_mode="R",
    tool_context=tool_types,
)
