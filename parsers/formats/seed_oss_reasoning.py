"""``seed_oss`` reasoning (ByteDance Seed-OSS; vLLM 0.33 ``SeedOssParser``, the Qwen3 engine
grammar with other wrapper tokens).

Wire format: ``[<seed:think>]reasoning</seed:think>content``; tool calls
``<seed:tool_call>...</seed:tool_call>``; turn tokens ``<seed:bos>`` / ``<seed:eos>``.
Same rules as ``qwen3``: ``enable_thinking`` (default True) decides an output without an end
marker, the tool-call start ends reasoning implicitly (drafts inside reasoning stay
reasoning), a stray end marker in content is dropped, trailing reasoning whitespace is kept.
``<seed:cot_budget_reflect>`` tags are plain reasoning text.
"""

from __future__ import annotations

from .qwen3_reasoning import thinking_mode
from .think_factory import prompt_decides, think_spec

SPEC = think_spec(
    "seed_oss",
    start="<seed:think>",
    end="</seed:think>",
    implicit_ends=(("<seed:tool_call>", "</seed:tool_call>"),),
    drop_stray_end=True,
    choose_mode=prompt_decides(thinking_mode),
    turn_boundaries=("<seed:bos>", "<seed:eos>"),
)
