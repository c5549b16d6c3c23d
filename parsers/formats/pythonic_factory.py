"""Factory for pythonic tool-call specs (``pythonic``, ``llama4_pythonic``, ``olmo3``, ``lfm2``).

Shared rules (vLLM 0.33 ``PythonicToolParser`` family; arguments are Python literals converted
to JSON by :mod:`parsers.pycalls`):

* Text after a call list is content, and a later list after it is parsed too (BR33: vLLM
  streaming keeps the call and drops the prose while its batch errors; SGLang keeps both).
  Text before a start marker is content; a ``[`` later in prose is plain text.
* A list that is not a call list (``[1, 2]``) is content; names may start with ``_`` (BR33).
* Whitespace around the calls is dropped; whitespace between prose and a list is kept.
* ``line_lead``: a lead marker at the start of a line of prose opens a body too
  (``I will call the tools.\n[f(x=1), g()]``, as SGLang's pythonic detector finds the list after
  prose); the line break goes with the call, and a list that is not a call list is given back
  whole (``\n[1, 2]`` stays content).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..pycalls import PyCalls
from ..spec import ANY_WHITESPACE, BODY, CONTENT, HOLD, FormatSpec, Transition


def pythonic_spec(
    name: str,
    *,
    starts: tuple[str, ...],
    lead: tuple[str, ...] = (),
    drops: tuple[str, ...] = (),
    options: Mapping[str, Any] | None = None,
    line_lead: bool = False,
) -> FormatSpec:
    """A pythonic-call spec.

    Args:
        starts: markers that open a call body anywhere in content.
        lead: markers that open a body only at the start of the output or after a call
            list (``[``).
        drops: markers dropped after a call list (``<|python_end|>``, ``<|tool_call_end|>``).
        options: :class:`parsers.pycalls.PyCalls` options.
        line_lead: lead markers also open a body after a newline in prose.
    """
    markers = {f"S{i}": t for i, t in enumerate(starts)} | {f"L{i}": t for i, t in enumerate(lead)}
    if line_lead:
        markers |= {f"N{i}": "\n" + t for i, t in enumerate(lead)}
    markers |= {f"D{i}": t for i, t in enumerate(drops)}
    opens = [k for k in markers if k[0] in "SL"]
    trans: dict[tuple[str, str], Transition] = {}
    for k in opens:
        trans |= {("S", k): Transition("B"), ("A", k): Transition("B", release="drop")}
        trans |= {("P", k): Transition("B")}
        if k[0] == "S":
            trans[("C", k)] = Transition("B")
    for k in markers:
        if k[0] == "N":
            trans[("C", k)] = Transition("B")
    for k in markers:
        if k[0] == "D":
            trans |= {("A", k): Transition("A"), ("P", k): Transition("P")}
    return FormatSpec(
        name=name,
        kind="tool",
        markers=markers,
        modes={"S": CONTENT, "C": CONTENT, "B": BODY, "A": HOLD, "P": CONTENT},
        transitions=trans,
        initial_mode="S",
        break_on_text={"S": Transition("C", release="content"), "A": Transition("P", release="content")},
        finish_release={"S": CONTENT},
        body=PyCalls(),
        body_end_mode="A",
        reject_mode="C",
        body_options=dict(options or {}),
        hold_trailing={"S": ANY_WHITESPACE},
    )
