"""Ops behaviour that needs the render/derender handlers (X-Request-Id as base id, token metrics).

Each test would skip with a message if its route answered 501 Not Implemented; with the handlers
merged they all run.
"""

from __future__ import annotations

import pytest

from tests.test_metrics import samples

CHAT = {"model": "Qwen/Qwen3-0.6B", "messages": [{"role": "user", "content": "Hello there"}]}


def _post_or_skip(client, path, body, **kw):
    r = client.post(path, json=body, **kw)
    if r.status_code == 501:
        pytest.skip(f"{path} not implemented on this branch yet (501)")
    return r


def test_request_id_header_is_the_render_base_id(serve):
    """X-Request-Id becomes the base of the rendered request id (upstream: chatcmpl-<id>), over the
    body's own request_id."""
    client = serve()
    r = _post_or_skip(client, "/v1/chat/completions/render", {**CHAT, "request_id": "body-id"},
                      headers={"X-Request-Id": "hdr-42"})
    assert r.status_code == 200, r.text
    assert r.json()["request_id"] == "chatcmpl-hdr-42"
    assert r.headers["x-request-id"] == "hdr-42"


def test_rendered_and_derendered_tokens_are_counted(serve):
    """tokens_rendered_total grows by the rendered prompt length; tokens_derendered_total by the
    output token ids handed to derender."""
    client = serve()
    before = samples(client)
    r = _post_or_skip(client, "/v1/chat/completions/render", CHAT)
    assert r.status_code == 200, r.text
    n_prompt = len(r.json()["token_ids"])
    key = ("render_service_tokens_rendered_total", (("endpoint", "/v1/chat/completions/render"),))
    assert samples(client)[key] - before.get(key, 0) == n_prompt
    ids = client.post("/tokenize", json={"prompt": "Hi! How are you?"}).json()["tokens"]
    body = {"generate_response": {"request_id": "x", "choices": [{"index": 0, "token_ids": ids,
                                                                  "finish_reason": "stop"}]},
            "chat_request": CHAT}
    before = samples(client)
    d = _post_or_skip(client, "/v1/chat/completions/derender", body)
    assert d.status_code == 200, d.text
    key = ("render_service_tokens_derendered_total", (("endpoint", "/v1/chat/completions/derender"),))
    assert samples(client)[key] - before.get(key, 0) == len(ids)


def test_request_id_header_on_derender_is_echoed_and_the_id_stays_the_engines(serve):
    """Derender echoes X-Request-Id in the response header; the response id stays the generate
    response's request_id (upstream derender uses ``gen.request_id``), batch and streaming."""
    client = serve()
    ids = client.post("/tokenize", json={"prompt": "Fine, thanks."}).json()["tokens"]
    batch = {"generate_response": {"request_id": "chatcmpl-engine-1", "choices": [
        {"index": 0, "token_ids": ids, "finish_reason": "stop"}]}}
    r = _post_or_skip(client, "/v1/chat/completions/derender", batch, headers={"X-Request-Id": "hdr-7"})
    assert r.status_code == 200, r.text
    assert r.headers["x-request-id"] == "hdr-7" and r.json()["id"] == "chatcmpl-engine-1"
    choice = {"index": 0, "token_ids": ids, "finish_reason": "stop"}
    stream = {"stream": True, "stream_state": None,
              "generate_chunk": {"request_id": "chatcmpl-engine-2", "choices": [choice]}}
    r = _post_or_skip(client, "/v1/chat/completions/derender", stream, headers={"X-Request-Id": "hdr-8"})
    assert r.status_code == 200, r.text
    assert r.headers["x-request-id"] == "hdr-8" and r.json()["chunk"]["id"] == "chatcmpl-engine-2"


def test_streaming_derender_counts_each_chunks_new_tokens_only(serve):
    """Over a two-chunk streaming derender, tokens_derendered_total grows by the chunks' token ids
    (the prompt_token_ids sent on the first call are not output tokens and are not counted)."""
    client = serve()
    ids = client.post("/tokenize", json={"prompt": "One, two, three, four, five."}).json()["tokens"]
    key = ("render_service_tokens_derendered_total", (("endpoint", "/v1/chat/completions/derender"),))
    before = samples(client).get(key, 0)
    state = None
    for part, finish in ((ids[:3], None), (ids[3:], "stop")):
        body = {"stream": True, "stream_state": state, "prompt_token_ids": [1, 2, 3, 4, 5],
                "generate_chunk": {"request_id": "chatcmpl-s", "choices": [
                    {"index": 0, "token_ids": part, "finish_reason": finish}]}}
        r = _post_or_skip(client, "/v1/chat/completions/derender", body)
        assert r.status_code == 200, r.text
        state = r.json()["stream_state"]
    assert samples(client)[key] - before == len(ids)
