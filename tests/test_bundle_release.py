"""A dropped bundle is freed: nothing the product builds from a bundle (parser, derender pipeline,
detokenizer table, multimodal state, Messages template probes) keeps it or its tokenizer alive
once the server that used it has stopped (they are owned by the bundle:
``render_service.models.BundleMemo``). The test process relies on this to hold a bounded number
of models (tests/conftest.py ``MAX_MODELS``)."""

from __future__ import annotations

import gc
import weakref

import pytest
from conftest import _Server, model_dir

from render_service.models import load_bundle
from render_service.settings import Settings

QWEN3 = "Qwen--Qwen3-0.6B"


def _use_every_route(client) -> None:  # type: ignore[no-untyped-def]
    """One request of each kind that builds something from the bundle; each must succeed."""
    chat = {"model": "m", "messages": [{"role": "system", "content": "Be brief."},
                                       {"role": "user", "content": "Hi"}]}
    prompt = client.post("/v1/chat/completions/render", json=chat)
    assert prompt.status_code == 200, prompt.text
    ids = [151667, 9707, 151668, 271, 13048, 0]  # <think> Hello </think> \n\n Hi!
    batch = client.post("/v1/chat/completions/derender", json={
        "chat_request": chat, "generate_response": {"request_id": "r", "choices": [
            {"index": 0, "token_ids": ids, "finish_reason": "stop"}]}})
    assert batch.status_code == 200, batch.text
    assert batch.json()["choices"][0]["message"]["reasoning"] == "Hello"
    first = client.post("/v1/chat/completions/derender", json={
        "stream": True, "chat_request": chat,
        "generate_chunk": {"request_id": "r", "choices": [{"index": 0, "token_ids": ids[:2]}]}})
    assert first.status_code == 200, first.text
    messages = {"model": "m", "max_tokens": 16, "system": "Be brief.", "thinking": {"type": "disabled"},
                "messages": [{"role": "user", "content": "Hi"}]}
    rendered = client.post("/v1/messages/render", json=messages)
    assert rendered.status_code == 200, rendered.text
    answer = client.post("/v1/messages/derender", json={
        "messages_request": messages, "prompt_token_ids": rendered.json()["token_ids"],
        "generate_response": {"request_id": "msg", "choices": [
            {"index": 0, "token_ids": ids[3:], "finish_reason": "stop"}]}})
    assert answer.status_code == 200, answer.text
    responses = client.post("/v1/responses/render", json={"model": "m", "input": "Hi"})
    assert responses.status_code == 200, responses.text
    completion = client.post("/v1/completions/render", json={"model": "m", "prompt": "Hi"})
    assert completion.status_code == 200, completion.text


@pytest.mark.shared
def test_a_stopped_servers_bundle_and_tokenizer_are_freed():
    """Serve a bundle loaded for this test alone (its own tokenizer), use every route, stop the
    server: the bundle and its tokenizer are garbage once the test drops them."""
    settings = Settings(model=model_dir(QWEN3), served_model_name=("m",), reasoning_parser="qwen3",
                        tool_call_parser="hermes", enable_auto_tool_choice=True, host="127.0.0.1")
    bundle = load_bundle(settings)
    bundle.prompt_encoder.settled.wait(120)  # the fast-encoder build thread holds the tokenizer
    server = _Server(settings, bundle)
    try:
        _use_every_route(server.client)
    finally:
        server.stop()
    assert bundle.memo.get("parser", settings, lambda: None) is not None  # built while serving
    freed = [weakref.ref(bundle), weakref.ref(bundle.tokenizer)]
    del bundle, server
    gc.collect()
    assert [ref() is None for ref in freed] == [True, True]
