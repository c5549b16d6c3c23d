"""End to end over real HTTP for each model family with a tokenizer in ../shared/models:
``/v1/chat/completions/render`` for the prompt ids, then ``/v1/chat/completions/derender`` on
the token ids of a model answer written in the family's native format, in batch and in
streaming with one token per call (state echoed between calls, chat_request and prompt ids on
the first call only). The expected messages follow vLLM 0.33's parsers (parsers.md section 3);
streaming must join to exactly the batch message.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from conftest import hf_tokenizer, model_dir

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather of a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    }
]
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]


@dataclass(frozen=True)
class Family:
    """One server configuration and one model answer with its expected message."""

    id: str
    folder: str
    settings: dict[str, Any]
    answer: str
    content: str | None
    reasoning: str | None = None
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    finish: str = "stop"
    chat: dict[str, Any] = field(default_factory=dict)
    id_re: str = r"chatcmpl-tool-[0-9a-f]{16}"


TOOL_SERVER = {"enable_auto_tool_choice": True}
FAMILIES = [
    Family(
        "qwen3_coder",
        "Qwen--Qwen3-Coder-30B-A3B-Instruct",
        {"tool_call_parser": "qwen3_coder", **TOOL_SERVER},
        "Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call><|im_end|>",
        "Let me check.\n",  # as vLLM 0.33's stream (its batch strips): README deliberate differences
        calls=(("get_weather", {"city": "Paris", "days": 3}),),
        finish="tool_calls",
        chat={"tools": TOOLS},
    ),
    Family(
        "llama3_json",
        "meta-llama--Llama-3.1-8B-Instruct",
        {"tool_call_parser": "llama3_json", **TOOL_SERVER},
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}<|eom_id|>',
        None,
        calls=(("get_weather", {"city": "Paris"}),),
        finish="tool_calls",
        chat={"tools": TOOLS},
    ),
    Family(
        "mistral",
        "mistralai--Mistral-Nemo-Instruct-2407",
        {"tool_call_parser": "mistral", **TOOL_SERVER},
        'Sure.[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}]</s>',
        "Sure.",
        calls=(("get_weather", {"city": "Paris", "days": 2}),),
        finish="tool_calls",
        chat={"tools": TOOLS},
        id_re=r"[A-Za-z0-9]{9}",
    ),
    Family(
        "deepseek_r1",
        "deepseek-ai--DeepSeek-R1-Distill-Qwen-7B",
        {"reasoning_parser": "deepseek_r1"},
        "Paris is in France. 数学 😀\n</think>\n\nIt is sunny in Paris.<｜end▁of▁sentence｜>",
        "\n\nIt is sunny in Paris.",
        reasoning="Paris is in France. 数学 😀\n",
    ),
    Family(
        "gpt-oss_call",
        "openai--gpt-oss-20b",
        {"reasoning_parser": "openai_gptoss", "tool_call_parser": "openai", **TOOL_SERVER},
        "<|channel|>analysis<|message|>Need the weather tool.<|end|><|start|>assistant<|channel|>commentary"
        ' to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>',
        None,
        reasoning="Need the weather tool.",
        calls=(("get_weather", {"city": "Paris"}),),
        finish="tool_calls",
        chat={"tools": TOOLS},
    ),
    Family(
        "gpt-oss_final",
        "openai--gpt-oss-20b",
        {"reasoning_parser": "openai_gptoss", "tool_call_parser": "openai", **TOOL_SERVER},
        "<|channel|>analysis<|message|>Simple question.<|end|><|start|>assistant<|channel|>commentary"
        "<|message|>Checking.<|end|><|start|>assistant<|channel|>final<|message|>"
        "Sunny, 22°C in Paris.<|return|>",
        "Checking.\nSunny, 22°C in Paris.",
        reasoning="Simple question.",
        chat={"tools": TOOLS},
    ),
]


def tokenizer(folder: str) -> Any:
    return hf_tokenizer(folder)


def setup(serve, family: Family) -> tuple[Any, dict[str, Any], list[int], list[int]]:
    """(client, chat request, prompt ids from /render, answer token ids)."""
    client = serve(model=model_dir(family.folder), **family.settings)
    chat = {"messages": QUESTION, **family.chat}
    r = client.post("/v1/chat/completions/render", json=chat)
    assert r.status_code == 200, r.text
    prompt = r.json()["token_ids"]
    answer = tokenizer(family.folder).encode(family.answer, add_special_tokens=False)
    return client, chat, prompt, answer


def batch_message(client, chat, prompt, answer) -> tuple[dict[str, Any], str]:
    body = {
        "generate_response": {
            "request_id": "e2e",
            "choices": [{"index": 0, "token_ids": answer, "finish_reason": "stop"}],
        },
        "chat_request": chat,
        "prompt_token_ids": prompt,
    }
    r = client.post("/v1/chat/completions/derender", json=body)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    return choice["message"], choice["finish_reason"]


def streamed_message(client, chat, prompt, answer) -> tuple[dict[str, Any], str]:
    """One derender call per token; returns the joined message and the last finish_reason."""
    state, content, reasoning, calls, finish = None, "", "", {}, None
    for i, tok in enumerate(answer):
        last = i == len(answer) - 1
        item = {"index": 0, "token_ids": [tok], "finish_reason": "stop" if last else None}
        body = {
            "stream": True,
            "stream_state": state,
            "generate_chunk": {"request_id": "e2e", "choices": [item]},
        }
        if state is None:
            body.update(chat_request=chat, prompt_token_ids=prompt)
        r = client.post("/v1/chat/completions/derender", json=body)
        assert r.status_code == 200, r.text
        out = r.json()
        state = out["stream_state"]
        for choice in out["chunk"]["choices"]:
            delta = choice["delta"]
            content += delta.get("content") or ""
            reasoning += delta.get("reasoning") or ""
            for tc in delta.get("tool_calls") or []:
                entry = calls.setdefault(tc["index"], {"id": None, "name": None, "arguments": ""})
                if tc["function"].get("name") is not None:
                    assert entry["name"] is None, "name sent twice"
                    entry.update(id=tc["id"], name=tc["function"]["name"])
                entry["arguments"] += tc["function"].get("arguments") or ""
            finish = choice["finish_reason"] or finish
    message = {
        "content": content or None,
        "reasoning": reasoning or None,
        "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(calls.items())
        ],
    }
    return message, finish


def check(family: Family, message: dict[str, Any], finish: str) -> None:
    assert message["content"] == family.content
    assert message.get("reasoning") == family.reasoning
    got = [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in message.get("tool_calls") or []
    ]
    assert got == list(family.calls)
    assert all(re.fullmatch(family.id_re, c["id"]) for c in message.get("tool_calls") or [])
    assert finish == family.finish


@pytest.mark.parametrize("family", FAMILIES, ids=[f.id for f in FAMILIES])
def test_batch_derender(serve, family):
    """Batch derender of the family's native output gives vLLM's message: content, reasoning,
    tool calls (name, JSON arguments, an id) and finish_reason."""
    client, chat, prompt, answer = setup(serve, family)
    message, finish = batch_message(client, chat, prompt, answer)
    check(family, message, finish)


@pytest.mark.parametrize("family", FAMILIES, ids=[f.id for f in FAMILIES])
def test_stream_one_token_per_chunk_equals_batch(serve, family):
    """Streaming one token per call joins to exactly the batch message (ids included), with
    each call's name sent once, and the same finish_reason."""
    client, chat, prompt, answer = setup(serve, family)
    streamed, finish = streamed_message(client, chat, prompt, answer)
    check(family, streamed, finish)
    batch, batch_finish = batch_message(client, chat, prompt, answer)
    assert streamed["content"] == batch["content"] and streamed["reasoning"] == batch.get("reasoning")
    assert streamed["tool_calls"] == [
        {"id": c["id"], "type": "function", "function": c["function"]} for c in batch.get("tool_calls") or []
    ]
    assert finish == batch_finish
