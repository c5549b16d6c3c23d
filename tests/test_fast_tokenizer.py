"""The tiktoken-backed FastEncoder gives exactly HF's ids (``encode(text, add_special_tokens=False)``)
for every tokenizer in ../shared/models: random text (hypothesis), llama.cpp's published id lists,
and the build-time checks that make the fast path refuse what it cannot prove."""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from pathlib import Path

import orjson
import pytest
from conftest import examples, folder_memo, shared_path
from fast_tokenizer_support import MODEL_NAMES, fast_encoder, hf_ids, hf_tokenizer, prompt_texts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from render_service.tokens.fast_tokenizer import (
    TokenizerSpec,
    Unsupported,
    build_fast_encoder,
    byte_level_decoder,
    parse_spec,
    prove_rank_bpe,
    tokenizer_json,
)

REPO = Path(__file__).resolve().parents[1]
GOLDENS = Path(__file__).resolve().parent / "goldens"
sys.path.insert(0, str(REPO / "tools"))
import record_code_point_goldens as code_points  # noqa: E402

pytestmark = pytest.mark.shared


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_shared_model_gets_the_fast_path(name):
    """Every byte-level BPE tokenizer in ../shared/models is proven identical and gets a FastEncoder."""
    enc = fast_encoder(name)
    assert enc is not None
    assert enc.added == hf_tokenizer(name).get_added_vocab()


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_random_text_matches_hf(name):
    """Hypothesis: random unicode mixed with added/special tokens, whitespace, digits, CJK, emoji,
    contractions and combining marks encodes to HF's exact ids (300 examples per model)."""
    enc = fast_encoder(name)
    added = sorted(enc.added)

    @settings(max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck))
    @given(prompt_texts(added))
    def check(text):
        assert enc.encode(text) == hf_ids(name, text)

    check()


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_added_tokens_glued_to_text_match_hf(name):
    """Every added token, bare and glued between letters/combining marks, gives HF's ids (including
    the 'normalized=false' case: '>' + U+0338 must not compose across the token edge)."""
    enc = fast_encoder(name)
    for token in enc.added:
        for text in (token, f"a{token}b", f" {token} ", f"{token}\u0338x", f"e{token}\u0301", token * 2):
            assert enc.encode(text) == hf_ids(name, text), text


def _llamacpp_refs(base: str) -> list[tuple[str, list[int]]]:
    folder = shared_path("models", "_reference", "llama.cpp-vocab-tests")
    with open(folder / f"{base}.inp", encoding="utf-8", newline="") as f:
        texts = f.read().split("\n__ggml_vocab_test__\n")[:-1]
    lines = (folder / f"{base}.out").read_text(encoding="utf-8").split("\n")[:-1]
    refs = list(zip(texts, [[int(x) for x in line.split()] for line in lines], strict=True))
    assert len(refs) >= 40
    return refs


@pytest.mark.parametrize(
    ("name", "base"),
    [(n, "ggml-vocab-qwen2.gguf") for n in MODEL_NAMES if n.startswith(("Qwen--", "deepseek-ai--"))]
    + [("meta-llama--Llama-3.1-8B-Instruct", "ggml-vocab-llama-bpe.gguf")],
)
def test_llamacpp_published_ids(name, base):
    """llama.cpp's published vocab tests (ids produced by the original HF tokenizers) are reproduced."""
    if name not in MODEL_NAMES:
        pytest.skip(f"needs ../shared: {name}")
    enc = fast_encoder(name)
    for text, ids in _llamacpp_refs(base):
        assert enc.encode(text) == ids, text


@lru_cache(maxsize=1)
def _code_point_batches() -> tuple[tuple[str, ...], ...]:
    """``code_points.batches(code_points.code_point_texts())``, built once per test process (the
    same texts for every tokenizer; building them is ~2 CPU-s)."""
    return tuple(tuple(chunk) for chunk in code_points.batches(code_points.code_point_texts()))


@pytest.mark.parametrize("name", code_points.MODELS)
def test_exhaustive_code_points_match_hf(name):
    """Every code point (surrogates excluded) in several contexts (after letters, spaces, digits,
    doubled, before combining marks of classes 1/220/230/240, and HF-NFD-decomposed) gives HF's ids:
    regex classes and NFC tables of tiktoken/Python agree with Oniguruma/HF on all of Unicode.
    One test per tokenizer family (Qwen, Llama-3, o200k, tekken), so they can run in parallel.

    HF's ids, ``tok(batch, add_special_tokens=False)["input_ids"]``, are recorded per batch of 16
    texts as a sha256 in ``tests/goldens/code_point_ids.json`` (``tools/record_code_point_goldens.py``;
    running HF here was 85 % of this test's CPU: 30.3 of 35.7 CPU-s on Qwen3). A batch is taken
    from the golden only when the tokenizer files, library versions and the batch's texts are those
    it was recorded from, and our ids' digest equals it; any other batch is encoded by HF here and
    compared id by id."""
    if name not in MODEL_NAMES:
        pytest.skip(f"needs ../shared: models/{name} not found")
    golden = json.loads((GOLDENS / "code_point_ids.json").read_text(encoding="utf-8")).get(name, {})
    trusted = golden.get("key") == code_points.reference_key(shared_path("models", name))
    enc, tok = fast_encoder(name), hf_tokenizer(name)
    chunks = [list(chunk) for chunk in _code_point_batches()]
    recorded = list(zip(golden.get("texts_sha256", []), golden.get("ids_sha256", []), strict=True))
    assert not trusted or len(recorded) == len(chunks), "golden has another batch count: re-record it"
    live = 0
    for i, chunk in enumerate(chunks):
        ours = [enc.encode(text) for text in chunk]
        if (trusted and recorded[i][0] == code_points.texts_digest(chunk)
                and recorded[i][1] == code_points.ids_digest(ours)):
            continue
        live += 1
        for text, got, expected in zip(chunk, ours, code_points.reference_ids(tok, chunk), strict=True):
            assert got == expected, (name, text[:40])
    if live:
        print(f"{name}: {live} of {len(chunks)} batches checked against HF here (golden stale or absent)")


def test_surrogates_fail_like_hf():
    """A lone surrogate cannot be encoded: FastEncoder raises instead of silently repairing it."""
    enc = fast_encoder("Qwen--Qwen3-0.6B")
    with pytest.raises(UnicodeEncodeError):
        enc.encode("a\ud800b")


def test_split_added_cuts_leftmost_longest():
    """split_added alternates pieces and added tokens; an empty piece separates adjacent tokens."""
    enc = fast_encoder("Qwen--Qwen3-0.6B")
    assert enc.split_added("a<|im_start|><think>b") == ["a", "<|im_start|>", "", "<think>", "b"]
    assert enc.split_added("plain") == ["plain"]


def _spec(**over) -> TokenizerSpec:
    ranks = {bytes([b]): b for b in range(256)}
    base = dict(pattern=r"\S+|\s+", nfc=False, ranks=ranks, added={}, ignore_merges=False, merges=[])
    base.update(over)
    return TokenizerSpec(**base)


def test_proof_rejects_inconsistent_merge_order():
    """Rank BPE would merge 'bc' before 'ab' but the merges list says 'ab' first → refused."""
    ranks = {bytes([b]): b for b in range(256)} | {b"bc": 256, b"ab": 257}
    with pytest.raises(Unsupported):
        prove_rank_bpe(_spec(ranks=ranks, merges=[(b"a", b"b"), (b"b", b"c")]))


def test_proof_rejects_unreachable_token_without_ignore_merges():
    """A token that rank BPE cannot build ('abc' with no 'ab'/'bc') is refused unless ignore_merges."""
    ranks = {bytes([b]): b for b in range(256)} | {b"abc": 256}
    with pytest.raises(Unsupported):
        prove_rank_bpe(_spec(ranks=ranks))
    prove_rank_bpe(_spec(ranks=ranks, ignore_merges=True))


def test_proof_rejects_a_merge_hf_lacks():
    """Rank BPE merges ('a','bc') into 'abc' but HF only knows ('ab','c') → refused."""
    ranks = {bytes([b]): b for b in range(256)} | {b"bc": 256, b"ab": 257, b"abc": 258}
    merges = [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")]
    with pytest.raises(Unsupported):
        prove_rank_bpe(_spec(ranks=ranks, merges=merges))


def test_a_bpe_model_is_proven_once_per_process():
    """The proof reads only ranks, merges and ``ignore_merges``: a spec with the same ones (other
    added tokens, as the six Qwen2-vocabulary folders) is not proven again, and one that differs in
    any of them is (a failing proof is never remembered)."""
    from render_service.tokens.fast_tokenizer import _PROVEN, _bpe_digest, _prove_once

    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abc": 257}
    merges = [(b"a", b"b"), (b"ab", b"c")]
    good = _spec(ranks=ranks, merges=merges)
    twin = _spec(ranks=ranks, merges=merges, added={"<x>": 258}, pattern=r"\S+")
    assert _bpe_digest(twin) == _bpe_digest(good)
    _prove_once(good, "", None)
    assert _bpe_digest(good) in _PROVEN
    for other in (_spec(ranks=ranks, merges=merges, ignore_merges=True),
                  _spec(ranks=ranks | {b"bc": 258}, merges=[*merges, (b"b", b"c")]),
                  _spec(ranks=ranks, merges=merges[:1])):
        assert _bpe_digest(other) != _bpe_digest(good)
    unprovable = _spec(ranks=ranks, merges=merges[:1])  # 'abc' = ('ab','c'), which merges lack
    with pytest.raises(Unsupported):
        _prove_once(unprovable, "", None)
    with pytest.raises(Unsupported):  # a failure is not remembered: refused again
        _prove_once(unprovable, "", None)
    assert _bpe_digest(unprovable) not in _PROVEN


def _qwen_json() -> dict:
    """Qwen3's tokenizer.json, parsed anew (each test mutates its own copy); the text is taken from
    the tokenizer once per process and parsed with orjson (the same JSON, ~10 times faster than
    ``json``, which made up most of each refusal test's CPU)."""
    qwen = "Qwen--Qwen3-0.6B"
    text = folder_memo(qwen, "tokenizer_json", lambda: tokenizer_json(hf_tokenizer(qwen)))
    return orjson.loads(text)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(normalizer={"type": "NFKC"}),
        lambda d: d["added_tokens"][0].update(normalized=True),
        lambda d: d["added_tokens"][0].update(lstrip=True),
        lambda d: d["added_tokens"].append({**d["added_tokens"][0], "id": 999999, "content": "<|im"}),
        lambda d: d["model"].update(type="WordPiece"),
        lambda d: d["model"].update(byte_fallback=True),
        lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(behavior="Removed"),
        lambda d: d["pre_tokenizer"]["pretokenizers"][1].update(use_regex=True),
    ],
    ids=["nfkc", "normalized-added", "lstrip", "prefix-added", "wordpiece", "byte-fallback", "split-removed",
         "bytelevel-regex"],
)
def test_unsupported_components_are_refused(mutate):
    """Each component outside the proven set makes parse_spec refuse (→ build_fast_encoder None)."""
    data = _qwen_json()
    mutate(data)
    with pytest.raises(Unsupported):
        parse_spec(orjson.dumps(data).decode())


def test_non_tokenizers_object_falls_back():
    """An object without a tokenizers backend gets None (the caller keeps HF)."""
    assert build_fast_encoder(object()) is None


def test_byte_level_decoder_is_a_bijection():
    """The ByteLevel alphabet maps 256 distinct characters onto the 256 byte values."""
    table = byte_level_decoder()
    assert len(table) == 256 and sorted(table.values()) == list(range(256))
    assert table["Ġ"] == 0x20 and table["Ċ"] == 0x0A


@settings(max_examples=examples(50), deadline=None)
@given(st.text(alphabet="ab", max_size=12))
def test_two_letter_vocab_hf_equivalence_is_checked(text):
    """Sanity of the proof helper on a toy vocab: every 2-part state the loop reports is adjacent bytes
    that concatenate back to the input."""
    from render_service.tokens.fast_tokenizer import two_part_state

    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"ba": 257, b"aa": 258}
    data = text.encode()
    pair = two_part_state(data, ranks) if len(data) >= 2 else None
    if pair is not None:
        assert pair[0] + pair[1] == data


def test_proof_cache_records_and_reuses_a_successful_proof(tmp_path):
    """With proof_cache, the first build writes a marker named by the tokenizer.json hash; the next
    build finds it, skips the proof and still encodes like HF; another tokenizer has another marker."""
    from render_service.tokens.fast_tokenizer import _proof_marker

    tok = hf_tokenizer("Qwen--Qwen3-0.6B")
    marker = _proof_marker(tmp_path, tokenizer_json(tok))
    assert build_fast_encoder(tok, proof_cache=tmp_path) is not None and marker.is_file()
    again = build_fast_encoder(tok, proof_cache=tmp_path)
    text = "<|im_start|>user\nhello 'LL 123<|im_end|>"
    assert again.encode(text) == hf_ids("Qwen--Qwen3-0.6B", text)
    # another tokenizer.json (Llama 3.1's, read as a file: loading that tokenizer only for its text
    # cost this test 2-3 CPU-s) has another marker, not written
    other = _proof_marker(tmp_path, shared_path("models", "meta-llama--Llama-3.1-8B-Instruct",
                                                "tokenizer.json").read_text(encoding="utf-8"))
    assert other != marker and not other.exists()


@pytest.mark.parametrize("name", ["Qwen--Qwen3-0.6B", "meta-llama--Llama-3.1-8B-Instruct"])
def test_long_single_pieces_match_hf(name):
    """Pre-tokenizer pieces of 20k characters (one letter repeated, random letters, spaces, CJK) encode
    like HF (tiktoken's large-piece BPE path, not only the short-piece one)."""
    import random

    rnd = random.Random(7)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    letters = "".join(rnd.choice(alphabet) for _ in range(20000))
    cjk = "".join(chr(rnd.randint(0x4E00, 0x9FFF)) for _ in range(20000))
    enc = fast_encoder(name)
    for text in ("a" * 20000, letters, " " * 20000, cjk, "\n" * 5000 + "x"):
        assert enc.encode(text) == hf_ids(name, text)
