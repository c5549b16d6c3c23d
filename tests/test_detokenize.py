"""Incremental detokenizer laws on every real tokenizer in ../shared/models, plus bug cases."""

from __future__ import annotations

import codecs

import pytest
from conftest import examples
from derender_helpers import MODEL_NAMES, QWEN3, bundle, byte_token_ids, cuts, split, stream_body, texts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from render_service.derender import detokenize
from render_service.derender.detokenize import DetokState, detokenizer_for

FFFD = "\ufffd"
SETTINGS = settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def stream(detok, ids, sizes, drop=frozenset()):
    """Feed ``ids`` chunk by chunk; return the list of deltas (flush last) and the max pending."""
    state, deltas, widest = DetokState(), [], 0
    for chunk in split(ids, sizes):
        text, state = detokenize.step(detok, state, chunk, drop)
        deltas.append(text)
        widest = max(widest, len(state.pending), len(state.window))
    text, state = detokenize.flush(detok, state)
    deltas.append(text)
    return deltas, widest


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_model_uses_the_byte_table(name):
    """All shared tokenizers are byte-level BPE, so each gets the exact byte table."""
    assert detokenizer_for(bundle(name).tokenizer).token_bytes is not None


@pytest.mark.parametrize("name", MODEL_NAMES)
@SETTINGS
@given(text=texts, sizes=cuts, skip=st.booleans())
def test_text_chunking_law(name, text, sizes, skip):
    """For random unicode text, any chunking of its ids joins to ``tokenizer.decode`` (with and
    without skipping special tokens) and no delta holds U+FFFD unless the whole decode does."""
    b = bundle(name)
    tok = b.tokenizer
    ids = tok.encode(text, add_special_tokens=False) + [i for i in sorted(b.special_token_ids)[:2]]
    drop = b.special_token_ids if skip else frozenset()
    deltas, widest = stream(detokenizer_for(tok), ids, sizes, drop)
    whole = tok.decode(ids, skip_special_tokens=skip)
    assert "".join(deltas) == whole
    assert widest <= detokenize.MAX_HELD_BYTES
    if FFFD not in whole:
        assert not any(FFFD in d for d in deltas)


@pytest.mark.parametrize("name", MODEL_NAMES)
@SETTINGS
@given(data=st.data(), sizes=cuts, skip=st.booleans())
def test_random_ids_chunking_law(name, data, sizes, skip):
    """For random id sequences (invalid UTF-8 included), any chunking joins to the whole decode:
    U+FFFD appears exactly where ``tokenizer.decode`` puts it."""
    b = bundle(name)
    ids = data.draw(st.lists(st.integers(0, len(b.tokenizer) - 1), max_size=30))
    drop = b.special_token_ids if skip else frozenset()
    detok = detokenizer_for(b.tokenizer)
    deltas, _ = stream(detok, ids, sizes, drop)
    joined = "".join(deltas)
    whole = b.tokenizer.decode(ids, skip_special_tokens=skip)
    # a character left incomplete at the end is dropped with the text held for it (as vLLM)
    assert whole.startswith(joined)
    assert joined == "".join(stream(detok, ids, [len(ids)], drop)[0])
    if not ends_incomplete(detok, ids, drop):
        assert joined == whole


def ends_incomplete(detok, ids, drop):
    """Whether the kept ids' bytes end inside a UTF-8 sequence (a whole decode then ends in one
    U+FFFD, which derender drops as vLLM does)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    decoder.decode(b"".join(detok.bytes_of(i) for i in ids if i not in drop), final=False)
    return bool(decoder.getstate()[0])


def test_partial_character_at_the_end_is_dropped():
    """An output cut inside a character (``finish_reason: "length"``) ends before it, with no
    U+FFFD, batch and at every chunking (vLLM 0.33 never emits text ending in U+FFFD; golden in
    tests/data/vllm_derender_golden.json)."""
    tok = bundle(QWEN3).tokenizer
    ids = tok.encode("Hi 😶‍🌫️ there", add_special_tokens=False)  # " 😶" splits as " \xf0\x9f"...
    cut = next(ids[:k] for k in range(1, len(ids)) if tok.decode(ids[:k]).endswith(FFFD))
    for sizes in ([1] * len(cut), [len(cut)], [2, 5]):
        deltas, _ = stream(detokenizer_for(tok), cut, sizes)
        assert "".join(deltas) == "Hi" and FFFD not in "".join(deltas)


@SETTINGS
@given(text=texts, sizes=cuts)
def test_window_fallback_law(text, sizes):
    """The window strategy (for tokenizers that are not byte-level) also joins to the whole
    decode for valid text, and its window stays bounded."""
    tok = bundle(QWEN3).tokenizer
    ids = tok.encode(text, add_special_tokens=False)
    deltas, widest = stream(detokenizer_for(tok, force_window=True), ids, sizes)
    assert "".join(deltas) == tok.decode(ids)
    assert widest <= 2 * detokenize.MAX_HELD_IDS


def one_by_one(detok, ids, drop=frozenset()):
    """Deltas of one-token steps, without the flush."""
    state, out = DetokState(), []
    for i in ids:
        text, state = detokenize.step(detok, state, [i], drop)
        out.append(text)
    return out, state


def test_br08_emoji_from_byte_tokens():
    """BR08: an emoji streamed as four byte tokens gives '', '', '', '😃' (no U+FFFD)."""
    tok = bundle(QWEN3).tokenizer
    ids = byte_token_ids(tok, "😃".encode())
    assert len(ids) == 4
    deltas, _ = one_by_one(detokenizer_for(tok), ids)
    assert deltas == ["", "", "", "😃"]


def test_br02_invalid_bytes_never_stall():
    """BR02: output that truly holds invalid bytes (lone 0xA7, 32 times) streams U+FFFD at once;
    the joined text equals the whole decode and the carried state stays bounded."""
    tok = bundle(QWEN3).tokenizer
    ids = byte_token_ids(tok, b"\xa7") * 32
    deltas, state = one_by_one(detokenizer_for(tok), ids)
    assert deltas[0] == FFFD
    assert "".join(deltas) == tok.decode(ids) == FFFD * 32
    assert state.pending == b""


@pytest.mark.parametrize("name", MODEL_NAMES)
@pytest.mark.parametrize("target", ["삼겹살 먹고 싶어요", "数学 𫷲 和 𝟙"])
def test_br03_br04_one_token_per_step(target, name):
    """BR03/BR04: Korean and astral-plane text one token per step on every shared tokenizer: no
    U+FFFD, no exception, joined deltas equal the batch decode. One test per (text, model), so it
    runs on the worker that holds that model's other tests (``conftest.pytest_collection_modifyitems``)
    instead of loading every model on whichever worker gets it."""
    tok = bundle(name).tokenizer
    ids = tok.encode(target, add_special_tokens=False)
    deltas, _ = one_by_one(detokenizer_for(tok), ids)
    assert "".join(deltas) == tok.decode(ids) == target
    assert not any(FFFD in d for d in deltas)


def test_br11_no_spaces_around_added_tokens():
    """BR11: added (non-special) <think>/</think> decode with no spurious spaces, even when
    skipping special tokens."""
    b = bundle(QWEN3)
    tok = b.tokenizer
    think, end = tok.convert_tokens_to_ids(["<think>", "</think>"])
    ids = [
        think,
        *tok.encode("ok", add_special_tokens=False),
        end,
        *tok.encode("1", add_special_tokens=False),
    ]
    deltas, _ = stream(detokenizer_for(tok), ids, [1] * len(ids), b.special_token_ids)
    assert "".join(deltas) == "<think>ok</think>1"


def test_br10_leading_space_kept():
    """BR10 (byte-level form): a genuine leading space in the first output token is kept."""
    tok = bundle(QWEN3).tokenizer
    ids = tok.encode(" leading x", add_special_tokens=False)
    deltas, _ = one_by_one(detokenizer_for(tok), ids)
    assert "".join(deltas) == " leading x" == tok.decode(ids)
    assert deltas[0].startswith(" ")


def test_br05_prompt_ending_mid_utf8_never_leaks():
    """BR05: a prompt that ends inside a UTF-8 character never leaks into the streamed text; the
    output decodes exactly as ``tokenizer.decode(output_ids)``."""
    from render_service import derender
    from render_service.settings import Settings

    b = bundle(QWEN3)
    tok = b.tokenizer
    pepper = byte_token_ids(tok, "🌶".encode())
    prompt = tok.encode("Hello world ", add_special_tokens=False) + pepper[:2]
    output = pepper[2:] + tok.encode(" hot", add_special_tokens=False)
    s, state, deltas = Settings(model=b.root), None, []
    for t in output:
        body = {**stream_body([t], state, request_id="cmpl-1"), "prompt_token_ids": prompt}
        r = derender.derender_completion(b, s, body)
        state = r["stream_state"]
        deltas.append(r["chunk"]["choices"][0]["text"])
    assert not any("Hello" in d for d in deltas)
    assert "".join(deltas) == tok.decode(output)


class RewritingTokenizer:
    """BR04's synthetic tokenizer: decode([1]) = 'abcde', decode([1, 2]) = 'abcd😀' (a merge
    rewrites the tail), decode([2]) = '😀'. A stand-in for a third-party tokenizer."""

    table = {(1,): "abcde", (1, 2): "abcd😀", (2,): "😀", (): ""}

    def decode(self, ids, skip_special_tokens=False):
        return self.table[tuple(ids)]


def test_br04_rewritten_tail_never_slices_inside_a_character():
    """BR04 (window strategy): when a new id rewrites the decoded tail, the step neither raises
    nor splits a character: it emits the new character whole."""
    detok = detokenize.Detokenizer(tokenizer=RewritingTokenizer(), token_bytes=None)
    first, state = detokenize.step(detok, DetokState(), [1], frozenset())
    second, state = detokenize.step(detok, state, [2], frozenset())
    rest, _ = detokenize.flush(detok, state)
    assert (first, second + rest) == ("abcde", "😀")
