"""Requests the schema fuzzer (tests/test_ops_schemathesis.py) found answered with a 500; each is
now a 400 in the upstream error shape."""

from __future__ import annotations

import pytest


def _assert_400(r, param_prefix: str) -> None:
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == 400 and err["param"].startswith(param_prefix), err


@pytest.mark.parametrize("path", ["/v1/chat/completions/render", "/tokenize"])
@pytest.mark.parametrize("kind", [{}, [], 3, None])
def test_content_part_type_that_is_not_a_string(serve, path, kind):
    """A content part whose ``type`` is an object, list, number or null (was TypeError:
    unhashable type → 500) is a 400 naming the part."""
    body = {"messages": [{"role": "user", "content": [{"type": kind, "text": "hi"}]}]}
    _assert_400(serve().post(path, json=body), "messages.0")


@pytest.mark.parametrize("calls", [True, 5, 1.5, "abc", {"a": 1}])
@pytest.mark.parametrize("stream", [False, True])
def test_history_tool_calls_of_a_wrong_shape_in_a_chat_derender(serve, calls, stream):
    """A chat derender whose ``chat_request`` holds an assistant message with ``tool_calls`` that is
    not a list of calls (was, with parsers configured, TypeError: object of type 'bool' has no len()
    → 500, and a string counted its characters as earlier calls) is the 400 render answers
    for the same messages (newcomer check, stop 22)."""
    chat = {"messages": [{"role": "user", "content": "hi"},
                         {"role": "assistant", "content": "a", "tool_calls": calls}]}
    client = serve(reasoning_parser="qwen3", tool_call_parser="hermes", enable_auto_tool_choice=True)
    if stream:
        body = {"stream": True, "chat_request": chat, "prompt_token_ids": [1, 2, 3],
                "generate_chunk": {"request_id": "r", "choices": [{"index": 0, "token_ids": [9707]}]}}
    else:
        body = {"chat_request": chat, "generate_response": {
            "request_id": "x", "choices": [{"index": 0, "token_ids": [9707], "finish_reason": "stop"}]}}
    r = client.post("/v1/chat/completions/derender", json=body)
    assert r.status_code == 400, r.text
    rendered = client.post("/v1/chat/completions/render", json=chat)
    assert rendered.status_code == 400, rendered.text
    assert r.json() == rendered.json()  # the same error body as render's for the same messages


@pytest.mark.parametrize("path", ["/v1/chat/completions/render", "/tokenize", "/v1/chat/completions/derender",
                                  "/v1/messages/render"])
@pytest.mark.parametrize("digits", [400, 5000])
def test_an_integer_of_thousands_of_digits_is_a_400(serve, path, digits):
    """A JSON integer orjson cannot read (past 64 bits) is refused as a malformed body, also one of
    more than 4,300 digits, where the standard library's second reading raised ValueError (int's
    conversion limit) → 500 (round 31's third newcomer, on every route)."""
    raw = '{"messages": [{"role": "user", "content": "x"}], "seed": 1' + "0" * digits + "}"
    r = serve().post(path, content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text[:300]
    assert r.json()["error"]["code"] == 400
