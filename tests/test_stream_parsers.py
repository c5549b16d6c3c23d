"""Streaming chat derender with qwen3 + hermes equals batch derender for any chunking.

Each streamed call serialises the opaque state, and chat_request / prompt_token_ids are sent
on the first call only. Also: state size does not grow with the output.
"""

from __future__ import annotations

import functools
import json

import pytest
from conftest import examples
from derender_helpers import QWEN3, bundle, split, stream_body
from hypothesis import given, settings
from hypothesis import strategies as st

from render_service import derender
from render_service.errors import InvalidRequest
from render_service.settings import Settings

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
MESSAGES = [{"role": "user", "content": "weather?"}]
FFFD = "\ufffd"
words = st.lists(
    st.sampled_from(
        ["The", " user", " 日本", "😀", " 삼겹살", " é", "\n", " {", "}", " <", "think", "a\u0301"]
    ),
    max_size=8,
).map("".join)


def setup():
    """(bundle, settings, prompt ids) for Qwen3 with --reasoning-parser qwen3 --tool-call-parser hermes
    (the bundle from the session cache each time, so this module holds no model of its own)."""
    s, prompt = _settings_and_prompt()
    return bundle(QWEN3), s, prompt


@functools.cache
def _settings_and_prompt():
    s = Settings(
        model=bundle(QWEN3).root,
        reasoning_parser="qwen3",
        tool_call_parser="hermes",
        enable_auto_tool_choice=True,
    )
    tok = bundle(QWEN3).tokenizer
    enc = tok.apply_chat_template(MESSAGES, tools=TOOLS, add_generation_prompt=True, tokenize=True)
    prompt = list(enc["input_ids"]) if not isinstance(enc, list) else enc
    return s, prompt


def output_text(think, text, cities):
    calls = "".join(
        '<tool_call>\n{"name": "get_weather", "arguments": '
        + json.dumps({"city": c}, ensure_ascii=False)
        + "}\n</tool_call>\n"
        for c in cities
    )
    head = f"<think>\n{think}\n</think>\n\n" if think is not None else ""
    return head + text + calls + "<|im_end|>"


def batch(ids, chat, finish="stop"):
    b, s, prompt = setup()
    body = {
        "generate_response": {
            "request_id": "chatcmpl-r1",
            "choices": [{"index": 0, "token_ids": ids, "finish_reason": finish}],
        },
        "chat_request": chat,
        "prompt_token_ids": prompt,
    }
    return derender.derender_chat(b, s, body)["choices"][0]


def stream(ids, sizes, chat, finish="stop"):
    """Run the chunks; returns joined content, reasoning, calls {index: [id, name, args]},
    finish_reason, the list of deltas, and the state sizes."""
    b, s, prompt = setup()
    state, content, reasoning, calls, finish_reason, deltas, sizes_seen = None, "", "", {}, None, [], []
    chunks = list(split(ids, sizes))
    for i, chunk in enumerate(chunks):
        last = i == len(chunks) - 1
        body = stream_body(chunk, state, finish=finish if last else None, request_id="chatcmpl-r1")
        if state is None:
            body.update(chat_request=chat, prompt_token_ids=prompt)
        r = derender.derender_chat(b, s, json.loads(json.dumps(body)))
        state = r["stream_state"]
        sizes_seen.append(len(state))
        for c in r["chunk"]["choices"]:
            d = c["delta"]
            deltas.append(d)
            content += d["content"] or ""
            reasoning += d["reasoning"] or ""
            for tc in d.get("tool_calls", []):
                entry = calls.setdefault(tc["index"], [None, None, ""])
                if tc["id"]:
                    assert entry[0] is None, "id sent twice"
                    entry[0], entry[1] = tc["id"], tc["function"]["name"]
                entry[2] += tc["function"]["arguments"] or ""
            finish_reason = c["finish_reason"] or finish_reason
    return content, reasoning, calls, finish_reason, deltas, sizes_seen


def as_batch_calls(choice):
    return {
        i: [tc["id"], tc["function"]["name"], tc["function"]["arguments"]]
        for i, tc in enumerate(choice["message"].get("tool_calls", []))
    }


@settings(max_examples=examples(60), deadline=None)
@given(
    think=st.one_of(st.none(), words),
    text=words,
    cities=st.lists(st.sampled_from(["Paris", "東京", "Zürich 😀"]), max_size=2),
    sizes=st.lists(st.integers(1, 7), max_size=60),
    parallel=st.booleans(),
    include_reasoning=st.booleans(),
    stop=st.lists(st.sampled_from(["user", "日本", "Zürich", "</tool_call>", "\n\n"]), max_size=2),
)
def test_stream_equals_batch_any_split(think, text, cities, sizes, parallel, include_reasoning, stop):
    """Joined streamed deltas equal batch derender (content, reasoning, each tool call's id, name,
    arguments, finish_reason) for any split, with or without stop strings; no U+FFFD appears;
    role comes once, first."""
    b, _, _ = setup()
    ids = b.tokenizer.encode(output_text(think, text, cities), add_special_tokens=False)
    chat = {
        "messages": MESSAGES,
        "tools": TOOLS,
        "parallel_tool_calls": parallel,
        "include_reasoning": include_reasoning,
        "stop": stop,
    }
    want = batch(ids, chat)
    content, reasoning, calls, finish, deltas, _ = stream(ids, sizes, chat)
    assert content == (want["message"]["content"] or "")
    assert reasoning == (want["message"]["reasoning"] or "")
    assert calls == as_batch_calls(want)
    assert finish == want["finish_reason"]
    assert not any(FFFD in (d["content"] or "") + (d["reasoning"] or "") for d in deltas)
    assert deltas[0]["role"] == "assistant" and all(d["role"] is None for d in deltas[1:])


def test_finish_reason_tool_calls_and_length():
    """Two tool calls → finish_reason tool_calls; an engine 'length' stays 'length'."""
    b, _, _ = setup()
    ids = b.tokenizer.encode(output_text("hm", "", ["Paris", "Rome"]), add_special_tokens=False)
    chat = {"messages": MESSAGES, "tools": TOOLS}
    assert batch(ids, chat)["finish_reason"] == "tool_calls"
    assert batch(ids, chat, finish="length")["finish_reason"] == "length"
    assert stream(ids, [1] * len(ids), chat, finish="length")[3] == "length"


def test_tool_call_ids_are_deterministic():
    """Tool-call ids depend only on (request id, choice index, call index): a retried request
    yields the same ids, batch and stream agree, and the two calls differ."""
    b, _, _ = setup()
    ids = b.tokenizer.encode(output_text(None, "", ["Paris", "Rome"]), add_special_tokens=False)
    chat = {"messages": MESSAGES, "tools": TOOLS}
    one, two = as_batch_calls(batch(ids, chat)), as_batch_calls(batch(ids, chat))
    assert one == two and one[0][0] != one[1][0] and one[0][0].startswith("chatcmpl-tool-")
    assert stream(ids, [3] * len(ids), chat)[2] == one


def test_parser_needs_chat_request_on_first_call_only():
    """With a parser, the first streaming call without chat_request is a 400; later calls may
    omit it (and prompt_token_ids)."""
    b, s, _ = setup()
    chunk = {"request_id": "r", "choices": [{"index": 0, "token_ids": [9707]}]}
    body = {"stream": True, "generate_chunk": chunk}
    with pytest.raises(InvalidRequest, match="chat_request is required"):
        derender.derender_chat(b, s, body)
    with pytest.raises(InvalidRequest, match="chat_request is required"):
        derender.derender_chat(b, s, {"generate_response": {"choices": [{"index": 0, "token_ids": [9707]}]}})


def test_state_size_does_not_grow_with_output():
    """The state after 2,000 reasoning tokens is as small as after 20 (no replay buffer)."""
    b, _, _ = setup()
    ids = b.tokenizer.encode("<think>\n" + "The user wants 日本 weather. " * 300, add_special_tokens=False)
    _, _, _, _, _, sizes = stream(ids, [1] * len(ids), {"messages": MESSAGES, "tools": TOOLS}, finish=None)
    assert len(ids) > 1500
    assert max(sizes[1000:]) <= max(sizes[10:30]) + 8


NATIVE_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


@pytest.mark.parametrize(
    "tool_choice, output, finish",
    [
        # hermes is held to its native <tool_call> syntax under required/named (vLLM's structural tag)
        ({"type": "function", "function": {"name": "get_weather"}}, NATIVE_CALL, "stop"),
        ("required", NATIVE_CALL, "tool_calls"),
    ],
)
def test_named_and_required_tool_choice(tool_choice, output, finish):
    """Named tool_choice: finish_reason stays 'stop' (OpenAI); required: finish_reason
    'tool_calls'; content is '' in both; the
    stream (one token per chunk) agrees with batch."""
    b, _, _ = setup()
    ids = b.tokenizer.encode(output + "<|im_end|>", add_special_tokens=False)
    chat = {
        "messages": MESSAGES,
        "tools": TOOLS,
        "tool_choice": tool_choice,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    want = batch(ids, chat)
    assert want["message"]["content"] == "" and want["finish_reason"] == finish
    assert [
        (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in want["message"]["tool_calls"]
    ] == [("get_weather", {"city": "Paris"})]
    content, _, calls, got_finish, _, _ = stream(ids, [1] * len(ids), chat)
    assert calls == as_batch_calls(want) and got_finish == finish and content == ""


def test_tool_choice_none_keeps_markup_as_content():
    """tool_choice none: no calls; the <tool_call> markup stays in content (upstream §10.11)."""
    b, _, _ = setup()
    ids = b.tokenizer.encode(output_text("x", "Hi", ["Paris"]), add_special_tokens=False)
    want = batch(ids, {"messages": MESSAGES, "tools": TOOLS, "tool_choice": "none"})
    assert "tool_calls" not in want["message"] and "<tool_call>" in want["message"]["content"]
    assert want["finish_reason"] == "stop"
