"""``k2_horizon`` reasoning (K2 Horizon; vLLM 0.33 ``K2HorizonReasoningParser``, a
``deepseek_r1`` variant).

Wire format: ``[<ifm|think>]reasoning</ifm|think>content``; the think markers depend on
``chat_template_kwargs.reasoning_effort`` (default ``"high"``: ``<ifm|think>``, ``"medium"``:
``<ifm|think_fast>``, ``"low"``: ``<ifm|think_faster>``). As in vLLM only the request's pair
counts: the other pairs are plain text of the mode they appear in (one reasoning mode per
effort: ``R``, ``Rm``, ``Rl``). Any other effort (or a non-string one) is refused:
:class:`parsers.types.UnsupportedRequest` with vLLM's message (vLLM raises ``ValueError`` when it
builds the request's parser; its render and derender answer 400).

* The output starts in reasoning (the template pre-opens it) unless the prompt's current turn
  already closed the high pair; a leading start marker of the pair is dropped.
* ``<ifm|tool_calls>`` ends reasoning at once (no end marker needed): the rest is content for
  the tool phase (``k2_horizon_tools``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..spec import REASONING, Transition
from ..types import UnsupportedRequest
from .think_factory import CONTENT_MODE, REASONING_MODE, TOOLS_MODE, think_spec

#: effort -> (reasoning mode, start marker, end marker); vLLM's ``_EFFORT_TOKENS``.
EFFORTS = {
    "high": (REASONING_MODE, "<ifm|think>", "</ifm|think>"),
    "medium": ("Rm", "<ifm|think_fast>", "</ifm|think_fast>"),
    "low": ("Rl", "<ifm|think_faster>", "</ifm|think_faster>"),
}


def _choose(kwargs: Mapping[str, Any], prompt_last: str | None) -> str:
    """The effort's reasoning mode (content when the prompt closed reasoning).

    Raises:
        UnsupportedRequest: ``reasoning_effort`` is not high/medium/low.
    """
    effort = kwargs.get("reasoning_effort", "high")
    if not isinstance(effort, str) or effort not in EFFORTS:
        raise UnsupportedRequest(
            f"Unsupported reasoning_effort {effort!r}. Supported values: {', '.join(EFFORTS)}."
        )
    return CONTENT_MODE if prompt_last == "close" else EFFORTS[effort][0]


_HIGH = think_spec(
    "k2_horizon",
    start=EFFORTS["high"][1],
    end=EFFORTS["high"][2],
    direct_ends=("<ifm|tool_calls>",),
    choose_mode=_choose,
    empty_reasoning=True,
)
_markers, _modes, _trans = dict(_HIGH.markers), dict(_HIGH.modes), dict(_HIGH.transitions)
for _effort in ("medium", "low"):
    _mode, _start, _end = EFFORTS[_effort]
    _markers |= {f"START_{_mode}": _start, f"END_{_mode}": _end}
    _modes[_mode] = REASONING
    _trans |= {
        (_mode, f"START_{_mode}"): Transition(_mode),
        (_mode, f"END_{_mode}"): Transition(CONTENT_MODE),
        (_mode, "DIRECT0"): Transition(TOOLS_MODE, keep=True),
    }

SPEC = dataclasses.replace(
    _HIGH,
    markers=_markers,
    modes=_modes,
    transitions=_trans,
    reasoning_modes=_HIGH.reasoning_modes | {"Rm", "Rl"},
)
