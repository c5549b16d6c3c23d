"""End to end over real HTTP on 127.0.0.1: render → scripted tokens-only engine → derender.

Qwen3 tokenizer, ``--reasoning-parser qwen3 --tool-call-parser hermes --enable-auto-tool-choice``;
batch and streaming (one token per engine event, each event sent to derender with the opaque
state; chat_request and prompt ids only on the first call).
"""

from __future__ import annotations

import json

import httpx
import pytest
from conftest import model_dir
from derender_helpers import QWEN3, bundle

from render_service.testing.engine import create_engine_app, serve_in_thread

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
ANSWER = (
    "<think>\nThe user wants the weather in 日本 😀.\n</think>\n\nLet me check."
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "東京"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call><|im_end|>'
)
TEXT_ANSWER = "Voilà: 日本語のテキスト 👩‍👩‍👧 and then END here, more text.<|im_end|>"


@pytest.fixture(scope="module")
def engine():
    """A scripted engine answering ANSWER or TEXT_ANSWER (chosen by the prompt's last user words)."""
    tok = bundle(QWEN3).tokenizer
    answers = {"weather": ANSWER, "text": TEXT_ANSWER}

    def script(request):
        prompt = tok.decode(request["token_ids"][-12:])
        return [tok.encode(answers["weather" if "weather" in prompt else "text"], add_special_tokens=False)]

    url, stop = serve_in_thread(create_engine_app(script, chunk_size=1))
    with httpx.Client(base_url=url, timeout=60) as client:
        yield client
    stop()


@pytest.fixture(scope="module")
def service(serve):
    return serve(
        model=model_dir(QWEN3),
        reasoning_parser="qwen3",
        tool_call_parser="hermes",
        enable_auto_tool_choice=True,
    )


def render(service, chat):
    r = service.post("/v1/chat/completions/render", json=chat)
    assert r.status_code == 200, r.text
    return r.json()


def sse_events(engine, gen_request):
    """Parsed ``data:`` objects of a streaming generate, without [DONE]."""
    with engine.stream("POST", "/inference/v1/generate", json=gen_request) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                yield json.loads(line[6:])


def run_stream(service, engine, chat, gen_request=None):
    """render → streaming generate → one derender call per event. Returns the chunks and the
    responses' stop_generation flags."""
    gen_request = gen_request or render(service, {**chat, "stream": True})
    state, chunks, stops = None, [], []
    for event in sse_events(engine, gen_request):
        body = {"stream": True, "generate_chunk": event, "stream_state": state}
        if state is None:
            body.update(chat_request=chat, prompt_token_ids=gen_request["token_ids"])
        r = service.post("/v1/chat/completions/derender", json=body)
        assert r.status_code == 200, r.text
        out = r.json()
        state = out["stream_state"]
        chunks.append(out["chunk"])
        stops.append(out["stop_generation"])
        if out["stop_generation"]:
            break
    return chunks, stops


def joined(chunks):
    content = reasoning = ""
    calls, finish = {}, None
    for chunk in chunks:
        for c in chunk["choices"]:
            d = c["delta"]
            assert "\ufffd" not in (d["content"] or "") + (d["reasoning"] or "")
            content += d["content"] or ""
            reasoning += d["reasoning"] or ""
            for tc in d.get("tool_calls", []):
                entry = calls.setdefault(tc["index"], {"id": None, "name": None, "arguments": ""})
                entry["id"] = entry["id"] or tc["id"]
                entry["name"] = entry["name"] or tc["function"]["name"]
                entry["arguments"] += tc["function"]["arguments"] or ""
            finish = c["finish_reason"] or finish
    return content, reasoning, [calls[i] for i in sorted(calls)], finish


def test_batch_think_text_two_tool_calls(service, engine):
    """Batch: reasoning, content and two parsed tool calls with deterministic ids; finish_reason
    tool_calls; usage counts the prompt and every generated id."""
    chat = {"messages": [{"role": "user", "content": "weather in Tokyo and Zurich?"}], "tools": TOOLS}
    gen_request = render(service, chat)
    gen = engine.post("/inference/v1/generate", json=gen_request).json()
    r = service.post(
        "/v1/chat/completions/derender",
        json={"generate_response": gen, "chat_request": chat, "prompt_token_ids": gen_request["token_ids"],
              "prompt_tokens": len(gen_request["token_ids"])},
    )
    assert r.status_code == 200, r.text
    out = r.json()
    msg = out["choices"][0]["message"]
    assert msg["reasoning"] == "\nThe user wants the weather in 日本 😀.\n"
    assert msg["content"] == "\n\nLet me check."
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in msg["tool_calls"]] == [
        ("get_weather", {"city": "東京"}),
        ("get_weather", {"city": "Zürich"}),
    ]
    assert all(c["id"].startswith("chatcmpl-tool-") for c in msg["tool_calls"])
    assert out["choices"][0]["finish_reason"] == "tool_calls"
    assert out["usage"]["prompt_tokens"] == len(gen_request["token_ids"])
    assert out["usage"]["completion_tokens"] == len(gen["choices"][0]["token_ids"])


def test_stream_one_token_per_chunk_equals_batch(service, engine):
    """Streaming, one token per chunk: joined deltas equal the batch message (content,
    reasoning, tool-call ids/names/arguments, finish_reason); role only on the first chunk."""
    chat = {"messages": [{"role": "user", "content": "weather in Tokyo and Zurich?"}], "tools": TOOLS}
    gen_request = render(service, {**chat, "stream": True})
    gen = engine.post("/inference/v1/generate", json={**gen_request, "stream": False}).json()
    batch = service.post(
        "/v1/chat/completions/derender",
        json={"generate_response": gen, "chat_request": chat, "prompt_token_ids": gen_request["token_ids"]},
    ).json()
    chunks, stops = run_stream(service, engine, chat, gen_request)
    content, reasoning, calls, finish = joined(chunks)
    msg = batch["choices"][0]["message"]
    assert content == msg["content"] and reasoning == msg["reasoning"]
    assert calls == [
        {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
        for c in msg["tool_calls"]
    ]
    assert finish == "tool_calls" and not any(stops)
    roles = [c["delta"]["role"] for ch in chunks for c in ch["choices"]]
    assert roles[0] == "assistant" and set(roles[1:]) == {None}


def test_stream_multibyte_split_across_chunks(service, engine):
    """Multi-byte characters split over one-token chunks arrive whole (no U+FFFD) and the
    content equals the engine output's decode without the EOS."""
    chat = {
        "messages": [{"role": "user", "content": "some text please"}],
        "chat_template_kwargs": {"enable_thinking": False},
    }
    chunks, _ = run_stream(service, engine, chat)
    content, reasoning, calls, finish = joined(chunks)
    assert content == TEXT_ANSWER.removesuffix("<|im_end|>")
    assert finish == "stop" and not calls


def test_stream_stop_string(service, engine):
    """A stop string (kept out of the engine request by render) ends the stream at the string:
    finish_reason stop, stop_reason the string, stop_generation true; batch agrees."""
    chat = {
        "messages": [{"role": "user", "content": "some text please"}],
        "chat_template_kwargs": {"enable_thinking": False},
        "stop": ["END here"],
    }
    gen_request = render(service, chat)
    assert not gen_request["sampling_params"].get("stop")
    chunks, stops = run_stream(service, engine, chat)
    content, _, _, finish = joined(chunks)
    assert content == "Voilà: 日本語のテキスト 👩‍👩‍👧 and then "
    last = chunks[-1]["choices"][0]
    assert stops[-1] and (last["finish_reason"], last["stop_reason"]) == ("stop", "END here")
    gen = engine.post("/inference/v1/generate", json=gen_request).json()
    batch = service.post(
        "/v1/chat/completions/derender", json={"generate_response": gen, "chat_request": chat}
    ).json()
    assert batch["choices"][0]["message"]["content"] == content


def test_errors_over_http(service):
    """Upstream-shaped 400s: no chat_request with a parser, two choices in a stream chunk,
    empty token_ids, bad stream_state; unknown model is 404."""
    gen = {"request_id": "r", "choices": [{"index": 0, "token_ids": [9707]}]}
    cases = [
        ({"generate_response": gen}, 400, "chat_request is required"),
        (
            {
                "stream": True,
                "generate_chunk": {
                    "choices": [{"index": 0, "token_ids": [1]}, {"index": 1, "token_ids": [2]}]
                },
                "chat_request": {"messages": []},
            },
            400,
            "at most one choice",
        ),
        (
            {
                "generate_response": {"choices": [{"index": 0, "token_ids": []}]},
                "chat_request": {"messages": []},
            },
            400,
            "empty or null token_ids",
        ),
        (
            {"stream": True, "generate_chunk": gen, "stream_state": "1j.bm90IGpzb24"},
            400,
            "invalid stream_state",
        ),
        (
            {
                "generate_response": {"choices": [{"index": 0, "token_ids": [1] * 50000}]},
                "chat_request": {"messages": []},
            },
            400,
            "max_model_len",
        ),
        (
            {"model": "nope", "generate_response": gen, "chat_request": {"messages": []}},
            404,
            "does not exist",
        ),
        (
            {"generate_response": {"output_mode": "text", "choices": [{"index": 0, "token_ids": [1]}]}},
            400,
            "validation error",
        ),
    ]
    for body, status, message in cases:
        r = service.post("/v1/chat/completions/derender", json=body)
        assert r.status_code == status, (body, r.text)
        err = r.json()["error"]
        assert message in err["message"] and err["code"] == status


def test_later_chunks_inline_and_errors_over_http(service):
    """Later 1-token chunks (run on the event loop, not the worker pool) answer like any call:
    a state from the first chunk is accepted and a tampered one is a 400 JSON error, never a 500."""
    from render_service.serving.app import is_small_stream_chunk

    chat = {"messages": [{"role": "user", "content": "hi"}], "tools": TOOLS}
    gen_request = render(service, {**chat, "stream": True})
    choice = {"index": 0, "token_ids": [9707], "finish_reason": None}
    first = {"stream": True, "generate_chunk": {"request_id": "r", "choices": [choice]},
             "stream_state": None, "chat_request": chat, "prompt_token_ids": gen_request["token_ids"]}
    assert not is_small_stream_chunk(first)
    state = service.post("/v1/chat/completions/derender", json=first).json()["stream_state"]
    later = {"stream": True, "generate_chunk": {"request_id": "r", "choices": [choice]},
             "stream_state": state}
    assert is_small_stream_chunk(later)
    assert not is_small_stream_chunk({**later, "generate_chunk": {"choices": [{"token_ids": [1] * 17}]}})
    ok = service.post("/v1/chat/completions/derender", json=later)
    assert ok.status_code == 200 and isinstance(ok.json()["stream_state"], str)
    bad = service.post("/v1/chat/completions/derender", json={**later, "stream_state": state[:-3] + "xyz"})
    assert bad.status_code == 400 and "stream_state" in bad.json()["error"]["message"]


@pytest.mark.parametrize(("extra", "reasoning"), [
    ({"reasoning_effort": "none"}, None),
    ({"reasoning_effort": "none", "chat_template_kwargs": {"enable_thinking": True}}, "Just an answer."),
])
def test_reasoning_effort_none_without_prompt_ids_is_content(service, extra, reasoning):
    """`reasoning_effort: "none"` switches thinking off at derender as at render (vLLM 0.33 builds
    its parser with the same kwargs as the template), so without `prompt_token_ids` the answer is
    content, not reasoning (newcomer finding); the request's own `enable_thinking` still wins."""
    ids = service.post("/tokenize", json={"prompt": "Just an answer.<|im_end|>"}).json()["tokens"]
    chat = {"messages": [{"role": "user", "content": "hi"}], **extra}
    gen = {"request_id": "x", "choices": [{"index": 0, "token_ids": ids, "finish_reason": "stop"}]}
    msg = service.post("/v1/chat/completions/derender",
                       json={"chat_request": chat, "generate_response": gen}).json()["choices"][0]["message"]
    assert (msg["content"], msg.get("reasoning")) == (None if reasoning else "Just an answer.", reasoning)


def _derender_bodies(ids: list[int], prompt: list[int] | None = None) -> list[tuple[str, dict]]:
    """One body per derender route (chat, completions, Messages, Responses; batch and stream)
    carrying ``ids`` as the engine output and ``prompt`` as ``prompt_token_ids``."""
    gen = {"request_id": "r", "choices": [{"index": 0, "token_ids": ids, "finish_reason": "stop"}]}
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    messages = {"model": "m", "max_tokens": 16, "messages": chat["messages"]}
    extra = {} if prompt is None else {"prompt_token_ids": prompt}
    return [
        ("/v1/chat/completions/derender", {"generate_response": gen, "chat_request": chat, **extra}),
        ("/v1/chat/completions/derender",
         {"stream": True, "generate_chunk": gen, "chat_request": chat, **extra}),
        ("/v1/completions/derender", {"generate_responses": [gen],
                                      **({} if prompt is None else {"prompt_token_ids": [prompt]})}),
        ("/v1/completions/derender", {"stream": True, "generate_chunk": gen, **extra}),
        ("/v1/messages/derender", {"generate_response": gen, "messages_request": messages, **extra}),
        ("/v1/responses/derender", {"stream": True, "generate_chunk": gen,
                                    "responses_request": {"input": "hi"}, **extra}),
    ]


def test_token_ids_past_the_vocabulary_are_dropped_on_every_derender_route_as_vllm(service):
    """An output or prompt id past the model's vocabulary (Qwen3 ``vocab_size`` 151,936) decodes to
    nothing on every derender route, as vLLM 0.33's derender drops it (its recorded answers:
    ``tests/test_derender_vllm_golden.py`` ``*_token_id_out_of_vocab``); ids between the
    tokenizer's 151,669 entries and the vocabulary size are real model ids with no text."""
    for ids, prompt in (([9707, 151700, 151935], None), ([9707, 151936], None),
                        ([9707, 10**7], None), ([9707], [151644, 10**7])):
        for path, body in _derender_bodies(ids, prompt):
            r = service.post(path, json=body)
            assert r.status_code == 200, (path, r.text)
            assert "Hello" in r.text and "\\ufffd" not in r.text and "\ufffd" not in r.text, (path, r.text)


def test_unknown_finish_reason_and_repeated_choice_index_pass_through_as_vllm(service):
    """vLLM 0.33's derender passes an engine ``finish_reason`` it does not know (``abort``,
    ``error``, any string) and a repeated choice ``index`` through unchanged (measured against
    ``vllm launch render``): nothing is lost, so they are not refused here either."""
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    choices = [{"index": 0, "token_ids": [9707], "finish_reason": "abort"},
               {"index": 0, "token_ids": [1, 2], "finish_reason": "bogus"}]
    r = service.post("/v1/chat/completions/derender", json={
        "chat_request": chat, "generate_response": {"request_id": "r", "choices": choices}})
    assert r.status_code == 200, r.text
    # no prompt ids: the qwen3 parser reads the text as reasoning
    out = [(c["index"], c["message"]["reasoning"], c["finish_reason"]) for c in r.json()["choices"]]
    assert out == [(0, "Hello", "abort"), (0, '"#', "bogus")]
