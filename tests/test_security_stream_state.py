"""Tampered, foreign and rotated `stream_state` over real HTTP (streaming chat derender).

Covers single-character changes, bit flips, truncation and extension, a body re-signed with a
wrong key, a state made under another configuration (other parser flags), random strings, and
correctly framed states whose fields hold arbitrary values (unsigned server): a 400 in the
upstream shape or a normal answer, never a 5xx.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import zlib

import orjson
import pytest
from conftest import examples, hf_tokenizer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from render_service.settings import EMBEDDED_MODEL_DIR

PATH = "/v1/chat/completions/derender"
OLD, NEW, OTHER = "old-key-0123456789abcdef", "new-key-0123456789abcdef", "other-key-0123456789abcd"


@functools.cache
def _ids() -> list[int]:
    """Output ids of the embedded model (its tokenizer from the test process's model cache, when
    a test first needs them: not a tokenizer of its own loaded at collection by every worker)."""
    tok = hf_tokenizer(str(EMBEDDED_MODEL_DIR))
    return list(tok.encode("Hello there, how are you doing today?", add_special_tokens=False))


def _body(ids, state, finish=None):
    return {"stream": True, "model": "Qwen/Qwen3-0.6B", "stream_state": state,
            "prompt_token_ids": [1, 2, 3],
            "generate_chunk": {"request_id": "chatcmpl-t", "choices": [
                {"index": 0, "token_ids": ids, "finish_reason": finish}]}}


def _first_state(client):
    r = client.post(PATH, json={**_body(_ids()[:3], None), "chat_request": {}})
    assert r.status_code == 200, r.text
    return r.json()["stream_state"]


def _next(client, state):
    return client.post(PATH, json=_body(_ids()[3:6], state))


def _assert_rejected(r):
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    # our own check (BadRequestError) or the wire model's (non-string state: "Bad Request")
    assert err["type"] in ("BadRequestError", "Bad Request") and err["code"] == 400


def test_state_round_trips_on_the_same_keys(serve):
    """A state continues on a server with the same keys (any replica)."""
    client = serve(stream_state_keys=(OLD,))
    assert _next(client, _first_state(client)).status_code == 200


def test_foreign_key_is_rejected(serve):
    """A state signed by a server with another key is refused (400), never used."""
    state = _first_state(serve(stream_state_keys=(OTHER,)))
    _assert_rejected(_next(serve(stream_state_keys=(OLD,)), state))


def test_rotation_accepts_old_key_and_signs_with_new(serve):
    """Keys (NEW, OLD): a state signed with OLD is accepted; states it issues verify on (NEW,)."""
    old_state = _first_state(serve(stream_state_keys=(OLD,)))
    rotated = serve(stream_state_keys=(NEW, OLD))
    r = _next(rotated, old_state)
    assert r.status_code == 200, r.text
    assert _next(serve(stream_state_keys=(NEW,)), r.json()["stream_state"]).status_code == 200


def _mutations(state):
    if isinstance(state, str):
        return st.one_of(
            st.tuples(st.integers(0, len(state) - 1), st.characters(codec="ascii")).map(
                lambda t: state[: t[0]] + t[1] + state[t[0] + 1:]),
            st.integers(0, len(state) - 1).map(lambda i: state[:i]),
            st.text(min_size=1, max_size=8).map(lambda s: state + s),
        )
    text = orjson.dumps(state).decode()
    return st.tuples(st.integers(0, len(text) - 1), st.characters(codec="ascii")).map(
        lambda t: text[: t[0]] + t[1] + text[t[0] + 1:]).map(_maybe_json)


def _maybe_json(text):
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def test_tampered_state_is_rejected_or_harmless(serve):
    """Any single-character change, truncation or extension of a state gets a 400 in the upstream
    shape, never a 5xx; a change that still verifies must decode to the same state (same output)."""
    client = serve(stream_state_keys=(OLD,))
    state = _first_state(client)
    reference = _next(client, state)
    assert reference.status_code == 200

    @settings(max_examples=examples(120), deadline=None, suppress_health_check=list(HealthCheck))
    @given(_mutations(state))
    def check(tampered):
        if tampered == state:
            return
        r = _next(client, tampered)
        assert r.status_code < 500, r.text
        if r.status_code == 200:
            assert r.json()["chunk"]["choices"] == reference.json()["chunk"]["choices"]
        else:
            _assert_rejected(r)

    check()


def test_unsigned_states_only_when_allowed(serve):
    """A server that allows unsigned states issues states a signing server refuses."""
    unsigned = _first_state(serve(allow_unsigned_stream_state=True))
    _assert_rejected(_next(serve(stream_state_keys=(OLD,)), unsigned))


def test_a_cut_state_says_it_is_incomplete_not_unsigned(serve):
    """A signed state cut anywhere (its signature lost with the cut, or cut inside it) is a 400
    saying the state is incomplete; only a whole unsigned body reads as "unsigned"."""
    client = serve(stream_state_keys=(OLD,))
    state = _first_state(client)
    head_body = state.rsplit(".", 1)[0]
    for cut in (4, 10, 50, 100, len(head_body) - 1, len(state) - 5, len(state) - 1):
        error = _next(client, state[:cut]).json()["error"]
        assert error["param"] == "stream_state" and "incomplete" in error["message"], (cut, error)
    error = _next(client, _first_state(serve(allow_unsigned_stream_state=True))).json()["error"]
    assert "unsigned, but this server requires signed states" in error["message"]


# --- deeper tampering: bit flips, re-signing, other configurations, forged bodies -------------

PARSERS = {"reasoning_parser": "qwen3", "tool_call_parser": "hermes", "enable_auto_tool_choice": True}
THINKING = ("<think>Let me think about it.</think>Sure: "
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _payload(state: str) -> dict:
    """The JSON body of a state string (format version 1, either flag)."""
    head, body = state.split(".")[:2]
    raw = _unb64(body)
    return orjson.loads(zlib.decompress(raw) if head[1] == "z" else raw)


def _forge(payload: object, key: str | None) -> str:
    """A version-1 state string with ``payload`` as its body, signed with ``key`` when given."""
    message = f"1j.{_b64(orjson.dumps(payload))}"
    if key is None:
        return message
    sig = hmac.new(key.encode(), message.encode(), hashlib.sha256).digest()[:16]
    return f"{message}.{_b64(sig)}"


def _parser_state(client) -> str:
    """A state from the parsers server taken inside an open tool call (parser state non-trivial)."""
    ids = hf_tokenizer(str(EMBEDDED_MODEL_DIR)).encode(THINKING, add_special_tokens=False)
    r = client.post(PATH, json={**_body(ids, None), "chat_request": {
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}})
    assert r.status_code == 200, r.text
    return r.json()["stream_state"]


def test_state_from_another_configuration_is_rejected_clearly(serve):
    """Same signing key, different parser flags: the state verifies but is refused with a 400 that
    says it was made under another configuration (both directions)."""
    plain = serve(stream_state_keys=(OLD,))
    parsers = serve(stream_state_keys=(OLD,), **PARSERS)
    for made_on, used_on in ((plain, parsers), (parsers, plain)):
        r = _next(used_on, _first_state(made_on))
        _assert_rejected(r)
        assert "another server configuration" in r.json()["error"]["message"]


def test_state_resigned_with_a_wrong_key_is_rejected(serve):
    """The state's own body re-signed with a key the server does not hold: 400, signature error."""
    client = serve(stream_state_keys=(OLD,))
    forged = _forge(_payload(_first_state(client)), OTHER)
    r = _next(client, forged)
    _assert_rejected(r)
    assert "signature" in r.json()["error"]["message"]
    assert _next(client, _forge(_payload(_first_state(client)), OLD)).status_code == 200


@pytest.mark.parametrize("config", [{}, PARSERS], ids=["plain", "parsers"])
def test_bit_flips_never_5xx(serve, config):
    """Every single-bit flip anywhere in the state string (signed server): a 400, never a 5xx."""
    client = serve(stream_state_keys=(OLD,), **config)
    state = (_parser_state if config else _first_state)(client)
    raw = state.encode()
    for i in range(0, len(raw), max(1, len(raw) // 40)):
        for bit in (0, 3, 7):
            flipped = bytearray(raw)
            flipped[i] ^= 1 << bit
            text = flipped.decode("latin-1")
            if text == state:
                continue
            r = _next(client, text)
            assert r.status_code < 500, (i, bit, r.text)
            _assert_rejected(r)


def test_random_strings_never_5xx(serve):
    """Random text and random state-shaped strings (right version/flag, random body and
    signature) are refused with a 400."""
    client = serve(stream_state_keys=(OLD,))
    b64 = st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", max_size=60)
    shaped = st.tuples(st.sampled_from(["1j", "1z", "2j", "1x"]), b64, b64).map(".".join)

    @settings(max_examples=examples(150), deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.one_of(st.text(max_size=80), shaped, st.integers(), st.lists(st.integers(), max_size=3)))
    def check(value):
        r = _next(client, value)
        assert r.status_code < 500, r.text
        _assert_rejected(r)

    check()


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)


def _rewrites(payload: dict):
    """A payload with one key set to a random JSON value, removed, or one nested key rewritten."""
    keys = sorted(payload) + ["win", "pre", "rd", "pend", "held", "lp_ctx", "ntok", "calls", "parser"]
    top = st.tuples(st.sampled_from(keys), JSON_VALUES).map(lambda kv: {**payload, kv[0]: kv[1]})
    drop = st.sampled_from(sorted(payload)).map(lambda k: {x: v for x, v in payload.items() if x != k})
    parser = payload.get("parser")
    if not isinstance(parser, dict) or not parser:
        return st.one_of(top, drop)
    nested = st.tuples(st.sampled_from(sorted(parser)), JSON_VALUES).map(
        lambda kv: {**payload, "parser": {**parser, kv[0]: kv[1]}})
    return st.one_of(top, drop, nested)


@pytest.mark.parametrize("config", [{}, PARSERS], ids=["plain", "parsers"])
def test_forged_state_bodies_never_5xx(serve, config):
    """A server that accepts unsigned states (or a leaked key) gets correctly framed states whose
    fields hold arbitrary JSON values: each is refused with a 400 or used (200), never a 5xx."""
    client = serve(allow_unsigned_stream_state=True, **config)
    payload = _payload((_parser_state if config else _first_state)(client))

    @settings(max_examples=examples(150), deadline=None, suppress_health_check=list(HealthCheck))
    @given(_rewrites(payload))
    def check(forged):
        r = _next(client, _forge(forged, None))
        assert r.status_code < 500, (forged, r.text)
        if r.status_code != 200:
            _assert_rejected(r)

    check()


def test_forged_parser_state_is_a_400_not_a_500(serve):
    """Regression (found by the fuzz above): an unsigned state whose parser state is null or a
    dict missing its phases crashed the parser (TypeError → 500); it is a 400 naming the state."""
    client = serve(allow_unsigned_stream_state=True, **PARSERS)
    payload = _payload(_parser_state(client))
    for parser in (None, {}, {"v": 1, "r": 5}):
        r = _next(client, _forge({**payload, "parser": parser}, None))
        _assert_rejected(r)
        assert "stream_state" in r.json()["error"]["message"]
