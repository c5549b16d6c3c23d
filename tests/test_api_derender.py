"""Anthropic Messages and OpenAI Responses derender over real HTTP: every batch answer and every
streamed event validates against the official ``anthropic`` / ``openai`` SDK types, and the SDKs'
own stream clients (``client.messages.stream(...).get_final_message()``,
``client.responses.stream(...).get_final_response()``), fed the raw per-call events as SSE,
rebuild our batch answer, at one token per chunk and at random chunk sizes, for Qwen3
(qwen3 + hermes) and gpt-oss (openai_gptoss + openai)."""

from __future__ import annotations

import random
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import orjson
import pytest
from anthropic.types import Message, RawMessageStreamEvent
from conftest import model_dir
from derender_helpers import split
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter
from test_e2e_families import tokenizer

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
    (
        "qwen3_unicode_answer",
        QWEN3,
        "<think>\n日本語で答える 😀\n</think>\n\n東京は晴れ、22°C です 👩‍👩‍👧<|im_end|>",
        "stop",
        {},
        {"kinds": ["thinking", "text"], "stop_reason": "end_turn"},
    ),
    (
        "qwen3_two_calls",
        QWEN3,
        '<think>\nTwo cities.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": '
        '{"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": '
        '{"city": "東京"}}\n</tool_call><|im_end|>',
        "stop",
        {},
        {"kinds": ["thinking", "text", "tool_use", "tool_use"], "stop_reason": "tool_use"},
    ),
    (
        "gpt_oss_preamble_call",
        GPT_OSS,
        "<|channel|>analysis<|message|>Use the tool.<|end|><|start|>assistant<|channel|>commentary<|message|>"
        "Let me look that up.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
        '<|constrain|>json<|message|>{"city": "Paris"}<|call|>',
        "stop",
        {},
        {"kinds": ["thinking", "text", "tool_use"], "stop_reason": "tool_use"},
    ),
    (
        "gpt_oss_length",
        GPT_OSS,
        "<|channel|>analysis<|message|>I'm thinking.<|end|><|start|>assistant<|channel|>final<|message|>"
        "I'm in the middle of answering",
        "length",
        {},
        {"kinds": ["thinking", "text"], "stop_reason": "max_tokens"},
    ),
    (  # a call cut by max_tokens inside a string value: Anthropic input is the SDK's partial parse
        "qwen3_call_cut",
        QWEN3,
        '<think>\nok\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "da',
        "length",
        {},
        {"kinds": ["thinking", "text", "tool_use"], "stop_reason": "max_tokens", "input": {"city": "Paris"}},
    ),
    (
        "gpt_oss_call_cut",
        GPT_OSS,
        "<|channel|>analysis<|message|>Call it.<|end|><|start|>assistant<|channel|>commentary to=functions."
        'get_weather <|constrain|>json<|message|>{"city": "Par',
        "length",
        {},
        {"kinds": ["thinking", "tool_use"], "stop_reason": "max_tokens", "input": {}},
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
    states: list[str] | None = None,
) -> list[dict[str, Any]]:
    """The raw events of a stream of ``ids`` in chunks of ``sizes``, one HTTP call per chunk,
    as the service answered them (nothing filled in); ``states`` collects each returned state."""
    chunks = list(split(ids, sizes))
    events: list[dict[str, Any]] = []
    state = None
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
        events.extend(reply["events"])
        state = reply["stream_state"]
        if states is not None:
            states.append(state)
        if reply["stop_generation"]:
            break
    return events


def _replay(events: list[dict[str, Any]], http: Any = httpx) -> Any:
    """An HTTP client (of the ``http`` module the SDK uses: ``httpx``, or ``httpx2`` for
    ``anthropic``) whose every answer is ``events`` as the SSE body a Messages / Responses server
    sends (``event: <type>`` / ``data: <json>``): what an SDK reads from a gateway that forwards
    the per-call derender's events unchanged."""
    body = b"".join(
        b"event: %s\ndata: %s\n\n" % (e["event"].encode(), orjson.dumps(e["data"])) for e in events
    )
    return http.Client(transport=http.MockTransport(
        lambda _: http.Response(200, headers={"content-type": "text/event-stream"}, content=body)))


def _anthropic_final(events: list[dict[str, Any]], request: dict[str, Any]) -> Message:
    """The ``anthropic`` SDK's ``MessageStream`` over ``events``: its final message."""
    client = anthropic.Anthropic(api_key="k", base_url="http://replay", http_client=_replay(events, httpx2))
    with client.messages.stream(**request) as stream:
        return stream.get_final_message()


def _openai_stream(events: list[dict[str, Any]], request: dict[str, Any]) -> tuple[list[Any], Any]:
    """The ``openai`` SDK's ``ResponseStream`` over ``events``: the events it yields and its
    ``get_final_response()`` (``None`` when the stream ends with ``response.incomplete``, for
    which the SDK has no final response: the caller reads that event's ``response``)."""
    client = openai.OpenAI(api_key="k", base_url="http://replay/v1", http_client=_replay(events))
    with client.responses.stream(**request) as stream:
        seen = list(stream)
        try:
            return seen, stream.get_final_response()
        except RuntimeError:  # "Didn't receive a `response.completed` event."
            return seen, None


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
            assert block.name == "get_weather"
            if "input" in want:
                assert block.input == want["input"]
            else:
                assert block.input["city"] in ("Paris", "東京")
    for sizes in _chunkings(len(ids), seed=len(name)):
        events = _stream(
            client, "/v1/messages/derender", "messages_request", request, prompt, ids, sizes, finish
        )
        for raw in events:
            assert ANTHROPIC_EVENT.validate_python(raw["data"]).type == raw["event"]
        assert events[0]["event"] == "message_start" and events[-1]["event"] == "message_stop"
        got, ref = _anthropic_final(events, request).model_dump(), message.model_dump()
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
        if item.type == "function_call" and finish != "length":
            assert item.name == "get_weather" and item.arguments.replace(" ", "") in (
                '{"city":"Paris"}', '{"city":"東京"}')
    for sizes in _chunkings(len(ids), seed=len(name) + 1):
        events = _stream(
            client, "/v1/responses/derender", "responses_request", request, prompt, ids, sizes, finish
        )
        for n, raw in enumerate(events):
            event = OPENAI_EVENT.validate_python(raw["data"])
            assert event.type == raw["event"] and event.sequence_number == n
        # OpenAI / vLLM 0.33: a response cut by max_output_tokens ends with response.incomplete
        terminal = "response.incomplete" if finish == "length" else "response.completed"
        assert events[-1]["event"] == terminal
        # every raw event is whole: the terminal event's output is the batch output, and each
        # done event repeats its item's whole text (as OpenAI and vLLM 0.33 send them)
        assert _plain(events[-1]["data"]["response"]["output"]) == _plain(batch.json()["output"])
        _assert_done_events_whole(events)
        sdk_request = {k: request[k] for k in ("model", "input", "tools", "max_output_tokens")}
        seen, final = _openai_stream(events, sdk_request)
        assert [e.type for e in seen] == [e["event"] for e in events]
        if finish == "length":  # no response.completed: the SDK's incomplete event carries it
            final = seen[-1].response
        assert final is not None and final.status == response.status
        keys = ["output", "status", "incomplete_details"] + ([] if extra.get("stop_sequences") else ["usage"])
        for key in keys:
            got = getattr(final, key)
            ref = getattr(response, key)
            assert _plain(got) == _plain(ref), (key, sizes)


def _assert_done_events_whole(events: list[dict[str, Any]]) -> None:
    """Each done event's text is the join of its item's deltas (no ``null`` left to fill)."""
    texts: dict[int, str] = {}
    for e in events:
        kind, data = e["event"], e["data"]
        if kind.endswith(".delta"):
            texts[data["output_index"]] = texts.get(data["output_index"], "") + data["delta"]
            continue
        text = texts.get(data.get("output_index", -1), "")
        if kind in ("response.reasoning_text.done", "response.output_text.done"):
            assert data["text"] == text, e
        elif kind == "response.content_part.done":
            assert data["part"]["text"] == text, e
        elif kind == "response.function_call_arguments.done":
            assert data["arguments"] == text, e
        elif kind == "response.output_item.done":
            item = data["item"]
            got = item["arguments"] if item["type"] == "function_call" else item["content"][0]["text"]
            assert got == text, e


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


_WORDS = "<think>\nok\n</think>\n\n" + " ".join(
    random.Random(7).choice(["weather", "Paris", "sunny", "forecast", "tomorrow", "rain", "cloud", "wind"])
    for _ in range(80))


def test_messages_stream_state_does_not_grow_with_the_output(serve):
    """The Messages stream state holds block bookkeeping only: its size at token 80 of a long text
    is its size at token 10, within a few bytes of counters."""
    client = _client(serve, *QWEN3)
    request = {**_anthropic_request({}), "model": client.get("/v1/models").json()["data"][0]["id"]}
    ids = tokenizer(QWEN3[0]).encode(_LONG, add_special_tokens=False)[:80]
    states: list[str] = []
    _stream(client, "/v1/messages/derender", "messages_request", request, [1, 2, 3], ids, [1] * 80, "length",
            states)
    sizes = [len(s) for s in states]
    assert abs(sizes[-2] - sizes[10]) <= 16, sizes


def test_responses_stream_state_carries_the_output_text_once(serve):
    """The Responses stream state keeps each item's text so far (its done events and terminal
    ``response.output`` repeat it, whole, with no caller fill step): from token 10 to token 79 it
    grows by at most the base64 of the text streamed in between, and is zlib-compressed once its
    body passes 512 bytes; the raw events' done texts and terminal output are the whole text."""
    client = _client(serve, *QWEN3)
    request = {**_responses_request({}), "model": client.get("/v1/models").json()["data"][0]["id"]}
    ids = tokenizer(QWEN3[0]).encode(_WORDS, add_special_tokens=False)[:80]
    states: list[str] = []
    events = _stream(client, "/v1/responses/derender", "responses_request", request, [1, 2, 3], ids, [1] * 80,
                     "length", states)
    sizes = [len(s) for s in states]
    deltas = [e["data"]["delta"] for e in events if e["event"].endswith(".delta")]
    streamed = "".join(deltas[11:]).encode()  # from the 12th text delta (token 11) on
    assert len(streamed) > 150
    assert sizes[-1] - sizes[10] <= len(streamed) * 4 / 3 + 32, (sizes, len(streamed))
    assert states[10].startswith("1j.") and states[-1].startswith("1z."), (states[10][:3], states[-1][:3])
    done = [e["data"] for e in events if e["event"] == "response.output_text.done"]
    text = "".join(e["data"]["delta"] for e in events if e["event"] == "response.output_text.delta")
    assert len(done) == 1 and done[0]["text"] == text and len(text) > 60
    last = events[-1]["data"]
    assert events[-1]["event"] == "response.incomplete" and last["response"]["status"] == "incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert [o["type"] for o in last["response"]["output"]] == ["reasoning", "message"]
    assert last["response"]["output"][1]["content"][0]["text"] == text
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
