"""``messages.normalize`` remembers messages it changed (tool calls, content parts): a message
seen again must give exactly what normalising it afresh gives, in every view, and what a caller
does to one result must not reach the next; values the memo's key cannot tell apart (NaN vs
``null``) are never remembered."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from render_service.render import messages

ARGS = st.dictionaries(st.sampled_from(["city", "n", "x"]),
                       st.none() | st.integers(-3, 3) | st.text(max_size=4) | st.floats(allow_nan=False),
                       max_size=3)


@st.composite
def conversations(draw: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for i in range(draw(st.integers(1, 4))):
        out.append({"role": "user", "content": draw(st.sampled_from(["hi", "again", ""]))
                    if draw(st.booleans()) else [{"type": "text", "text": "part"}]})
        call = {"id": f"c{i}", "type": "function",
                "function": {"name": "f", "arguments": draw(st.sampled_from(['{"a": 1}', "", "not json"]))
                             if draw(st.booleans()) else json.dumps(draw(ARGS))}}
        out.append({"role": "assistant", "content": draw(st.none() | st.just("ok")), "tool_calls": [call],
                    **({"reasoning_content": "think"} if draw(st.booleans()) else {})})
        out.append({"role": "tool", "tool_call_id": f"c{i}", "content": "done"})
    return out


def _views(conv: messages.Conversation) -> tuple[Any, ...]:
    return conv.primary, conv.normalised, conv.compat, conv.blank, conv.tool_call_count


@given(conversations(), st.sampled_from(["string", "openai"]), st.booleans())
def test_a_remembered_message_normalises_as_a_fresh_one(conv: list[dict[str, Any]], fmt: str,
                                                         developer: bool) -> None:
    messages._NORMALISED.clear()
    fresh = _views(messages.normalize(copy.deepcopy(conv), fmt, developer))
    again = messages.normalize(copy.deepcopy(conv), fmt, developer)
    assert messages._NORMALISED  # the tool-call messages were remembered
    assert _views(again) == fresh
    # a caller changing its result's messages does not change the next result
    for message in again.primary:
        message["content"] = "changed"
    for message, _ in again.normalised:
        message.clear()
    assert _views(messages.normalize(copy.deepcopy(conv), fmt, developer)) == fresh


def test_nan_and_null_values_are_not_confused() -> None:
    # orjson writes NaN as null, so a message holding a float beside a null is never keyed (history
    # arguments are JSON strings now, as vLLM 0.33 requires, so the case reaches only the key)
    with_null = {"role": "user", "content": [{"type": "text", "text": "a"}], "x": None}
    with_nan = {"role": "user", "content": [{"type": "text", "text": "a"}], "x": math.nan}
    assert messages._memo_key(with_null, "string") is not None
    assert messages._memo_key(with_nan, "string") is None


def test_the_memo_stays_bounded() -> None:
    messages._NORMALISED.clear()
    for i in range(messages._NORMALISED_ENTRIES + 10):
        messages.normalize([{"role": "user", "content": [{"type": "text", "text": str(i)}]}])
    assert 0 < len(messages._NORMALISED) <= messages._NORMALISED_ENTRIES
    big = "x" * messages._NORMALISED_MAX_KEY
    messages._NORMALISED.clear()
    messages.normalize([{"role": "user", "content": [{"type": "text", "text": big}]}])
    assert not messages._NORMALISED
