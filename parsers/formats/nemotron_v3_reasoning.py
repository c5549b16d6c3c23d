"""``nemotron_v3`` reasoning (Nemotron 3 Super/Nano; vLLM 0.33 ``NemotronV3Parser``: the Qwen3
engine grammar with trailing reasoning whitespace dropped).

Same as ``qwen3`` (``enable_thinking`` default True, ``<tool_call>`` implicit end with draft
detection, stray ``</think>`` dropped, prompt-aware in the ChatML turn), plus the swap: with
``force_nonempty_content=True``, an output with no non-whitespace content after ``</think>``
(and no tool call) returns its reasoning as the content. To keep batch and stream equal we do
not stream reasoning in that mode: it is held (``FR``) until non-whitespace content after
``</think>`` shows it is reasoning, or the end of the stream shows it is the content. The
state then grows with the reasoning (opt-in mode only). Differences from vLLM: whitespace
between ``</think>`` and the content is dropped in that mode; with ``enable_thinking=False``
the output is content (no swap: there is no reasoning to swap in).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..spec import CONTENT, DROP, HOLD, Transition
from .qwen3_reasoning import thinking_mode
from .think_factory import CONTENT_MODE, REASONING_MODE, prompt_decides, think_spec

HELD, AFTER = "FR", "FA"


def _choose(kwargs: Mapping[str, Any], prompt_last: str | None) -> str:
    mode = prompt_decides(thinking_mode)(kwargs, prompt_last)
    return HELD if mode == REASONING_MODE and kwargs.get("force_nonempty_content") is True else mode


def _with_swap(base: Any) -> Any:
    """Add the held-reasoning modes of ``force_nonempty_content`` to the qwen3-style base."""
    starts = [k for k in base.markers if k.startswith("START")]
    ends = [k for k in base.markers if k.startswith("END")]
    trans = dict(base.transitions)
    trans |= {(HELD, k): Transition(HELD) for k in starts}
    trans |= {(HELD, k): Transition(AFTER) for k in ends}
    trans |= {(AFTER, k): Transition(AFTER) for k in ends}
    trans[(HELD, "TOOL_START0")] = Transition("TC0", keep=True, release="reasoning")
    return replace(
        base,
        modes={**base.modes, HELD: HOLD, AFTER: DROP},
        transitions=trans,
        reasoning_modes=base.reasoning_modes | {HELD},
        break_on_text={**base.break_on_text, AFTER: Transition(CONTENT_MODE, release="reasoning")},
        finish_release={**base.finish_release, HELD: CONTENT, AFTER: CONTENT},
        choose_mode=_choose,
    )


SPEC = _with_swap(
    think_spec(
        "nemotron_v3",
        implicit_ends=(("<tool_call>", "</tool_call>"),),
        drop_stray_end=True,
        strip_reasoning_tail=True,
        turn_boundaries=("<|im_start|>", "<|im_end|>"),
    )
)
#: ``granite_thinking_parser`` (Granite 4.2 thinking; vLLM 0.33 ``GraniteThinkingParser``): the
#: Nemotron V3 grammar, and the newlines that start the content after ``</think>`` are dropped
#: (its template writes ``\n</think>\n``; measured: ``tests/parsers/cases/vllm033_measured.jsonl``).
GRANITE_THINKING = replace(SPEC, name="granite_thinking_parser", strip_content_start="\n")
