"""Anthropic Messages and OpenAI Responses derender over real HTTP: every batch answer and every
streamed event validates against the official ``anthropic`` / ``openai`` SDK types, and the SDKs'
own stream accumulators rebuild our batch answer from our events, at one token per chunk and at
random chunk sizes, for Qwen3 (qwen3 + hermes) and gpt-oss (openai_gptoss + openai)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message, RawMessageStreamEvent
from conftest import model_dir
from derender_helpers import split
from openai._types import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter
from test_e2e_families import tokenizer

from render_service.derender.responses import StreamOutput, complete_events

ANTHROPIC_EVENT: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
OPENAI_EVENT: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
WEATHER = {
    "name": "get_weather",
    "description": "Weather of a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
QWEN3 = ("Qwen--Qwen3-0.6B", {"reasoning_parser": "qwen3", "tool_call_parser": "hermes"})
GPT_OSS = ("openai--gpt-oss-20b", {"reasoning_parser": "openai_gptoss", "tool_call_parser": "openai"})

# (name, model, output text, finish_reason, extra Anthropic request fields, expected batch facts)
CASES = [
    (
        "qwen3_tool",
        QWEN3,
        '<think>\nParis weather needed.\n</think>\n\nLet me check.\n<tool_call>\n{"name": "get_weather", '
        '"arguments": {"city": "Paris"}}\n</tool_call><|im_end|>',
        "stop",
        {},
        {"kinds": ["thinking", "text", "tool_use"], "stop_reason": "tool_use"},
    ),
    (
        "qwen3_stop_sequence",
        QWEN3,
        "<think>\nShort.\n</think>\n\nSunny in Paris. END and more text<|im_end|>",
        "stop",
        {"stop_sequences": ["END"]},
        {"kinds": ["thinking", "text"], "stop_reason": "stop_sequence"},
    ),
    (
        "qwen3_length",
        QWEN3,
        "<think>\nA long thought that is cut",
        "length",
        {},
        {"kinds": ["thinking"], "stop_reason": "max_tokens"},
    ),
    (
        "gpt_oss_call",
        GPT_OSS,
        "<|channel|>analysis<|message|>Need the weather tool.<|end|><|start|>assistant<|channel|>commentary"
        ' to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>',
        "stop",
        {},
        {"kinds": ["thinking", "tool_use"], "stop_reason": "tool_use"},
    ),
    (
        "gpt_oss_final",
        GPT_OSS,
        "<|channel|>analysis<|message|>Simple question.<|end|><|start|>assistant<|channel|>final<|message|>"
        "Sunny, 22°C in Paris.<|return|>",
        "stop",
        {},
        {"kinds": ["thinking", "text"], "stop_reason": "end_turn"},
    ),
]


def _client(serve, folder: str, parsers: dict[str, str]):
    return serve(model=model_dir(folder), enable_auto_tool_choice=True, max_model_len=4096, **parsers)


def _anthropic_request(extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 200,
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [WEATHER],
        **extra,
    }


def _responses_request(extra: dict[str, Any]) -> dict[str, Any]:
    tool = {
        "type": "function",
        "name": WEATHER["name"],
        "description": WEATHER["description"],
        "parameters": WEATHER["input_schema"],
    }
    req: dict[str, Any] = {
        "model": "m",
        "input": "Weather in Paris?",
        "tools": [tool],
        "max_output_tokens": 200,
    }
    if "stop_sequences" in extra:
        req["stop"] = extra["stop_sequences"]
    return req


def _chunkings(n: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[1] * n, [rng.randint(1, 7) for _ in range(n)]]


def _stream(
    client,
    path: str,
    key: str,
    request: dict[str, Any],
    prompt: list[int],
    ids: list[int],
    sizes: list[int],
    finish: str,
    state_sizes: list[int] | None = None,
) -> list[dict[str, Any]]:
    """The events of a stream of ``ids`` in chunks of ``sizes`` (a Responses stream's completed
    as its caller does); ``state_sizes`` collects each returned state's length."""
    chunks = list(split(ids, sizes))
    events: list[dict[str, Any]] = []
    state = None
    output = StreamOutput()  # what a Responses caller keeps to complete the done events
    for i, chunk in enumerate(chunks):
        last = i == len(chunks) - 1
        body: dict[str, Any] = {
            "model": request["model"],
            "stream": True,
            "stream_state": state,
            "generate_chunk": {
                "request_id": "resp_demo" if "responses" in path else "msg_demo",
                "choices": [{"index": 0, "token_ids": chunk, "finish_reason": finish if last else None}],
            },
        }
        if state is None:
            body.update({key: request, "prompt_token_ids": prompt})
        out = client.post(path, json=body)
        assert out.status_code == 200, out.text
        reply = out.json()
        events.extend(complete_events(reply["events"], output) if "responses" in path else reply["events"])
        state = reply["stream_state"]
        if state_sizes is not None:
            state_sizes.append(len(state))
        if reply["stop_generation"]:
            break
    return events


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_messages_derender(serve, case):
    name, (folder, parsers), text, finish, extra, want = case
    client = _client(serve, folder, parsers)
    model = client.get("/v1/models").json()["data"][0]["id"]
    request = {**_anthropic_request(extra), "model": model}
    prompt = client.post("/v1/messages/render", json=request).json()["token_ids"]
    ids = tokenizer(folder).encode(text, add_special_tokens=False)
    batch = client.post(
        "/v1/messages/derender",
        json={
            "model": model,
            "messages_request": request,
            "prompt_token_ids": prompt,
            "generate_response": {
                "request_id": "msg_demo",
                "choices": [{"index": 0, "token_ids": ids, "finish_reason": finish}],
            },
        },
    )
    assert batch.status_code == 200, batch.text
    message = Message.model_validate(batch.json())
    assert [b.type for b in message.content] == want["kinds"]
    assert message.stop_reason == want["stop_reason"]
    assert message.usage.input_tokens == len(prompt) and message.usage.output_tokens == len(ids)
    if want["stop_reason"] == "stop_sequence":
        assert message.stop_sequence == "END" and message.content[-1].text.endswith("Paris. ")
    for block in message.content:
        if block.type == "tool_use":
            assert block.name == "get_weather" and block.input == {"city": "Paris"}
    for sizes in _chunkings(len(ids), seed=len(name)):
        events = _stream(
            client, "/v1/messages/derender", "messages_request", request, prompt, ids, sizes, finish
        )
        snapshot = None
        bufs: dict[int, bytes] = {}
        for raw in events:
            event = ANTHROPIC_EVENT.validate_python(raw["data"])
            assert event.type == raw["event"]
            snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=bufs)
        assert events[0]["event"] == "message_start" and events[-1]["event"] == "message_stop"
        assert snapshot is not None
        got, ref = snapshot.model_dump(), message.model_dump()
        if want["stop_reason"] == "stop_sequence":  # the stream ends (stop_generation) at the stop chunk
            assert got["usage"].pop("output_tokens") <= ref["usage"].pop("output_tokens")
        assert got == ref, sizes


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_responses_derender(serve, case):
    name, (folder, parsers), text, finish, extra, want = case
    client = _client(serve, folder, parsers)
    model = client.get("/v1/models").json()["data"][0]["id"]
    request = {**_responses_request(extra), "model": model}
    rendered = client.post("/v1/responses/render", json=request)
    assert rendered.status_code == 200, rendered.text
    prompt = rendered.json()["token_ids"]
    ids = tokenizer(folder).encode(text, add_special_tokens=False)
    batch = client.post(
        "/v1/responses/derender",
        json={
            "model": model,
            "responses_request": request,
            "prompt_token_ids": prompt,
            "generate_response": {
                "request_id": "resp_demo",
                "choices": [{"index": 0, "token_ids": ids, "finish_reason": finish}],
            },
        },
    )
    assert batch.status_code == 200, batch.text
    response = Response.model_validate(batch.json())
    kinds = {"thinking": "reasoning", "text": "message", "tool_use": "function_call"}
    assert [item.type for item in response.output] == [kinds[k] for k in want["kinds"]]
    assert response.status == ("incomplete" if finish == "length" else "completed")
    assert (response.incomplete_details is not None) == (finish == "length")
    assert [o.status for o in response.output][-1] == ("incomplete" if finish == "length" else "completed")
    assert response.usage is not None and response.usage.output_tokens == len(ids)
    for item in response.output:
        if item.type == "function_call":
            assert item.name == "get_weather" and item.arguments.replace(" ", "") == '{"city":"Paris"}'
    for sizes in _chunkings(len(ids), seed=len(name) + 1):
        events = _stream(
            client, "/v1/responses/derender", "responses_request", request, prompt, ids, sizes, finish
        )
        acc: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
        for n, raw in enumerate(events):
            event = OPENAI_EVENT.validate_python(raw["data"])
            assert event.type == raw["event"] and event.sequence_number == n
            handled = acc.handle_event(event)
        # OpenAI / vLLM 0.33: a response cut by max_output_tokens ends with response.incomplete
        terminal = "response.incomplete" if finish == "length" else "response.completed"
        assert events[-1]["event"] == terminal
        final = acc._completed_response if finish != "length" else handled[-1].response
        assert final is not None and final.status == response.status
        keys = ["output", "status", "incomplete_details"] + ([] if extra.get("stop_sequences") else ["usage"])
        for key in keys:
            got = getattr(final, key)
            ref = getattr(response, key)
            assert _plain(got) == _plain(ref), (key, sizes)


def _plain(value: Any) -> Any:
    """A dumped SDK value without the ``parsed`` / ``parsed_arguments`` fields its accumulator adds."""
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k not in ("parsed", "parsed_arguments")}
    return value


def test_missing_request_and_bad_state(serve):
    client = _client(serve, *QWEN3)
    for path, key in (
        ("/v1/messages/derender", "messages_request"),
        ("/v1/responses/derender", "responses_request"),
    ):
        out = client.post(
            path,
            json={"generate_response": {"request_id": "r", "choices": [{"index": 0, "token_ids": [1, 2]}]}},
        )
        assert out.status_code == 400 and out.json()["error"]["param"] == key
        out = client.post(
            path,
            json={
                "stream": True,
                "stream_state": "1j.e30.bad",
                "generate_chunk": {"request_id": "r", "choices": [{"index": 0, "token_ids": [1]}]},
            },
        )
        assert out.status_code == 400 and out.json()["error"]["param"] == "stream_state"


_LONG = "<think>\nok\n</think>\n\n" + " ".join(str(i * 7919 % 1000) for i in range(80))


def test_messages_stream_state_does_not_grow_with_the_output(serve):
    """The Messages stream state holds block bookkeeping only: its size at token 80 of a long text
    is its size at token 10, within a few bytes of counters."""
    client = _client(serve, *QWEN3)
    request = {**_anthropic_request({}), "model": client.get("/v1/models").json()["data"][0]["id"]}
    ids = tokenizer(QWEN3[0]).encode(_LONG, add_special_tokens=False)[:80]
    sizes: list[int] = []
    _stream(client, "/v1/messages/derender", "messages_request", request, [1, 2, 3], ids, [1] * 80, "length",
            sizes)
    assert abs(sizes[-2] - sizes[10]) <= 16, sizes


def test_responses_stream_state_does_not_grow_with_the_output(serve):
    """The Responses stream state keeps no output text (the done events leave it to the caller):
    its size at token 80 of a long answer is its size at token 10, within a few bytes of counters;
    the caller's completed done events still carry the whole text."""
    client = _client(serve, *QWEN3)
    request = {**_responses_request({}), "model": client.get("/v1/models").json()["data"][0]["id"]}
    ids = tokenizer(QWEN3[0]).encode(_LONG, add_special_tokens=False)[:80]
    sizes: list[int] = []
    events = _stream(client, "/v1/responses/derender", "responses_request", request, [1, 2, 3], ids, [1] * 80,
                     "length", sizes)
    assert abs(sizes[-2] - sizes[10]) <= 16, sizes
    done = [e["data"] for e in events if e["event"] == "response.output_text.done"]
    deltas = "".join(e["data"]["delta"] for e in events if e["event"] == "response.output_text.delta")
    assert len(done) == 1 and done[0]["text"] == deltas and len(deltas) > 60
    last = events[-1]["data"]
    assert events[-1]["event"] == "response.incomplete" and last["response"]["status"] == "incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert [o["type"] for o in last["response"]["output"]] == ["reasoning", "message"]
    assert last["response"]["output"][1]["content"][0]["text"] == deltas
    assert last["response"]["output"][1]["status"] == "incomplete"


def test_a_stream_state_resumes_only_on_the_route_family_that_made_it(serve):
    """Newcomer finding: a chat stream_state was accepted by the completions, Messages and
    Responses routes (which then answered without their opening events). Each state now names its
    route family; elsewhere it is a 400 on ``stream_state``, on its own route it continues."""
    client = _client(serve, *QWEN3)
    first = {
        "/v1/chat/completions/derender": ("chat_request", {"messages": [{"role": "user", "content": "hi"}]}),
        "/v1/completions/derender": ("completion_request", {"prompt": "hi"}),
        "/v1/messages/derender": ("messages_request", {"model": QWEN3[0], "max_tokens": 50,
                                                       "messages": [{"role": "user", "content": "hi"}]}),
        "/v1/responses/derender": ("responses_request", {"input": "hi"}),
    }
    states = {}
    for path, (key, request) in first.items():
        out = client.post(path, json={
            "stream": True, key: request, "prompt_token_ids": [1, 2, 3],
            "generate_chunk": {"request_id": "r", "choices": [{"index": 0, "token_ids": [9707]}]},
        })
        assert out.status_code == 200, (path, out.text)
        states[path] = out.json()["stream_state"]
    for made_by, state in states.items():
        for path in first:
            out = client.post(path, json={
                "stream": True, "stream_state": state,
                "generate_chunk": {"request_id": "r", "choices": [{"index": 0, "token_ids": [11]}]},
            })
            if path == made_by:
                assert out.status_code == 200, (made_by, path, out.text)
            else:
                assert out.status_code == 400, (made_by, path, out.text)
                assert out.json()["error"]["param"] == "stream_state"
