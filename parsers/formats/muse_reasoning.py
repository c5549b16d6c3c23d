"""``muse`` / ``musespark1x`` / ``muse_glimmer`` reasoning (Muse Spark, Muse Glimmer; vLLM 0.33
``MuseReasoningParser`` / ``MuseGlimmerReasoningParser``).

Wire format: channel messages ``[<|start|>assistant ]to=RECIPIENT<|message|>BODY<|eom|>``
(``<|eot|>`` ends the turn)::

    to=self<|message|>thinking<|eom|>to=user<|message|>answer<|eot|>

* ``to=self`` bodies (and, for Spark, messages without a recipient) are reasoning; several
  are joined.
* ``to=user`` / ``to=commentary`` bodies are content.
* A tool recipient (``to=tool.fn``) is content handed to the tool phase, kept from its
  header on: the ``<atem:function_calls>`` block inside is read by ``muse_tools``.
* ``to=developer`` bodies are dropped.
* A header is held until ``<|message|>`` arrives; text that never becomes a header (longer
  than ``HEADER_LIMIT``) is content; a header held at the end of the stream is content.
* Difference from vLLM: Glimmer's recipient-less messages are reasoning too (one profile).
"""

from __future__ import annotations

import re

from ..spec import CONTENT, DROP, HOLD, REASONING, FormatSpec, Transition

HEADER_LIMIT = 256
_RECIPIENT = re.compile(r"to=(\S+?)\s*$")


def route(header: str) -> str | None:
    """Mode for a channel header (the text before ``<|message|>``)."""
    m = _RECIPIENT.search(header)
    recipient = m.group(1) if m else None
    if recipient in (None, "self"):
        return "R"
    if recipient in ("user", "commentary"):
        return "C"
    if recipient == "developer":
        return "X"
    return "T"


SPEC = FormatSpec(
    name="muse",
    kind="reasoning",
    markers={"MSG": "<|message|>", "EOM": "<|eom|>", "EOT": "<|eot|>", "START": "<|start|>"},
    # H: header held, R: reasoning body, C: content body, T: tool message (content), X: dropped
    modes={"H": HOLD, "R": REASONING, "C": CONTENT, "T": CONTENT, "X": DROP},
    transitions={
        ("H", "MSG"): Transition("C", route=True),
        ("H", "START"): Transition("H"),
        **{(m, e): Transition("H") for m in ("R", "C", "X") for e in ("EOM", "EOT")},
        **{(m, "START"): Transition("H") for m in ("R", "C", "X")},
        ("T", "EOM"): Transition("H", keep=False),
        ("T", "EOT"): Transition("H", keep=False),
    },
    initial_mode="H",
    reasoning_modes=frozenset({"H", "R"}),
    finish_release={"H": CONTENT},
    hold_limit={"H": (HEADER_LIMIT, Transition("C", release="content"))},
    route=route,
    separators={"reasoning": "\n"},
)
