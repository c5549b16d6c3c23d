"""The opaque stream_state: round trip, strict validation, configuration binding, HMAC signing."""

from __future__ import annotations

import base64

import orjson
import pytest
from derender_helpers import QWEN3, bundle

from render_service import derender
from render_service.derender.stream_state import decode_state, encode_state
from render_service.errors import InvalidStreamState
from render_service.fingerprint import config_fingerprint
from render_service.protocol.derender import StreamState
from render_service.settings import Settings

FP = "f" * 64


def state(**kw):
    return StreamState(cfg=FP[:24], rid="chatcmpl-1", model="m", **kw)


def test_round_trip_unsigned_and_signed():
    """Encoding then decoding gives the same state, unsigned and signed."""
    s = state(held="ab", pend=[0xE6], parser={"mode": "think", "buf": "<"})
    assert decode_state(encode_state(s), FP) == s
    assert decode_state(encode_state(s, ("k1",)), FP, ("k1",)) == s


def test_key_rotation_accepts_any_configured_key():
    """A state signed with an old key is accepted while that key is still configured."""
    token = encode_state(state(), ("old",))
    assert decode_state(token, FP, ("new", "old")).rid == "chatcmpl-1"


@pytest.mark.parametrize("keys", [("k",), ()])
def test_tampering_is_400(keys):
    """Flipping a payload character is rejected (signature mismatch or invalid body), never 500."""
    token = encode_state(state(held="xyz" * 20), keys)
    head, body, *sig = token.split(".")
    bad = body[:-3] + ("A" if body[-3] != "A" else "B") + body[-2:]
    with pytest.raises(InvalidStreamState):
        decode_state(".".join([head, bad, *sig]), FP, keys)


def test_forged_unsigned_body_rejected_when_keys_configured():
    """When keys are configured an unsigned state (e.g. hand-made) is rejected."""
    body = base64.urlsafe_b64encode(orjson.dumps({"cfg": FP[:24], "done": True})).rstrip(b"=").decode()
    with pytest.raises(InvalidStreamState, match="unsigned"):
        decode_state("1j." + body, FP, ("k",))


@pytest.mark.parametrize(
    "token",
    [
        "",
        "garbage",
        "2j.e30",
        "1j.!!!",
        "1z.AAAA",
        "1j.e30",
        5,
        {"prev_tokens": []},
        "1j." + base64.urlsafe_b64encode(b'{"cfg":"x","zzz":1}').decode(),
    ],
)
def test_malformed_states_are_invalid(token):
    """Malformed text, wrong version, bad base64/zlib, missing or unknown keys, or an upstream
    object-shaped state: all InvalidStreamState."""
    with pytest.raises(InvalidStreamState):
        decode_state(token, FP)


def test_other_configuration_rejected():
    """A state made under another configuration fingerprint is rejected with a clear message."""
    with pytest.raises(InvalidStreamState, match="another server configuration"):
        decode_state(encode_state(state()), "0" * 64)


def test_fingerprint_tracks_parser_settings():
    """The fingerprint changes with parser names and default template kwargs, not with port."""
    b = bundle(QWEN3)
    base = Settings(model=b.root)
    assert config_fingerprint(b, base) == config_fingerprint(b, Settings(model=b.root, port=9))
    assert config_fingerprint(b, base) != config_fingerprint(
        b, Settings(model=b.root, reasoning_parser="qwen3")
    )
    assert config_fingerprint(b, base) != config_fingerprint(
        b, Settings(model=b.root, default_chat_template_kwargs={"enable_thinking": False})
    )


def test_signed_server_rejects_unsigned_state_through_derender():
    """With stream_state_keys set, derender signs its states and rejects an unsigned one."""
    b = bundle(QWEN3)
    signed = Settings(model=b.root, stream_state_keys=("secret",))
    plain = Settings(model=b.root)
    ids = b.tokenizer.encode("hello there", add_special_tokens=False)
    first = {
        "stream": True,
        "generate_chunk": {"request_id": "r", "choices": [{"index": 0, "token_ids": ids[:1]}]},
    }
    token = derender.derender_chat(b, plain, first)["stream_state"]
    nxt = {
        "stream": True,
        "stream_state": token,
        "generate_chunk": {"request_id": "r", "choices": [{"index": 0, "token_ids": ids[1:]}]},
    }
    with pytest.raises(InvalidStreamState):
        derender.derender_chat(b, signed, nxt)
    nxt["stream_state"] = derender.derender_chat(b, signed, first)["stream_state"]
    assert derender.derender_chat(b, signed, nxt)["chunk"]["choices"][0]["delta"]["content"] == " there"


def test_state_of_another_request_is_rejected():
    """A stream_state carried into a chunk of another engine request is a 400 (newcomer finding F9:
    it was silently accepted and mixed two outputs)."""
    b = bundle(QWEN3)
    plain = Settings(model=b.root, stream_state_keys=("secret",))
    ids = b.tokenizer.encode("hello there", add_special_tokens=False)
    first = {
        "stream": True,
        "generate_chunk": {"request_id": "a", "choices": [{"index": 0, "token_ids": ids[:1]}]},
    }
    token = derender.derender_chat(b, plain, first)["stream_state"]
    other = {
        "stream": True,
        "stream_state": token,
        "generate_chunk": {"request_id": "b", "choices": [{"index": 0, "token_ids": ids[1:]}]},
    }
    with pytest.raises(InvalidStreamState, match="belongs to request 'a'"):
        derender.derender_chat(b, plain, other)
    other["generate_chunk"]["request_id"] = "a"
    assert derender.derender_chat(b, plain, other)["chunk"]["choices"][0]["delta"]["content"] == " there"
