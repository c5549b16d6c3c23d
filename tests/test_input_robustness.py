"""Inputs found by a newcomer run that gave a 500 or a silently wrong answer: deeply nested JSON,
and a stream_state continued under another choice index."""

from __future__ import annotations

import json

WEATHER = {"type": "function", "function": {"name": "get_weather",
                                            "parameters": {"type": "object",
                                                           "properties": {"city": {"type": "string"}}}}}
PARSERS = {"reasoning_parser": "qwen3", "tool_call_parser": "hermes", "enable_auto_tool_choice": True}
# The README's two-chunk stream: Qwen3 ids of a think block, text and the start of a tool call ...
FIRST = [151667, 198, 59604, 9104, 4362, 624, 151668, 271, 10061, 752, 1779, 624, 151657, 198, 4913, 606, 788]
# ... and the rest of the call
SECOND = [330, 455, 69364, 497, 330, 16370, 788, 5212, 8926, 788, 330, 59604, 95642, 151658, 151645]


def _nested(depth: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(depth):
        value = {"a": value}
    return value


def test_deeply_nested_tool_schema_is_rendered_not_a_500(serve):
    """A tool schema nested 300 levels (deeper than orjson writes) renders: the answer, which
    echoes the tools in parse_context, is still written, and the connection stays usable."""
    client = serve(**PARSERS)
    tool = {"type": "function", "function": {"name": "f", "parameters": _nested(300)}}
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": [tool]}
    r = client.post("/v1/chat/completions/render", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["token_ids"] and r.json()["parse_context"]["tools"][0]["function"]["name"] == "f"
    assert client.get("/health").status_code == 200  # same keep-alive connection


def test_deeply_nested_history_arguments_are_not_a_500(serve):
    """History tool-call arguments nested past Python's recursion limit are treated as arguments
    that are not JSON (``{}``, as vLLM does for those), not a 500."""
    client = serve(**PARSERS)
    deep = '{"x": ' + "[" * 5000 + "]" * 5000 + "}"
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": deep}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    r = client.post("/v1/chat/completions/render", json={"messages": messages, "tools": [WEATHER]})
    assert r.status_code < 500, r.text
    assert r.status_code == 200


def _chunk(ids: list[int], index: int, finish: str | None = None) -> dict:
    return {"request_id": "chatcmpl-demo",
            "choices": [{"index": index, "token_ids": ids, "finish_reason": finish}]}


def test_stream_state_is_bound_to_its_choice_index(serve):
    """A state continued with a chunk of another choice index is a 400 naming both indices; the
    same chunk under the state's own index continues the tool call."""
    client = serve(**PARSERS)
    chat = {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [WEATHER]}
    prompt = client.post("/v1/chat/completions/render", json=chat).json()["token_ids"]
    first = client.post("/v1/chat/completions/derender", json={
        "stream": True, "chat_request": chat, "prompt_token_ids": prompt,
        "generate_chunk": _chunk(FIRST, 0)}).json()
    state = first["stream_state"]
    wrong = client.post("/v1/chat/completions/derender", json={
        "stream": True, "stream_state": state, "generate_chunk": _chunk(SECOND, 1, "stop")})
    assert wrong.status_code == 400, wrong.text
    error = wrong.json()["error"]
    assert error["param"] == "stream_state"
    assert "choice 0" in error["message"] and "choice 1" in error["message"]
    right = client.post("/v1/chat/completions/derender", json={
        "stream": True, "stream_state": state, "generate_chunk": _chunk(SECOND, 0, "stop")})
    assert right.status_code == 200, right.text
    choice = right.json()["chunk"]["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert json.loads(choice["delta"]["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
