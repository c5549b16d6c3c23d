"""The app starts on the embedded model and answers its utility routes over real HTTP."""


def test_health_and_models(serve):
    """/health is 200 and /v1/models lists the embedded Qwen3 under its served name."""
    client = serve()
    assert client.get("/health").status_code == 200
    data = client.get("/v1/models").json()["data"]
    assert [card["id"] for card in data] == ["Qwen/Qwen3-0.6B"]
    assert data[0]["max_model_len"] == 40960


def test_bad_json_is_upstream_400(serve):
    """A body that is not JSON gets a 400 in the upstream error shape, never a 500."""
    client = serve()
    r = client.post("/v1/chat/completions/render", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["code"] == 400


def test_wrong_media_type_and_schema_errors_have_upstream_type_and_param(serve):
    """As vLLM 0.33: a non-JSON content type is type "Bad Request" with the "1 validation error"
    message, and a schema error's param is the dotted path from "body"."""
    client = serve()
    r = client.post("/v1/chat/completions/render", content=b"x", headers={"content-type": "text/plain"})
    err = r.json()["error"]
    assert r.status_code == 400 and err["type"] == "Bad Request"
    assert err["message"].startswith("1 validation error:\n  Unsupported Media Type")
    r = client.post("/v1/chat/completions/render", json={"model": "Qwen/Qwen3-0.6B", "messages": "hi"})
    err = r.json()["error"]
    assert r.status_code == 400 and err["type"] == "Bad Request" and err["param"].startswith("body.messages")
