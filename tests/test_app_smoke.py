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
