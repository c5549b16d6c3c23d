"""API keys on /v1* and /inference* (401, upstream shape), open utility routes, the stream-state
key policy and how keys reach Settings (flags, env, key file)."""

from __future__ import annotations

import pytest

from render_service.derender.pipeline import state_keys
from render_service.fingerprint import fingerprint_key
from render_service.serving.auth import ensure_stream_state_keys
from render_service.serving.cli import build_parser, settings_from_args
from render_service.settings import Settings

KEYS = ("first-key-0123456789", "second-key-0123456789")


def test_guarded_paths_need_a_bearer_key(serve):
    """Without or with a wrong key, /v1 routes answer 401 AuthenticationError in the upstream shape."""
    client = serve(api_keys=KEYS)
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": f"Basic {KEYS[0]}"}):
        for method, path in (("GET", "/v1/models"), ("POST", "/v1/chat/completions/render"),
                             ("POST", "/v1/completions/derender"), ("GET", "/inference/v1/generate")):
            r = client.request(method, path, headers=headers, json={})
            assert r.status_code == 401, (method, path, headers)
            err = r.json()["error"]
            assert err["type"] == "AuthenticationError" and err["code"] == 401 and err["param"] is None


def test_any_configured_key_is_accepted(serve):
    """Every configured key (rotation) opens the guarded routes; the scheme is case-insensitive."""
    client = serve(api_keys=KEYS)
    for value in (f"Bearer {KEYS[0]}", f"bearer {KEYS[1]}"):
        assert client.get("/v1/models", headers={"Authorization": value}).status_code == 200


def test_utility_routes_stay_open(serve):
    """/health, /ready, /metrics and /tokenize need no key (as upstream); OPTIONS is never guarded."""
    client = serve(api_keys=KEYS)
    assert client.get("/health").status_code == 200
    assert client.get("/ready").status_code == 200
    assert client.get("/metrics").status_code == 200
    assert client.post("/tokenize", json={"prompt": "hi"}).status_code != 401
    assert client.options("/v1/models").status_code != 401


def test_no_keys_means_no_auth(serve):
    """Without --api-key the guarded routes are open."""
    assert serve().get("/v1/models").status_code == 200


def test_unsigned_stream_state_only_by_explicit_choice():
    """No key configured → states are signed with the key derived from the configuration
    fingerprint (never unsigned by default; the same for the same fingerprint, another for another);
    --allow-unsigned-stream-state → no key; configured keys are kept in order and win."""
    fp, other = "a" * 64, "b" * 64
    derived = state_keys(Settings(), fp)
    assert derived == (fingerprint_key(fp),) and len(derived[0]) == 64
    assert state_keys(Settings(), fp) == derived and state_keys(Settings(), other) != derived
    assert state_keys(Settings(allow_unsigned_stream_state=True), fp) == ()
    assert state_keys(Settings(stream_state_keys=KEYS), fp) == KEYS
    for s in (Settings(), Settings(allow_unsigned_stream_state=True), Settings(stream_state_keys=KEYS)):
        assert ensure_stream_state_keys(s) is s  # it only logs the mode


def _settings(argv, monkeypatch, env=None):
    for name in ("RENDER_SERVICE_API_KEY", "VLLM_API_KEY", "RENDER_SERVICE_STREAM_STATE_KEYS",
                 "RENDER_SERVICE_STREAM_STATE_KEY", "RENDER_SERVICE_MAX_N"):
        monkeypatch.delenv(name, raising=False)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    return settings_from_args(build_parser().parse_args(["serve", *argv]))


def test_keys_from_flags_env_and_file(monkeypatch, tmp_path):
    """--api-key / --stream-state-key repeat; env vars (comma-separated) and a key file (one per
    line, comments ignored) feed the same Settings fields, de-duplicated in order."""
    s = _settings(["--api-key", "a" * 20, "--stream-state-key", KEYS[0], "--stream-state-key", KEYS[1]],
                  monkeypatch)
    assert s.api_keys == ("a" * 20,) and s.stream_state_keys == KEYS
    s = _settings([], monkeypatch, {"VLLM_API_KEY": "v" * 20,
                                    "RENDER_SERVICE_STREAM_STATE_KEYS": f"{KEYS[1]}, {KEYS[0]}"})
    assert s.api_keys == ("v" * 20,) and s.stream_state_keys == (KEYS[1], KEYS[0])
    s = _settings([], monkeypatch, {"RENDER_SERVICE_API_KEY": "r" * 20, "VLLM_API_KEY": "v" * 20})
    assert s.api_keys == ("r" * 20,)
    key_file = tmp_path / "keys"
    key_file.write_text(f"# rotated 2026-11\n{KEYS[0]}\n\n{KEYS[1]}\n")
    s = _settings(["--stream-state-key-file", str(key_file), "--stream-state-key", KEYS[1]], monkeypatch)
    assert s.stream_state_keys == (KEYS[1], KEYS[0])


def test_short_stream_state_key_is_refused(monkeypatch):
    """A stream-state key under 16 characters stops start-up with a clear message."""
    with pytest.raises(SystemExit, match="at least 16"):
        _settings(["--stream-state-key", "short"], monkeypatch)


def test_env_sets_any_flag_and_command_line_wins(monkeypatch):
    """RENDER_SERVICE_<FLAG> sets a flag's default (ints and booleans parsed); the flag overrides."""
    s = _settings([], monkeypatch, {"RENDER_SERVICE_MAX_N": "7",
                                    "RENDER_SERVICE_ALLOW_UNSIGNED_STREAM_STATE": "true"})
    assert s.max_n == 7 and s.allow_unsigned_stream_state is True
    s = _settings(["--max-n", "9"], monkeypatch, {"RENDER_SERVICE_MAX_N": "7"})
    assert s.max_n == 9


def test_x_api_key_opens_the_anthropic_paths_only(serve):
    """``x-api-key: <key>`` (the header Anthropic's API and the ``anthropic`` SDK use) opens
    ``/v1/messages*`` (the render lane leaves such a request to the full app, whose middleware
    reads the header; a later stream chunk too); elsewhere only
    ``Authorization: Bearer`` does, as vLLM 0.33 (which reads no other header anywhere)."""
    client = serve(api_keys=KEYS)
    body = {"model": "Qwen/Qwen3-0.6B", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    assert client.post("/v1/messages/render", json=body, headers={"x-api-key": KEYS[1]}).status_code == 200
    assert client.post("/v1/messages/render", json=body, headers={"x-api-key": "nope"}).status_code == 401
    chunk = {"request_id": "r", "choices": [{"index": 0, "token_ids": [9707]}]}
    first = client.post("/v1/messages/derender", headers={"x-api-key": KEYS[0]}, json={
        "stream": True, "messages_request": body, "generate_chunk": chunk})
    assert first.status_code == 200, first.text
    later = client.post("/v1/messages/derender", headers={"x-api-key": KEYS[0]}, json={
        "stream": True, "stream_state": first.json()["stream_state"], "generate_chunk": chunk})
    assert later.status_code == 200, later.text
    chat = {"messages": body["messages"]}
    refused = client.post("/v1/chat/completions/render", json=chat, headers={"x-api-key": KEYS[0]})
    assert refused.status_code == 401
    assert client.get("/v1/models", headers={"x-api-key": KEYS[0]}).status_code == 401
