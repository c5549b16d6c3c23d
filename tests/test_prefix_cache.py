"""CachedEncoder: piecewise encoding at added-token boundaries is exactly HF's encoding (proven on
random text for every shared model), stays identical across real multi-turn conversations, respects
its memory cap and is safe under threads."""

from __future__ import annotations

import json
import threading

import pytest
from conftest import examples
from fast_tokenizer_support import (
    MODEL_NAMES,
    QWEN3,
    are_recorded_hf_ids,
    chat_requests,
    conversation_turns,
    fast_encoder,
    hf_ids,
    hf_tokenizer,
    prompt_texts,
    reference_ids,
    render_text,
    rendered_turns,
)
from hypothesis import HealthCheck, given, settings

from render_service.tokens import prefix_cache
from render_service.tokens.fast_tokenizer import tokenizer_json
from render_service.tokens.prefix_cache import (
    CachedEncoder,
    HFPieceEncoder,
    build_prompt_encoder,
    entry_bytes,
)

pytestmark = pytest.mark.shared


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_hf_itself_encodes_pieces_independently(name):
    """HF: encode(text) == concatenation of added-token ids and HF encode(piece) for the pieces
    between them. This is the property the piece cache relies on (150 random texts per model)."""
    tok = hf_tokenizer(name)
    pieces = HFPieceEncoder(tok, tok.get_added_vocab())

    @settings(max_examples=examples(150), deadline=None, suppress_health_check=list(HealthCheck))
    @given(prompt_texts(sorted(pieces.added)))
    def check(text):
        ids = []
        for i, part in enumerate(pieces.split_added(text)):
            ids += [pieces.added[part]] if i % 2 else (pieces.encode_piece(part) if part else [])
        assert ids == hf_ids(name, text)

    check()


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_cached_encoder_matches_hf_on_random_text(name):
    """A warm CachedEncoder (small cap, so entries are evicted) keeps giving HF's ids: each random
    text is encoded twice, the second time from cache."""
    cached = CachedEncoder(fast_encoder(name), max_bytes=64 * 1024)

    @settings(max_examples=examples(100), deadline=None, suppress_health_check=list(HealthCheck))
    @given(prompt_texts(sorted(fast_encoder(name).added)))
    def check(text):
        expected = hf_ids(name, text)
        assert cached.encode(text) == expected
        assert cached.encode(text) == expected

    check()
    assert cached.stats.hits > 0 and cached.stats.bytes <= 64 * 1024


def test_real_multi_turn_conversations_stay_identical():
    """Every turn of the 285 real multi-turn conversations, rendered by Qwen3's template and encoded
    through one shared CachedEncoder, equals HF (each conversation's ids by the sha256 digest of HF's
    ids recorded in tests/goldens/prompt_ids.json where it applies, else ``reference_ids``); later
    turns hit the cache."""
    cached = CachedEncoder(fast_encoder(QWEN3))
    turns = 0
    for req in chat_requests():
        if not req["meta"].get("multi_turn"):
            continue
        texts = rendered_turns(QWEN3, req)
        got = [cached.encode(text) for text in texts]
        # HF's ids by their recorded digest; a group not recorded (or not equal) against HF's ids
        if not are_recorded_hf_ids(QWEN3, texts, got):
            assert got == reference_ids(QWEN3, [texts])[0]
        turns += len(texts)
    assert turns > 285
    assert cached.stats.hits > cached.stats.misses


def test_next_turn_encodes_only_new_pieces():
    """Turn k+1 after turn k: every piece of turn k is a hit; only the new messages are misses."""
    req = next(r for r in chat_requests() if len(conversation_turns(r)) >= 3)
    first, second = conversation_turns(req)[-2:]
    cached = CachedEncoder(fast_encoder(QWEN3))
    cached.encode(render_text(QWEN3, first, req.get("tools")))
    misses = cached.stats.misses
    text = render_text(QWEN3, second, req.get("tools"))
    assert cached.encode(text) == hf_ids(QWEN3, text)
    new_messages = len(second) - len(first)
    assert cached.stats.misses - misses <= 2 * new_messages + 2  # new bodies + the generation-prompt tail
    assert cached.stats.hits >= len(first)


def test_huge_piece_is_not_cached_but_encoded_right():
    """A 26k-token tool result over max_entry_bytes is encoded correctly and counted too_large;
    the cache never exceeds its cap."""
    big = " ".join(f"row {i}: value={i * 7 % 1000}" for i in range(5000))
    body = f"<tool_response>\n{big}\n</tool_response>"
    text = f"<|im_start|>user\nhi<|im_end|>\n<|im_start|>user\n{body}<|im_end|>\n"
    cached = CachedEncoder(fast_encoder(QWEN3), max_bytes=256 * 1024)
    assert cached.encode(text) == hf_ids(QWEN3, text)
    assert cached.stats.too_large == 1 and cached.stats.bytes <= 256 * 1024
    assert cached.encode(text) == hf_ids(QWEN3, text)


def test_eviction_keeps_estimated_bytes_under_cap():
    """Filling a small cache evicts oldest entries; bytes equals the sum of live entry estimates."""
    enc = fast_encoder(QWEN3)
    cached = CachedEncoder(enc, max_bytes=20_000)
    for i in range(200):
        cached.encode(f"<|im_start|>user\nmessage number {i} with some words<|im_end|>")
    assert cached.stats.evictions > 0 and cached.stats.bytes <= 20_000
    live = sum(entry_bytes(p, ids) for p, ids in cached._map.items())
    assert live == cached.stats.bytes and cached.stats.entries == len(cached._map)


def test_threads_share_one_cache_safely():
    """Four threads encode real conversations through one small shared cache (forcing concurrent
    inserts and evictions); every result equals HF."""
    reqs = [r for r in chat_requests() if r["meta"].get("multi_turn")][:24]
    groups = [rendered_turns(QWEN3, r, kwargs=False) for r in reqs]
    texts = [t for group in groups for t in group]
    expected = [ids for group in reference_ids(QWEN3, groups) for ids in group]
    cached = CachedEncoder(fast_encoder(QWEN3), max_bytes=200_000)
    errors: list[int] = []

    def work(k: int) -> None:
        for _ in range(3):
            for i in range(k, len(texts), 2):
                if cached.encode(texts[i]) != expected[i]:
                    errors.append(i)

    threads = [threading.Thread(target=work, args=(k % 2,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert cached.stats.bytes <= 200_000


def test_build_prompt_encoder_picks_the_fast_cached_path():
    """For Qwen3 the integration entry point returns a CachedEncoder over the fastest proven encoder
    (fastokens, whose start-up probes pass; else the tiktoken FastEncoder); with the cache disabled
    it returns that encoder itself; both encode like HF."""
    tok = hf_tokenizer(QWEN3)
    enc = build_prompt_encoder(tok)
    assert isinstance(enc, CachedEncoder) and enc.encoder.__class__.__name__ == "FastokensEncoder"
    plain = build_prompt_encoder(tok, max_bytes=0)
    text = "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nÅngström 'LL 1234<|im_end|>"
    assert enc.encode(text) == plain.encode(text) == hf_ids(QWEN3, text)


def test_hf_piece_encoder_cache_matches_hf():
    """The HF fallback (no fast encoder) can be cached too and stays identical to HF."""
    tok = hf_tokenizer(QWEN3)
    cached = CachedEncoder(HFPieceEncoder(tok, tok.get_added_vocab()))
    text = "<|im_start|>user\n<think>x</think> 你好 😀<|im_end|>\n<|im_start|>assistant\n"
    assert cached.encode(text) == cached.encode(text) == hf_ids(QWEN3, text)


def test_background_build_switches_to_fast_without_changing_ids():
    """background=True returns at once an HF-backed cache, swaps in the fast encoder when proven, and
    gives HF's ids before and after the swap (entries cached before it stay valid)."""
    tok = hf_tokenizer(QWEN3)
    text = "<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\nÅngström 'LL 1234 你好<|im_end|>\n"
    # the build is shared per tokenizer (prefix_cache._FASTEST): holding its lock keeps the
    # background thread from swapping before ``before`` is encoded by HF
    with prefix_cache._FASTEST_LOCK:
        enc = build_prompt_encoder(tok, background=True)
        assert isinstance(enc, CachedEncoder) and isinstance(enc.encoder, HFPieceEncoder)
        before = enc.encode(text)
    assert enc.settled.wait(120)
    assert enc.encoder.__class__.__name__ == "FastokensEncoder"
    assert before == enc.encode(text) == enc.encode(text + "more")[: len(before)] == hf_ids(QWEN3, text)


def test_encoders_of_one_tokenizer_share_the_fast_build():
    """Two prompt encoders of one tokenizer object (bundles of one folder under other settings)
    share one fast encoder (built and probed once), each with its own piece cache."""
    tok = hf_tokenizer(QWEN3)
    first, second = build_prompt_encoder(tok), build_prompt_encoder(tok, max_bytes=1024)
    assert isinstance(first, CachedEncoder) and isinstance(second, CachedEncoder)
    assert first.encoder is second.encoder is build_prompt_encoder(tok, max_bytes=0)
    assert first._map is not second._map


def _top_level_member(text: str, key: str):  # type: ignore[no-untyped-def]
    """The value of ``key`` in the JSON object ``text``, parsed with :mod:`json` member by member
    from the start and stopping there: the same value as ``json.loads(text)[key]`` without
    parsing the members after it (a tokenizer.json's vocabulary and merges, ~0.7 CPU-s for
    gpt-oss's 10 MB, come after ``added_tokens``). Raises KeyError if ``key`` is not a member."""
    decoder, ws = json.JSONDecoder(), json.decoder.WHITESPACE  # type: ignore[attr-defined]
    at = ws.match(text, 0).end()
    assert text[at] == "{"
    at += 1
    while True:
        at = ws.match(text, at).end()
        if text[at] == "}":
            raise KeyError(key)
        name, at = decoder.raw_decode(text, at)
        at = ws.match(text, at).end()
        assert text[at] == ":"
        value, at = decoder.raw_decode(text, ws.match(text, at + 1).end())
        if name == key:
            return value
        at = ws.match(text, at).end()
        assert text[at] in ",}"
        if text[at] == "}":
            raise KeyError(key)
        at += 1


def test_top_level_member_is_json_loads_s():
    """:func:`_top_level_member` gives ``json.loads``'s member, first, middle or last, also with
    the key's text inside an earlier value, and a KeyError for a missing one."""
    text = ' { "a" : "\\"added_tokens\\":", "added_tokens": [{"id": 1}, 2] ,"z":{"added_tokens":0}}'
    whole = json.loads(text)
    for key in whole:
        assert _top_level_member(text, key) == whole[key]
    with pytest.raises(KeyError):
        _top_level_member(text, "missing")


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_added_tokens_from_the_backend_are_tokenizer_json_s(name):
    """``_piecewise_ok`` reads the added tokens from the backend's ``get_added_tokens_decoder()``
    instead of serialising and parsing the whole tokenizer.json: the entries (id, content and the
    four flags ``check_added_tokens`` reads) equal the JSON's, in its order, for every model."""
    tok = hf_tokenizer(name)
    fields = ("id", "content", "normalized", "lstrip", "rstrip", "single_word")
    from_json = [{k: t[k] for k in fields} for t in _top_level_member(tokenizer_json(tok), "added_tokens")]
    assert from_json and prefix_cache._added_tokens(tok) == from_json
