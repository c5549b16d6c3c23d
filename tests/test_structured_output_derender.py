"""Derender fills ParseContext.structured_output from the chat request (issue 9 item 4): with
`response_format` / `structured_outputs` a Qwen3 answer without reasoning markers is content,
over real HTTP (vLLM 0.33 makes it reasoning: README, Deliberate differences)."""

from __future__ import annotations

import pytest

# Qwen3 tokens of '{"a": 1}' then <|im_end|>.
JSON_IDS = [4913, 64, 788, 220, 16, 92, 151645]


@pytest.mark.parametrize(("extra", "want"), [
    ({"response_format": {"type": "json_object"}}, ('{"a": 1}', None)),
    ({"structured_outputs": {"json": {"type": "object"}}}, ('{"a": 1}', None)),
    ({}, (None, '{"a": 1}')),
])
def test_structured_output_answer_is_content(serve, extra, want):
    client = serve(reasoning_parser="qwen3", tool_call_parser="hermes", enable_auto_tool_choice=True)
    chat = {"messages": [{"role": "user", "content": "hi"}], **extra}
    body = {"chat_request": chat, "generate_response": {"request_id": "chatcmpl-so", "choices": [
        {"index": 0, "finish_reason": "stop", "token_ids": JSON_IDS}]}}
    message = client.post("/v1/chat/completions/derender", json=body).json()["choices"][0]["message"]
    assert (message["content"], message["reasoning"]) == want
