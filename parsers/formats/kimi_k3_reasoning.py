"""``kimi_k3`` reasoning (Kimi K3 XTML; vLLM 0.33 ``KimiK3ReasoningParser``).

Wire format: ``<|open|>think<|sep|>reasoning<|close|>think<|sep|>`` then the ``response`` and
``tools`` channels, handed on as content (``kimi_k3_tools`` reads them).

* Thinking on (``thinking`` / ``enable_thinking``, default on): the output may start inside the
  think channel (the template can prefill its opener), so it starts in reasoning.
* Thinking off: identity (everything is content).
"""

from __future__ import annotations

from .think_factory import think_spec, thinking_switch

THINK_OPEN = "<|open|>think<|sep|>"
THINK_CLOSE = "<|close|>think<|sep|>"

SPEC = think_spec(
    "kimi_k3",
    start=THINK_OPEN,
    end=THINK_CLOSE,
    identity=True,
    choose_mode=thinking_switch(True),
)
