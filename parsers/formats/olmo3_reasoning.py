"""``olmo3`` reasoning (Olmo 3 Think; vLLM 0.33 ``Olmo3ReasoningParser``).

Wire format: ``[<think>]reasoning</think>content`` where the markers are ordinary text (not
special tokens), matched as text with partial-marker hold-back. Leading and trailing
whitespace of both parts is kept (``<think>\\n</think>`` gives reasoning ``"\\n"``).

Deliberate difference: vLLM's batch treats an output without ``</think>`` as all content
while its streaming starts in reasoning; we follow streaming (all reasoning), so batch and
stream agree. Markers after the first ``</think>`` are content (vLLM batch).
"""

from __future__ import annotations

from .think_factory import REASONING_MODE, ignore_prompt, think_spec

SPEC = think_spec("olmo3", choose_mode=ignore_prompt(REASONING_MODE))
