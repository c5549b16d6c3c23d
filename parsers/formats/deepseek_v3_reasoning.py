"""``deepseek_v3`` and ``holo2`` reasoning (DeepSeek-V3.1/V3.2 hybrid, HCompany Holo2;
vLLM 0.33 ``DeepSeekV3ReasoningParser`` / ``DeepSeekV3ReasoningWithThinkingParser``).

Thinking on → exactly ``deepseek_r1`` (``reasoning</think>content``, everything reasoning
without ``</think>``, prompt-aware); off → identity (all content, markers included).
Switch: ``thinking`` or ``enable_thinking`` true. deepseek_v3 defaults to off; holo2 to on
when neither key is given.
"""

from __future__ import annotations

from .deepseek_r1_reasoning import TURN_BOUNDARIES
from .think_factory import think_spec, thinking_switch

SPEC = think_spec(
    "deepseek_v3", identity=True, choose_mode=thinking_switch(False), turn_boundaries=TURN_BOUNDARIES
)
HOLO2 = think_spec("holo2", identity=True, choose_mode=thinking_switch(True), turn_boundaries=TURN_BOUNDARIES)

#: ``poolside_v1`` (Poolside Laguna; vLLM 0.33 ``PoolsideV1ReasoningParser``): ``deepseek_v3``
#: whose prompt scan stops at the ``<assistant>`` turn token, so a ``</think>`` in an earlier
#: turn does not end this turn's reasoning.
POOLSIDE_V1 = think_spec(
    "poolside_v1",
    identity=True,
    choose_mode=thinking_switch(False),
    turn_boundaries=(*TURN_BOUNDARIES, "<assistant>"),
)
