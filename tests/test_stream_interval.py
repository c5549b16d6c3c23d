"""``stream_interval`` through render: the request field (vLLM ``ChatCompletionRequest`` /
``CompletionRequest.stream_interval``, ge=1) reaches ``sampling_params.stream_interval``; the
``--stream-interval`` server default applies when the request sets none; a bad value is a 400."""

from __future__ import annotations

CHAT = "/v1/chat/completions/render"
COMPLETION = "/v1/completions/render"
MESSAGES = [{"role": "user", "content": "Hi"}]


def _sp(client, path, **fields):
    body = {"messages": MESSAGES} if path == CHAT else {"prompt": "Hi"}
    r = client.post(path, json={**body, "stream": True, **fields})
    assert r.status_code == 200, r.text
    data = r.json()
    return (data[0] if isinstance(data, list) else data)["sampling_params"]


def test_request_field_passes_through(serve):
    client = serve()
    for path in (CHAT, COMPLETION):
        assert _sp(client, path, stream_interval=4)["stream_interval"] == 4
        assert "stream_interval" not in _sp(client, path)  # unset: the engine's own default


def test_server_default_and_request_override(serve):
    client = serve(stream_interval=16)
    assert _sp(client, CHAT)["stream_interval"] == 16
    assert _sp(client, CHAT, stream_interval=2)["stream_interval"] == 2
    assert _sp(client, COMPLETION)["stream_interval"] == 16


def test_invalid_value_is_a_400(serve):
    client = serve()
    for bad in (0, -1, "x"):
        r = client.post(CHAT, json={"messages": MESSAGES, "stream_interval": bad})
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["code"] == 400 and "stream_interval" in (err["param"] or "")
