"""Derender parser-side values over real HTTP. ParseContext.structured_output comes from the chat
request (issue 9 item 4): with `response_format` / `structured_outputs` a Qwen3 answer without
reasoning markers is content (vLLM 0.33 makes it reasoning: README, Deliberate differences); an
EOS-only output has content "" or null as vLLM 0.33 gives (issue 8)."""

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


@pytest.mark.parametrize(("kwargs", "want"), [
    ({"enable_thinking": False}, ""),  # vLLM 0.33: content "" (identity parser, empty text)
    ({}, None),  # vLLM 0.33: content null (still in reasoning)
])
def test_eos_only_output_content_as_vllm(serve, kwargs, want):
    client = serve(reasoning_parser="qwen3", tool_call_parser="hermes", enable_auto_tool_choice=True)
    chat = {"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": kwargs}
    body = {"chat_request": chat, "generate_response": {"request_id": "chatcmpl-eos", "choices": [
        {"index": 0, "finish_reason": "stop", "token_ids": [151645]}]}}
    message = client.post("/v1/chat/completions/derender", json=body).json()["choices"][0]["message"]
    assert (message["content"], message["reasoning"]) == (want, None)
