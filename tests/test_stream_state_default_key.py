"""The default stream-state key (no ``--stream-state-key``): derived from the configuration
fingerprint, so identically configured replicas accept each other's states out of the box, a
differently configured one refuses them with the configuration error, a configured key is not
interchangeable with it, and the start-up log says which mode is on. Real HTTP, two servers."""

from __future__ import annotations

import logging

from render_service.serving.auth import ensure_stream_state_keys
from render_service.settings import Settings

PATH = "/v1/chat/completions/derender"
PARSERS = {"reasoning_parser": "qwen3", "tool_call_parser": "hermes", "enable_auto_tool_choice": True}
KEY = "old-key-0123456789abcdef"  # the key tests/test_security_stream_state.py serves with
# Qwen3 ids of "Hello there, how are you doing today?" (the embedded model's tokenizer).
IDS = [9707, 1052, 11, 1246, 525, 498, 3730, 3351, 30]


def _body(ids, state):
    body = {"stream": True, "model": "Qwen/Qwen3-0.6B", "stream_state": state,
            "generate_chunk": {"request_id": "chatcmpl-k", "choices": [
                {"index": 0, "token_ids": ids, "finish_reason": None}]}}
    if state is None:
        body.update(chat_request={}, prompt_token_ids=[1, 2, 3])
    return body


def _first(client) -> str:
    r = client.post(PATH, json=_body(IDS[:3], None))
    assert r.status_code == 200, r.text
    return r.json()["stream_state"]


def _replicas(serve):
    """Two distinct servers with the same configuration (``port`` differs only in the fixture's
    cache key; each server binds its own free port and loads its own bundle)."""
    return serve(), serve(port=1)


def test_identical_replicas_accept_each_others_states(serve):
    """A state made on one replica continues on the other, alternating, and it is signed."""
    a, b = _replicas(serve)
    state = _first(a)
    assert state.count(".") == 2  # HEAD.BODY.SIGNATURE: signed, not unsigned
    text = []
    for i, client in enumerate((b, a, b, a, b, a)):
        r = client.post(PATH, json=_body(IDS[3 + i:4 + i], state))
        assert r.status_code == 200, r.text
        state = r.json()["stream_state"]
        text.append(r.json()["chunk"]["choices"][0]["delta"].get("content") or "")
    assert "".join(text) == " how are you doing today?"


def test_other_configuration_is_refused_with_the_configuration_error(serve):
    """Other parser flags → another fingerprint → another derived key; the 400 says why."""
    plain, parsers = serve(), serve(**PARSERS)
    for made_on, used_on in ((plain, parsers), (parsers, plain)):
        r = used_on.post(PATH, json=_body(IDS[3:4], _first(made_on)))
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["type"] == "BadRequestError" and err["param"] == "stream_state"
        assert "another server configuration" in err["message"]


def test_tampered_or_foreign_key_state_is_refused(serve):
    """The derived key still detects a changed body, and a configured key and the derived key do
    not accept each other's states (same configuration: the signature error)."""
    plain, keyed = serve(), serve(stream_state_keys=(KEY,))
    head, body, sig = _first(plain).split(".")
    flipped = body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1]
    for client, state in ((plain, f"{head}.{flipped}.{sig}"), (plain, f"{head}.{body}"),
                          (keyed, f"{head}.{body}.{sig}"), (plain, _first(keyed))):
        r = client.post(PATH, json=_body(IDS[3:4], state))
        assert r.status_code == 400, r.text
        assert r.json()["error"]["message"].startswith("invalid stream_state")


def test_start_up_log_names_the_mode(caplog):
    """The start-up log line says which signing mode is on."""
    with caplog.at_level(logging.INFO, logger="render_service.serving.auth"):
        ensure_stream_state_keys(Settings())
        ensure_stream_state_keys(Settings(stream_state_keys=(KEY,)))
        ensure_stream_state_keys(Settings(allow_unsigned_stream_state=True))
    lines = [r.getMessage() for r in caplog.records]
    assert "derived from the configuration fingerprint" in lines[0]
    assert "1 configured key" in lines[1]
    assert "UNSIGNED" in lines[2]
