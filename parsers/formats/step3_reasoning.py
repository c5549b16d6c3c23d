"""``step3`` reasoning (Step-3; vLLM 0.33 ``Step3ReasoningParser``).

Wire format: ``reasoning</think>content`` (the template opens reasoning); no ``</think>`` →
all reasoning. Markers after the first ``</think>`` are content. Deliberate differences: a
``<think>`` at the start of reasoning is dropped (vLLM keeps it as reasoning text), and the
prompt is not scanned (vLLM looks for ``</think>`` anywhere in the prompt, history included).
"""

from __future__ import annotations

from .think_factory import REASONING_MODE, ignore_prompt, think_spec

SPEC = think_spec("step3", choose_mode=ignore_prompt(REASONING_MODE), empty_reasoning=True)
