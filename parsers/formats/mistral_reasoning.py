"""``mistral`` reasoning (Magistral / Mistral v11+; vLLM 0.33 ``MistralParser`` engine).

Wire format: starts in **content**; ``[THINK]reasoning[/THINK]`` (v13+ special tokens) or
``<think>reasoning</think>`` (v11 plain text) switch to reasoning and back, any number of
times. ``[THINK]`` never closed → the rest is reasoning; a stray end marker is dropped;
``[TOOL_CALLS]`` ends reasoning and stays in content for the tool phase (no end marker, so a
call drafted in reasoning cannot be told apart); from there on think markers are argument
text (vLLM's engine has no think transitions in its tool states); trailing reasoning
whitespace is dropped.

Deliberate difference: vLLM picks one marker pair from the tokenizer (``[THINK]`` in the vocab
→ v13, else v11 text); we accept both pairs, so a v13 model writing a literal ``<think>`` in
content starts reasoning. The prompt is not scanned (Mistral templates never pre-open).
"""

from __future__ import annotations

from .think_factory import CONTENT_MODE, ignore_prompt, think_spec

SPEC = think_spec(
    "mistral",
    start=("[THINK]", "<think>"),
    end=("[/THINK]", "</think>"),
    direct_ends=("[TOOL_CALLS]",),
    drop_stray_end=True,
    reopen=True,
    strip_reasoning_tail=True,
    choose_mode=ignore_prompt(CONTENT_MODE),
)
