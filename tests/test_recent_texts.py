"""RecentTexts (prefix_cache): reusing the ids of a recent text's head up to an added token gives
exactly the ids of encoding the whole text, for texts that share heads of every length (random
text over the real added tokens, and real conversations with their last message changed or a
turn added); the head's pieces count as cache hits; tables where a token contains another one
turn the reuse off."""

from __future__ import annotations

import os

import pytest
from conftest import examples
from fast_tokenizer_support import QWEN3, chat_requests, fast_encoder, prompt_texts, render_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from render_service.tokens.prefix_cache import (
    CachedEncoder,
    common_prefix_length,
    prefix_reuse_ok,
)

pytestmark = pytest.mark.shared


@settings(max_examples=examples(300), deadline=None)
@given(st.text(alphabet="ab<|>é\n", max_size=40), st.text(alphabet="ab<|>é\n", max_size=40),
       st.integers(min_value=0, max_value=40))
def test_common_prefix_length(a, tail, cut):
    b = a[:cut] + tail
    assert common_prefix_length(a, b, block=4) == len(os.path.commonprefix([a, b]))
    assert common_prefix_length(a, b) == len(os.path.commonprefix([a, b]))


def test_reused_heads_give_the_whole_texts_ids():
    enc = fast_encoder(QWEN3)
    reuse, plain = CachedEncoder(enc), CachedEncoder(enc, recent_texts=0)
    tokens = sorted(enc.added)

    @settings(max_examples=examples(50), deadline=None, suppress_health_check=list(HealthCheck))
    @given(prompt_texts(tokens), st.lists(st.tuples(st.floats(0, 1), prompt_texts(tokens)), max_size=3))
    def check(text, variants):
        assert reuse.encode(text) == enc.encode(text)
        for share, tail in variants:  # heads of every length, cut anywhere (mid-token too)
            other = text[: int(share * len(text))] + tail
            assert reuse.encode(other) == plain.encode(other) == enc.encode(other)

    check()


def test_conversations_reuse_their_heads_and_count_them_as_hits():
    enc = fast_encoder(QWEN3)
    cached = CachedEncoder(enc)
    request = next(r for r in chat_requests() if len(r["messages"]) >= 6 and r["meta"].get("multi_turn"))
    messages, tools = request["messages"], request.get("tools")
    texts = [render_text(QWEN3, messages[:k], tools) for k in range(2, len(messages) + 1)]
    last = messages[-1]
    texts += [render_text(QWEN3, [*messages[:-1], dict(last, content=f"{i} {last.get('content')}")], tools)
              for i in range(3)]
    for text in texts:
        hits = cached.stats.hits
        assert cached.encode(text) == enc.encode(text)
        assert cached.stats.hits > hits or text is texts[0]
    assert cached._recent is not None and cached._recent.usable
    assert cached._recent.head(texts[-1])[0] > len(texts[-1]) // 2  # the head was found


def test_a_token_inside_another_turns_reuse_off():
    assert prefix_reuse_ok({"<a>": 1, "<b>": 2})
    assert not prefix_reuse_ok({"<a>": 1, "<a>x": 2})
    assert not prefix_reuse_ok({"<a>": 1, "x<a>y": 2})
