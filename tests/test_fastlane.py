"""The fast lane for later streaming chunks keeps the full stack's contracts: the same answer,
``X-Request-Id`` (given or generated) and fingerprint headers, request and token metrics, API-key
refusal, and the full stack's 400 shapes for a bad state or a body over the limits."""

from __future__ import annotations

from test_stream_state_default_key import IDS, PATH, _body, _first

KEY = "api-key-0123456789abcdef"


def _metric(client, name: str, label: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(name) and label in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_later_chunk_headers_metrics_and_answer(serve):
    client = serve()
    state = _first(client)
    before = _metric(client, "render_service_requests_total", 'endpoint="/v1/chat/completions/derender"')
    tokens = _metric(client, "render_service_tokens_derendered_total", "/v1/chat/completions/derender")
    r = client.post(PATH, json=_body(IDS[3:5], state), headers={"X-Request-Id": "given-id-1"})
    assert r.status_code == 200, r.text
    assert r.headers["x-request-id"] == "given-id-1"
    assert r.headers["x-render-config-fingerprint"] == client.get("/ready").json()["config_fingerprint"]
    assert r.headers["content-type"] == "application/json"
    out = r.json()
    assert out["chunk"]["choices"][0]["delta"]["content"] == " how are"
    assert out["stream_state"].count(".") == 2 and out["stop_generation"] is False
    generated = client.post(PATH, json=_body(IDS[5:6], out["stream_state"])).headers["x-request-id"]
    assert len(generated) == 32 and generated != client.post(
        PATH, json=_body(IDS[5:6], out["stream_state"])).headers["x-request-id"]
    after = _metric(client, "render_service_requests_total", 'endpoint="/v1/chat/completions/derender"')
    assert after - before == 3
    assert _metric(client, "render_service_tokens_derendered_total", "/v1/chat/completions/derender") > tokens


def test_later_chunk_errors_keep_their_shapes(serve):
    client = serve()
    state = _first(client)
    head, body, sig = state.split(".")
    r = client.post(PATH, json=_body(IDS[3:4], f"{head}.{body}.{'A' * len(sig)}"))
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("invalid stream_state")
    r = client.post(PATH, content=b'{"stream": true, "stream_state": "x", ',
                    headers={"content-type": "application/json"})
    assert r.status_code == 400 and "JSON decode error" in r.json()["error"]["message"]
    bad = _body(IDS[3:4], state)
    bad["generate_chunk"]["choices"][0]["token_ids"] = ["x"]
    r = client.post(PATH, json=bad)
    assert r.status_code == 400 and r.json()["error"]["type"] in ("Bad Request", "BadRequestError")


def test_later_chunk_needs_the_api_key(serve):
    client = serve(api_keys=(KEY,))
    auth = {"Authorization": f"Bearer {KEY}"}
    r = client.post(PATH, json=_body(IDS[:3], None), headers=auth)
    assert r.status_code == 200, r.text
    later = _body(IDS[3:4], r.json()["stream_state"])
    r = client.post(PATH, json=later)
    assert r.status_code == 401 and r.json()["error"]["type"] == "AuthenticationError"
    assert client.post(PATH, json=later, headers=auth).status_code == 200


def test_later_chunk_over_the_body_limit_is_413(serve):
    client = serve(max_request_body_bytes=2048)
    state = _first(client)
    big = _body(IDS[3:4], state)
    big["generate_chunk"]["pad"] = "x" * 4096
    r = client.post(PATH, json=big)
    assert r.status_code == 413 and r.json()["error"]["type"] == "PayloadTooLargeError"
