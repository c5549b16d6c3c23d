"""``k2_horizon`` reasoning (K2 Horizon; vLLM 0.33 ``K2HorizonReasoningParser``, a
``deepseek_r1`` variant).

Wire format: ``[<ifm|think>]reasoning</ifm|think>content``; the think markers depend on
``reasoning_effort`` (high: ``<ifm|think>``, medium: ``<ifm|think_fast>``, low:
``<ifm|think_faster>``). All three pairs are accepted here, whatever the effort.

* The output starts in reasoning (the template pre-opens it); a leading start marker is dropped.
* ``<ifm|tool_calls>`` ends reasoning at once (no end marker needed): the rest is content for
  the tool phase (``k2_horizon_tools``).
* Difference from vLLM: an unsupported ``reasoning_effort`` is not a 400 here.
"""

from __future__ import annotations

from .think_factory import REASONING_MODE, prompt_decides, think_spec

SPEC = think_spec(
    "k2_horizon",
    start=("<ifm|think>", "<ifm|think_fast>", "<ifm|think_faster>"),
    end=("</ifm|think>", "</ifm|think_fast>", "</ifm|think_faster>"),
    direct_ends=("<ifm|tool_calls>",),
    choose_mode=prompt_decides(REASONING_MODE),
    empty_reasoning=True,
)
