"""``generate_request`` builds a text-only render's ``GenerateRequest`` as a plain dict: it must
equal what the ``GenerateRequest`` model validates and dumps for the same inputs (same keys, same
order, same values), and inputs outside the plain shape must still go through the model."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from render_service.protocol.chat import ChatCompletionRequest
from render_service.render.request import _model_generate_request, generate_request

JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                max_size=3),
                    max_leaves=6)
TOOL = st.fixed_dictionaries({"type": st.just("function"),
                              "function": st.fixed_dictionaries({"name": st.text(max_size=3)})})
KWARGS = st.dictionaries(st.sampled_from(["enable_thinking", "x", "tools"]), JSON, max_size=3)


@st.composite
def render_inputs(draw: Any) -> tuple[ChatCompletionRequest, dict[str, Any]]:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}
    for key, value in (("stream", st.booleans() | st.none()),
                       ("stream_options", st.none() | st.fixed_dictionaries({}, optional={
                           "include_usage": st.booleans(), "continuous_usage_stats": st.booleans()})),
                       ("return_token_ids", st.booleans() | st.none()),
                       ("cache_salt", st.none() | st.text(min_size=1, max_size=5)),
                       ("priority", st.integers(-3, 3)),
                       ("kv_transfer_params",
                        st.none() | st.dictionaries(st.text(max_size=3), JSON, max_size=2))):
        if draw(st.booleans()):
            body[key] = draw(value)
    if body.get("stream_options") and not body.get("stream"):
        body["stream"] = True
    extra: dict[str, Any] = {}
    if draw(st.booleans()):
        extra["reasoning_ended"] = draw(st.none() | st.booleans() | st.integers(0, 1))
    if draw(st.booleans()):
        extra["reasoning_parser_kwargs"] = draw(
            st.none() | st.fixed_dictionaries({"chat_template_kwargs": KWARGS}))
    if draw(st.booleans()):
        context = draw(st.fixed_dictionaries({}, optional={
            "tools": st.none() | st.lists(TOOL, max_size=2),
            "tool_choice": st.sampled_from(["none", "auto", "required"]) | st.just({"type": "function"}),
            "parallel_tool_calls": st.booleans(), "include_reasoning": st.booleans(),
            "chat_template_kwargs": KWARGS, "history_tool_call_cnt": st.integers(0, 4),
            "other": JSON}))
        extra["parse_context"] = context
    if draw(st.booleans()):
        extra["token_offsets"] = draw(
            st.none() | st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), max_size=2))
    if draw(st.booleans()):
        extra["features"] = draw(st.none() | st.just({"mm_hashes": {"image": ["h"]}}))
    return ChatCompletionRequest.model_validate(body), extra


@given(render_inputs(), st.lists(st.integers(0, 1000), max_size=5))
def test_plain_dict_equals_the_model_dump(inputs: tuple[ChatCompletionRequest, dict[str, Any]],
                                          ids: list[int]) -> None:
    req, extra = inputs
    sampling = {"max_tokens": 4, "temperature": 0.5}
    fast = generate_request(req, request_id="chatcmpl-x", token_ids=list(ids), sampling_params=sampling,
                            model=req.model, **dict(extra))
    model = _model_generate_request(req, "chatcmpl-x", list(ids), sampling, req.model, dict(extra))
    assert fast == model
    assert list(fast) == list(model)  # key order: the answer's bytes
    assert orjson.dumps(fast) == orjson.dumps(model)
    if fast.get("parse_context") is not None:
        assert list(fast["parse_context"]) == list(model["parse_context"])


def test_a_render_answer_keeps_the_model_shape() -> None:
    """A whole render through the plain path has every ``GenerateRequest`` key, in its order."""
    from render_service.protocol.generate import GenerateRequest

    req = ChatCompletionRequest.model_validate({"messages": [{"role": "user", "content": "hi"}]})
    out = generate_request(req, request_id="r", token_ids=[1, 2], sampling_params={}, model=None,
                           reasoning_ended=False, parse_context={"tools": None})
    assert list(out) == list(GenerateRequest.model_fields)
    assert out["parse_context"]["tool_choice"] == "none" and out["output_mode"] == "tokens"
