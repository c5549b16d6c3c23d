"""``deepseek_v3`` and ``holo2`` reasoning (DeepSeek-V3.1/V3.2 hybrid, HCompany Holo2;
vLLM 0.33 ``DeepSeekV3ReasoningParser`` / ``DeepSeekV3ReasoningWithThinkingParser``).

Thinking on → exactly ``deepseek_r1`` (``reasoning</think>content``, everything reasoning
without ``</think>``, prompt-aware); off → identity (all content, markers included).
Empty reasoning is ``""`` when thinking (vLLM: the R1 batch, ``FormatSpec.empty_reasoning``).
Switch: ``thinking`` or ``enable_thinking`` true. deepseek_v3 defaults to off; holo2 to on
when neither key is given.
"""

from __future__ import annotations

from ..spec import FormatSpec
from .deepseek_r1_reasoning import TURN_BOUNDARIES
from .think_factory import think_spec, thinking_switch


def _hybrid(name: str, default: bool, turn_boundaries: tuple[str, ...] = TURN_BOUNDARIES) -> FormatSpec:
    """R1 reasoning when thinking (default ``default``), identity otherwise."""
    return think_spec(
        name,
        identity=True,
        choose_mode=thinking_switch(default),
        turn_boundaries=turn_boundaries,
        empty_reasoning=True,
    )


SPEC = _hybrid("deepseek_v3", False)
HOLO2 = _hybrid("holo2", True)
#: ``poolside_v1`` (Poolside Laguna; vLLM 0.33 ``PoolsideV1ReasoningParser``): ``deepseek_v3``
#: whose prompt scan stops at the ``<assistant>`` turn token, so a ``</think>`` in an earlier
#: turn does not end this turn's reasoning.
POOLSIDE_V1 = _hybrid("poolside_v1", False, (*TURN_BOUNDARIES, "<assistant>"))
