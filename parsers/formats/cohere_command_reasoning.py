"""``cohere_command3`` / ``cohere_command4`` reasoning (Command A / Command A Reasoning; vLLM 0.33
``CohereCommand3ReasoningParser`` / ``CohereCommand4ReasoningParser`` over the
``cohere_melody`` filter).

Wire format::

    <|START_THINKING|>reasoning<|END_THINKING|><|START_RESPONSE|>answer<|END_RESPONSE|>

* Output starts in content; ``<|START_THINKING|>`` opens reasoning, ``<|END_THINKING|>`` ends it.
* The response delimiters ``<|START_RESPONSE|>`` / ``<|END_RESPONSE|>`` (and the Command A+
  ``<|START_TEXT|>`` / ``<|END_TEXT|>``) are framing: dropped, their inside is content.
* Tool actions (``<|START_ACTION|>...``) are content for the tool phase
  (``cohere_command*_tools``).
* Not modelled: melody's citation spans (``<co>...</co: ...>`` stay in the content text).
"""

from __future__ import annotations

from dataclasses import replace

from ..spec import FormatSpec, Transition
from .think_factory import CONTENT_MODE, REASONING_MODE, prompt_decides, think_spec

FRAMING = ("<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>")


def _spec(name: str) -> FormatSpec:
    base = think_spec(
        name,
        start="<|START_THINKING|>",
        end="<|END_THINKING|>",
        reopen=True,
        drop_stray_end=True,
        choose_mode=prompt_decides(CONTENT_MODE),
        turn_boundaries=("<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|CHATBOT_TOKEN|>"),
    )
    framing = {f"FRAME{i}": t for i, t in enumerate(FRAMING)}
    trans = dict(base.transitions)
    for key in framing:
        trans[(CONTENT_MODE, key)] = Transition(CONTENT_MODE)
        trans[(REASONING_MODE, key)] = Transition(CONTENT_MODE)
    return replace(base, markers={**base.markers, **framing}, transitions=trans)


SPEC = _spec("cohere_command3")
CMD4 = _spec("cohere_command4")
