"""The render lane (``serving/render_lane.py``) answers exactly as the full FastAPI stack would.

Each request is sent twice to one app in-process: through its ASGI entry (the lane) and straight
into FastAPI's own entry (the whole middleware stack and router, what the lane replaces). Status,
body bytes and headers must be equal, for answers and for every kind of refusal (validation,
unknown model, body limits, size limit, API key, bad JSON, media type), on the inline path (small
bodies) and on the worker pool (large ones). Metrics and real-HTTP headers are checked on a live
server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest
from conftest import model_dir, shared_bundle
from fastapi import FastAPI

from render_service.serving import metrics
from render_service.serving.app import create_app
from render_service.serving.render_lane import INLINE_RENDER_BYTES
from render_service.settings import Settings

KEY = "lane-key-0123456789abcdef"
CHAT = "/v1/chat/completions/render"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                                           "parameters": {"type": "object", "properties": {
                                               "city": {"type": "string"}}}}}]


def _settings(**kw: Any) -> Settings:
    return Settings(model=model_dir("Qwen--Qwen3-0.6B"), max_model_len=1_000_000,
                    reasoning_parser="qwen3", tool_call_parser="hermes", enable_auto_tool_choice=True,
                    **kw)


def _chat(n: int = 2, **extra: Any) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    for i in range(n - 1):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " * 8})
    messages[-1] = {"role": "user", "content": "What is the weather in Zürich?"}
    return {"messages": messages, "tools": TOOLS, **extra}


def _big_chat() -> dict[str, Any]:
    body = _chat(40)
    body["messages"].insert(2, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                          "arguments": '{"city": "Bern"}'}}]})
    body["messages"].insert(3, {"role": "tool", "tool_call_id": "call_1", "content": "21 °C " * 2000})
    assert len(orjson.dumps(body)) > INLINE_RENDER_BYTES
    return body


Case = tuple[str, bytes | dict[str, Any], dict[str, str]]


def _both(settings: Settings, cases: list[Case]) -> list[tuple[httpx.Response, httpx.Response]]:
    """Each case answered by the app's entry (lane) and by FastAPI's entry (full stack)."""
    app = create_app(settings, shared_bundle(Settings(model=settings.model, max_model_len=1_000_000)))

    async def full(scope: Any, receive: Any, send: Any) -> None:
        await FastAPI.__call__(app, scope, receive, send)

    async def run() -> list[tuple[httpx.Response, httpx.Response]]:
        out = []
        async with app.router.lifespan_context(app):
            lane = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
            whole = httpx.AsyncClient(transport=httpx.ASGITransport(app=full), base_url="http://t")
            for path, body, headers in cases:
                kw: dict[str, Any] = {"content": body} if isinstance(body, bytes) else {"json": body}
                pair = []
                for client in (lane, whole):
                    pair.append(await client.post(path, headers=headers, **kw))
                out.append((pair[0], pair[1]))
        return out

    return asyncio.run(run())


def _same(lane: httpx.Response, whole: httpx.Response, fresh_id: bool = False) -> None:
    """Equal answers; ``fresh_id``: no ``X-Request-Id`` was sent, so each side made its own."""
    assert lane.status_code == whole.status_code, (lane.text, whole.text)
    assert lane.content == whole.content
    skip = {"x-request-id"} if fresh_id else set()
    assert sorted(kv for kv in lane.headers.items() if kv[0] not in skip) == \
        sorted(kv for kv in whole.headers.items() if kv[0] not in skip)
    assert len(lane.headers["x-request-id"]) == len(whole.headers["x-request-id"])


def _counted(path: str, status: str) -> float:
    metrics.fold_tallies()  # the lane keeps its 200 answers as plain numbers until /metrics is read
    return metrics.REQUESTS.labels(path, "POST", status)._value.get()


def test_lane_answers_equal_the_full_stack():
    rid = {"X-Request-Id": "lane-test-1"}
    small, big = _chat(), _big_chat()
    cases: list[Case] = [
        (CHAT, small, rid),
        (CHAT, big, rid),
        (CHAT, dict(small, request_id="body-id", max_tokens=7, logprobs=True, top_logprobs=2), {}),
        (CHAT, dict(small, request_id="body-id"), rid),
        ("/v1/completions/render", {"prompt": "Hello there", "max_tokens": 5}, rid),
        ("/v1/messages/render",
         {"model": model_dir("Qwen--Qwen3-0.6B"), "max_tokens": 9, "messages": [{"role": "user", "content": "Hi"}]}, rid),
        ("/v1/responses/render", {"input": "Hi", "request_id": "resp_x"}, {}),
        (CHAT, {"messages": "not a list"}, rid),  # 400 from the handler
        (CHAT, {"messages": [{"role": "wizard", "content": "x"}]}, rid),
        (CHAT, dict(small, model="no-such-model"), rid),  # 404
        (CHAT, dict(small, top_logprobs=3), rid),  # InvalidRequest
        (CHAT, dict(small, messages=small["messages"] * 40), rid),  # over --max-messages
        (CHAT, dict(big, model="no-such-model"), rid),  # an error raised on the worker pool
        (CHAT, b'{"messages": [', dict(rid, **{"content-type": "application/json"})),  # bad JSON
        (CHAT, orjson.dumps(small), dict(rid, **{"content-type": "text/plain"})),  # media type
        (CHAT, orjson.dumps([1, 2]), dict(rid, **{"content-type": "application/json"})),
    ]
    before = {s: _counted(CHAT, s) for s in ("200", "400", "404")}
    pairs = _both(_settings(max_messages=60), cases)
    for (_, _, headers), (lane, whole) in zip(cases, pairs, strict=True):
        _same(lane, whole, fresh_id="X-Request-Id" not in headers)
    statuses = [lane.status_code for lane, _ in pairs]
    assert statuses[:7] == [200] * 7 and statuses[9] == 404 and 413 not in statuses
    assert all(s == 400 for s in statuses[7:] if s != 404), statuses
    for status in before:  # the lane and the full stack each counted every chat case once
        chat = sum(1 for (path, _, _), (lane, _) in zip(cases, pairs, strict=True)
                   if path == CHAT and str(lane.status_code) == status)
        assert _counted(CHAT, status) - before[status] == 2 * chat
    ids = [lane.json().get("request_id") for lane, _ in pairs[:4]]
    assert ids == ["chatcmpl-lane-test-1", "chatcmpl-lane-test-1", "chatcmpl-body-id",
                   "chatcmpl-lane-test-1"]  # header first, then the body's id (as vLLM)
    assert pairs[1][0].json()["token_ids"] and len(pairs[1][0].json()["token_ids"]) > 3000


def test_lane_refusals_before_the_handler_equal_the_full_stack():
    auth = {"Authorization": f"Bearer {KEY}", "X-Request-Id": "lane-test-2"}
    cases: list[Case] = [
        (CHAT, _chat(), {"X-Request-Id": "lane-test-2"}),  # no key: 401
        (CHAT, _chat(), dict(auth, Authorization="Bearer wrong")),
        (CHAT, _chat(), auth),
        (CHAT, _big_chat(), auth),  # over the body size: 413
    ]
    pairs = _both(_settings(api_keys=(KEY,), max_request_body_bytes=INLINE_RENDER_BYTES), cases)
    for lane, whole in pairs:
        _same(lane, whole)
    assert [lane.status_code for lane, _ in pairs] == [401, 401, 200, 413]


def _metric(client: httpx.Client, name: str, labels: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(name + "{") and labels in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize("big", [False, True])
def test_lane_headers_and_metrics_over_http(serve, big):
    client = serve()  # the suite's default server (no tool parser: the tools are left out)
    body = {k: v for k, v in (_big_chat() if big else _chat()).items() if k != "tools"}
    fp = client.get("/ready").json()["config_fingerprint"]
    name, endpoint = "render_service_requests_total", f'endpoint="{CHAT}",method="POST",status='
    ok, bad = _metric(client, name, endpoint + '"200"'), _metric(client, name, endpoint + '"400"')
    tokens = _metric(client, "render_service_tokens_rendered_total", f'endpoint="{CHAT}"')
    r = client.post(CHAT, json=body)
    assert r.status_code == 200, r.text
    assert r.headers["x-render-config-fingerprint"] == fp
    assert r.json()["request_id"] == "chatcmpl-" + r.headers["x-request-id"]
    assert len(r.headers["x-request-id"]) == 32
    r2 = client.post(CHAT, json={"messages": []}, headers={"X-Request-Id": "given"})
    assert r2.status_code == 400 and r2.headers["x-request-id"] == "given"
    assert r2.json()["error"]["message"].startswith("Cannot apply chat template to an empty conversation")
    assert _metric(client, name, endpoint + '"200"') == ok + 1
    assert _metric(client, name, endpoint + '"400"') == bad + 1
    assert _metric(client, "render_service_tokens_rendered_total", f'endpoint="{CHAT}"') == \
        tokens + len(r.json()["token_ids"])
