"""Gateway ``POST /v1/messages`` (official ``anthropic`` SDK) and ``POST /v1/responses`` (official
``openai`` SDK) over real HTTP on 127.0.0.1, in front of the scripted prefill + decode pair of
``test_gateway`` (Qwen3, qwen3 reasoning + hermes tools). What the SDK gets (JSON, and the final
message its stream accumulator rebuilds) is compared with render → prefill → decode → the batch
``/v1/messages/derender`` (``/v1/responses/derender``) done by hand through the same server.
"""

from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest
from anthropic.types import Message
from openai.types.responses import Response
from test_gateway import TOOLS, engines, gateway  # noqa: F401 (fixtures)

from render_service.errors import error_body
from render_service.serving.gateway.hops import named_error, prefill_body
from render_service.testing.engine import wait_until

MODEL = "Qwen/Qwen3-0.6B"
WEATHER = [{"role": "user", "content": "What is the weather in Tokyo and Zürich?"}]
A_TOOLS = [{"name": t["function"]["name"], "description": "weather",
            "input_schema": t["function"]["parameters"]} for t in TOOLS]
R_TOOLS = [{"type": "function", "name": t["function"]["name"], "description": "weather",
            "parameters": t["function"]["parameters"]} for t in TOOLS]
THINKING = {"type": "enabled", "budget_tokens": 1024}


@pytest.fixture(scope="module")
def claude(gateway):  # noqa: F811
    client = anthropic.Anthropic(base_url=str(gateway.base_url), api_key="unused", max_retries=0)
    yield client
    client.close()


@pytest.fixture(scope="module")
def sdk(gateway):  # noqa: F811
    client = openai.OpenAI(base_url=str(gateway.base_url) + "/v1", api_key="unused", max_retries=0)
    yield client
    client.close()


def by_hand(gateway, engines, api, request, rid):  # noqa: F811
    """render → prefill → decode → batch derender through the HTTP endpoints; the engine answer's
    request id set to the gateway's response id ``rid`` so ids compare."""
    rendered = gateway.post(f"/v1/{api}/render", json=request).json()
    kv = httpx.post(engines["prefill"][0] + "/inference/v1/generate",
                    json=prefill_body(rendered)).json()["kv_transfer_params"]
    gen = httpx.post(engines["decode"][0] + "/inference/v1/generate",
                     json={**rendered, "kv_transfer_params": kv}).json()
    gen["request_id"] = rid
    key = "messages_request" if api == "messages" else "responses_request"
    r = gateway.post(f"/v1/{api}/derender", json={
        "generate_response": gen, key: request, "prompt_token_ids": rendered["token_ids"]})
    assert r.status_code == 200, r.text
    return r.json()


def test_messages_json_and_stream_equal_by_hand(gateway, engines, claude):  # noqa: F811
    request = {"model": MODEL, "max_tokens": 2000, "messages": WEATHER, "tools": A_TOOLS,
               "thinking": THINKING}
    want = Message.model_validate(by_hand(gateway, engines, "messages", request, "msg_m1"))
    assert [b.type for b in want.content] == ["thinking", "text", "tool_use", "tool_use"]
    assert [b.input for b in want.content[2:]] == [{"city": "東京"}, {"city": "Zürich"}]
    assert want.stop_reason == "tool_use"

    got = claude.messages.create(**request, extra_headers={"X-Request-Id": "m1"})
    assert got == want

    events = list(claude.messages.create(**request, stream=True, extra_headers={"X-Request-Id": "m1"}))
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 4
    assert [e.index for e in events if e.type == "content_block_start"] == [0, 1, 2, 3]

    with claude.messages.stream(**request, extra_headers={"X-Request-Id": "m1"}) as stream:
        final = stream.get_final_message()
    # the accumulator's usage counts only what message_delta carries; the rest is the batch answer
    assert final.model_dump(exclude={"usage"}) == want.model_dump(exclude={"usage"})
    assert final.usage.output_tokens == want.usage.output_tokens


def test_messages_raw_sse_framing(gateway):  # noqa: F811
    body = {"model": MODEL, "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}],
            "stream": True}
    with gateway.stream("POST", "/v1/messages", json=body) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        text = "".join(r.iter_text())
    frames = [f for f in text.split("\n\n") if f]
    for frame in frames:
        head, data = frame.split("\n")
        assert head.startswith("event: ") and data.startswith("data: ")
        assert json.loads(data[6:])["type"] == head[7:]
    assert "[DONE]" not in text


def test_messages_stop_sequence_aborts_the_engine_request(claude, engines):  # noqa: F811
    d_app = engines["decode"][1]
    request = {"model": MODEL, "max_tokens": 1000, "stop_sequences": ["STOP"],
               "messages": [{"role": "user", "content": "count slow please"}]}
    with claude.messages.stream(**request, extra_headers={"X-Request-Id": "msg-stop-1"}) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == "STOP"
    assert final.content[-1].text.endswith(" 39 ")
    assert wait_until(d_app, lambda: any("msg-stop-1" in rid for rid in d_app.state.aborts))
    assert wait_until(d_app, lambda: any("msg-stop-1" in rid for rid in d_app.state.cancelled))


def test_messages_errors(gateway, claude):  # noqa: F811
    with pytest.raises(anthropic.BadRequestError):
        claude.messages.create(model=MODEL, max_tokens=10, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "url", "url": "http://x/y.png"}}]}])
    with pytest.raises(anthropic.NotFoundError):
        claude.messages.create(model="nope", max_tokens=10, messages=WEATHER)
    r = gateway.post("/v1/messages", json={"model": MODEL, "messages": "x"})
    assert r.status_code == 400 and r.json()["error"]["type"]


def test_responses_json_and_stream_equal_by_hand(gateway, engines, sdk):  # noqa: F811
    request = {"model": MODEL, "input": WEATHER, "tools": R_TOOLS}
    want = Response.model_validate(by_hand(gateway, engines, "responses", request, "resp_r1"))
    assert [o.type for o in want.output] == ["reasoning", "message", "function_call", "function_call"]
    assert [json.loads(o.arguments)["city"] for o in want.output[2:]] == ["東京", "Zürich"]
    assert want.usage is not None and want.usage.output_tokens_details.reasoning_tokens > 0  # as vLLM

    got = sdk.responses.create(**request, extra_headers={"X-Request-Id": "r1"})
    assert got.model_dump(exclude={"created_at"}) == want.model_dump(exclude={"created_at"})
    assert got.output_text == "\n\nLet me check."

    events = list(sdk.responses.create(**request, stream=True, extra_headers={"X-Request-Id": "r1"}))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    assert {"response.output_item.added", "response.function_call_arguments.delta",
            "response.function_call_arguments.done", "response.reasoning_text.delta",
            "response.output_text.delta"} <= {e.type for e in events}
    final = events[-1].response
    assert final.model_dump(exclude={"created_at"}) == want.model_dump(exclude={"created_at"})


def test_responses_cut_by_max_output_tokens_end_incomplete(sdk):
    """The engine stops for length: the SDK's stream ends with ``response.incomplete`` whose
    output is the JSON answer's, status ``incomplete``."""
    request = {"model": MODEL, "input": WEATHER, "tools": R_TOOLS, "max_output_tokens": 12}
    want = sdk.responses.create(**request, extra_headers={"X-Request-Id": "r-len"})
    assert want.status == "incomplete" and want.incomplete_details.reason == "max_output_tokens"
    events = list(sdk.responses.create(**request, stream=True, extra_headers={"X-Request-Id": "r-len"}))
    assert events[-1].type == "response.incomplete"
    assert "response.completed" not in {e.type for e in events}
    final = events[-1].response
    assert final.model_dump(exclude={"created_at"}) == want.model_dump(exclude={"created_at"})
    assert final.output[-1].status == "incomplete" and final.output[0].content[0].text


def test_responses_stop_aborts_and_errors(sdk, engines):  # noqa: F811
    d_app = engines["decode"][1]
    events = list(sdk.responses.create(model=MODEL, input="count slow please", stream=True,
                                       extra_body={"stop": ["STOP"]},
                                       extra_headers={"X-Request-Id": "resp-stop-1"}))
    final = events[-1].response
    assert final.status == "completed" and final.output_text.endswith(" 39 ")
    assert wait_until(d_app, lambda: any("resp-stop-1" in rid for rid in d_app.state.aborts))
    with pytest.raises(openai.BadRequestError):
        sdk.responses.create(model=MODEL, input="hi", previous_response_id="resp_x")
    with pytest.raises(openai.BadRequestError):
        sdk.responses.create(model=MODEL, input="hi", tools=[{"type": "web_search"}])


def test_engine_failure_is_a_502_for_both_sdks(claude, sdk):
    with pytest.raises(anthropic.InternalServerError) as err:
        claude.messages.create(model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "explode"}])
    assert err.value.status_code == 502
    with pytest.raises(anthropic.InternalServerError):
        list(claude.messages.create(model=MODEL, max_tokens=10, stream=True,
                                    messages=[{"role": "user", "content": "explode"}]))
    with pytest.raises(openai.InternalServerError) as oerr:
        sdk.responses.create(model=MODEL, input="explode", stream=True)
    assert oerr.value.status_code == 502


def test_anthropic_stream_error_type_follows_the_cause():
    """After a Messages stream started, the ``error`` event's ``error.type`` is Anthropic's word
    for the cause (vLLM 0.33 ``translate_error_type``, Anthropic's error docs), and every one
    validates as the ``anthropic`` SDK's ``ErrorResponse``."""
    from anthropic.types import ErrorResponse

    from render_service.errors import InvalidRequest, to_error_body
    from render_service.serving.gateway.engines import EngineTimeout
    from render_service.serving.gateway.hops import engine_stream_error

    def engine(code):  # an engine's mid-stream ``data: {"error": ...}`` event
        return to_error_body(engine_stream_error({"error": {"message": "engine says", "code": code}}))

    causes = {
        "overloaded_error": [engine(503), engine(429)],
        "invalid_request_error": [engine(400), to_error_body(InvalidRequest("token_ids too long"))],
        "api_error": [engine(500), engine(None), error_body("invalid stream event", "BadGatewayError", 502)],
        "timeout_error": [to_error_body(EngineTimeout("engine silent"))],
        "not_found_error": [error_body("no such model", "NotFoundError", 404)],
        "authentication_error": [error_body("bad key", "AuthenticationError", 401)],
    }
    for want, bodies in causes.items():
        for body in bodies:
            data = named_error("messages", body).decode().split("data: ")[1]
            event = ErrorResponse.model_validate_json(data)
            assert event.error.type == want, (want, body)
            assert event.error.message == body["error"]["message"]
    assert engine(503)["error"]["code"] == 503 and engine(400)["error"]["code"] == 400


def test_engine_error_mid_stream_ends_the_messages_stream_as_overloaded():
    """An engine (real HTTP on 127.0.0.1) that sends one chunk and then ``{"error": {"code":
    503}}``: the gateway's Messages stream (its hops, in process) ends with ``event: error`` of
    type ``overloaded_error`` after ``message_start``."""
    import asyncio

    import orjson
    from derender_helpers import QWEN3, bundle
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse

    from render_service.serving.gateway.engines import Engines
    from render_service.serving.gateway.hops import GatewayStream, prepare
    from render_service.settings import Settings
    from render_service.testing.engine import serve_in_thread

    app = FastAPI()

    @app.post("/inference/v1/generate")
    async def generate():
        async def events():
            yield b'data: {"request_id": "x", "choices": [{"index": 0, "token_ids": [9707]}]}\n\n'
            full = {"message": "queue full", "type": "ServiceUnavailableError", "param": None, "code": 503}
            yield b"data: " + orjson.dumps({"error": full}) + b"\n\n"
        return StreamingResponse(events(), media_type="text/event-stream")

    url, stop = serve_in_thread(app)
    b = bundle(QWEN3)
    settings = Settings(model=str(b.root), engine_urls=(url,))
    body = {"model": b.names[0], "max_tokens": 20, "stream": True, "request_id": "e1",
            "messages": [{"role": "user", "content": "hi"}]}

    async def run() -> str:
        pools = Engines(settings)
        stream = GatewayStream(pools, prepare(b, settings, body, "messages"), "/v1/messages", 0.0, False,
                               "messages")
        try:
            await stream.open()
            return b"".join([chunk async for chunk in stream.events()]).decode()
        finally:
            await stream.close(disconnected=False)
            await pools.aclose()

    try:
        text = asyncio.run(run())
    finally:
        stop()
    frames = [f.split("\n") for f in text.split("\n\n") if f]
    assert frames[0][0] == "event: message_start" and frames[-1][0] == "event: error"
    assert json.loads(frames[-1][1][6:])["error"] == {"type": "overloaded_error", "message": "queue full"}


def test_error_after_the_stream_started_is_each_apis_error_event():
    from anthropic.types import ErrorResponse
    from openai.types.responses import ResponseErrorEvent

    body = error_body("engine went away", "BadGatewayError", 502)
    for api, kind in (("messages", ErrorResponse), ("responses", ResponseErrorEvent)):
        head, data = named_error(api, body).decode().rstrip("\n").split("\n")
        assert head == "event: error"
        event = kind.model_validate_json(data[6:])
        assert event.type == "error"
    assert "engine went away" in named_error("messages", body).decode()


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/responses"])
def test_client_disconnect_aborts_the_engine_request(gateway, engines, path):  # noqa: F811
    d_app = engines["decode"][1]
    tag = f"gone-{path.rsplit('/', 1)[1]}"
    body = {"model": MODEL, "max_tokens": 1000, "stream": True,
            "messages": [{"role": "user", "content": "count slow please"}]}
    if path == "/v1/responses":
        body = {"model": MODEL, "input": "count slow please", "stream": True}
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        with client.stream("POST", path, json=body, headers={"X-Request-Id": tag}) as r:
            assert r.status_code == 200
            assert next(line for line in r.iter_lines() if line.startswith("event: "))
    assert wait_until(d_app, lambda: any(tag in rid for rid in d_app.state.aborts))
    assert wait_until(d_app, lambda: not any(tag in rid for rid in d_app.state.active))
