"""The later-chunk hot path's state handling: HMAC from precomputed pads, the direct
exclude-defaults dump, and the cache of states this process handed out (a chained stream
resumed from the cache answers exactly as one decoded from its text every time)."""

from __future__ import annotations

import hmac

import orjson
from conftest import model_dir, shared_bundle
from derender_helpers import QWEN3
from hypothesis import given, settings
from hypothesis import strategies as st

from render_service import derender
from render_service.derender.pipeline import pipeline_for
from render_service.derender.stream_state import (
    StateCache,
    decode_state,
    encode_state,
    hmac_sha256,
    state_body,
)
from render_service.protocol.derender import StreamState
from render_service.settings import Settings

FP = "f" * 64


@settings(max_examples=60, deadline=None)
@given(key=st.text(max_size=100), message=st.binary(max_size=300))
def test_hmac_from_pads_equals_the_standard_hmac(key, message):
    """Same bytes as the standard library's HMAC-SHA256, keys shorter and longer than a block."""
    assert hmac_sha256(key, message) == hmac.digest(key.encode("utf-8"), message, "sha256")


INT64 = st.integers(-(2**63), 2**63 - 1)
states = st.builds(
    StreamState,
    cfg=st.just(FP[:24]),
    rid=st.text(max_size=8),
    ci=st.none() | st.integers(0, 3),
    role=st.booleans(),
    pend=st.lists(st.integers(0, 255), max_size=3),
    held=st.text(max_size=4),
    stops=st.lists(st.text(max_size=3), max_size=2),
    lp_k=st.integers(-1, 5),
    ptoks=st.none() | st.integers(0, 9),
    parser=st.none() | st.dictionaries(st.text(max_size=3), INT64 | st.text(max_size=3), max_size=3),
    items=st.lists(st.lists(st.text(max_size=3), max_size=3), max_size=2),
)


@settings(max_examples=80, deadline=None)
@given(s=states)
def test_state_body_is_model_dump_without_defaults(s):
    """The direct dump equals pydantic's ``exclude_defaults`` dump up to fields equal to their
    default (which decoding restores), and every state round-trips through its encoding."""
    dumped = s.model_dump(exclude_defaults=True)
    body = state_body(s)
    assert {k: v for k, v in dumped.items() if k in body} == body
    defaults = StreamState(cfg=FP[:24]).model_dump()
    assert all(defaults[k] == v for k, v in dumped.items() if k not in body)
    assert decode_state(encode_state(s, ("k",)), FP, ("k",)) == s


def test_cache_hands_a_state_out_once_and_stays_bounded():
    """A stored state is taken once (then the text decodes as before); the oldest are dropped."""
    cache = StateCache(max_entries=2, max_chars=50)
    a, b, c = (StreamState(cfg=FP[:24], rid=r) for r in "abc")
    cache.put("ta", a)
    cache.put("tb", b)
    cache.put("tc", c)
    assert cache.take("ta") is None  # dropped: over max_entries
    assert cache.take("tb") is b
    assert cache.take("tb") is None  # taken: the caller owns it now
    cache.put("x" * 51, a)  # too long to keep
    assert cache.take("x" * 51) is None
    assert cache.take(None) is None and len(cache) == 1


def _stream(b, s, ids, prompt, request, forget: bool):
    pipe = pipeline_for(b, s)
    first = {"stream": True, "chat_request": request, "prompt_token_ids": prompt,
             "generate_chunk": {"request_id": "r-1", "choices": [{"index": 0, "token_ids": ids[:3]}]}}
    out = derender.derender_chat(b, s, first)
    answers = [out]
    for i, tok in enumerate(ids[3:]):
        if forget:  # as if another replica answered the previous chunk
            while pipe.states.take(out["stream_state"]) is not None:
                pass
        else:
            assert out["stream_state"] in pipe.states  # what the next call finds
        finish = "stop" if i == len(ids) - 4 else None
        body = {"stream": True, "stream_state": out["stream_state"],
                "generate_chunk": {"request_id": "r-1",
                                   "choices": [{"index": 0, "token_ids": [tok], "finish_reason": finish}]}}
        out = derender.derender_chat(b, s, orjson.loads(orjson.dumps(body)))
        answers.append(out)
    return answers


def test_a_stream_resumed_from_the_cache_equals_one_decoded_every_time():
    """Reasoning, text and a tool call, one token per chunk: the chunks and states are the same
    whether each chunk's state came from this process's cache or was decoded from its text."""
    s = Settings(model=model_dir(QWEN3), reasoning_parser="qwen3", tool_call_parser="hermes",
                 enable_auto_tool_choice=True)
    b = shared_bundle(s)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    request = {"messages": [{"role": "user", "content": "hi"}], "tools": tools}
    text = '<think>\nmull it</think>\n\nOk. <tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>'
    ids = b.tokenizer.encode(text, add_special_tokens=False) + [b.tokenizer.eos_token_id]
    prompt = b.tokenizer.encode("<|im_start|>user\nhi<|im_end|>\n", add_special_tokens=False)
    cached = _stream(b, s, ids, prompt, request, forget=False)
    decoded = _stream(b, s, ids, prompt, request, forget=True)
    assert cached == decoded
    assert any(c["chunk"]["choices"] and c["chunk"]["choices"][0]["delta"].get("tool_calls") for c in cached)
    assert cached[-1]["chunk"]["choices"][0]["finish_reason"] == "tool_calls"
