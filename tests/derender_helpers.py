"""Shared helpers for derender tests: cached real tokenizers/bundles and chunking utilities."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

from conftest import MODELS, model_dir, shared_bundle
from hypothesis import strategies as st

from render_service.models import ModelBundle
from render_service.settings import Settings

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

MODEL_NAMES = (
    sorted(p.name for p in MODELS.iterdir() if p.is_dir() and not p.name.startswith("_"))
    if MODELS.exists()
    else []
)
QWEN3 = "Qwen--Qwen3-0.6B"

#: Text pieces that stress byte-level decoding: emoji (incl. ZWJ), CJK, Korean, combining marks.
PIECES = [
    "😀",
    "👩‍👩‍👧",
    "🌶",
    "日本語",
    "数学",
    "𫷲",
    "𝟙",
    "삼겹살 먹고 싶어요",
    "e\u0301",
    "ñ",
    "Ω",
    " ",
    "\n",
    "hello",
    " world",
    "<think>",
    "</think>",
    "<tool_call>",
    '{"a": 1}',
    "ü",
    "ﬁ",
]

texts = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)), max_size=12).map("".join)
cuts = st.lists(st.integers(min_value=1, max_value=6), max_size=40)


def bundle(name: str, **kwargs: object) -> ModelBundle:
    """A loaded bundle for a ../shared model folder (cached per process)."""
    return shared_bundle(Settings(model=model_dir(name), **kwargs))  # type: ignore[arg-type]


def split(ids: Sequence[int], sizes: Sequence[int]) -> Iterator[list[int]]:
    """Cut ``ids`` into chunks of the given sizes (the last chunk takes the rest)."""
    pos = 0
    for size in sizes:
        if pos >= len(ids):
            return
        yield list(ids[pos : pos + size])
        pos += size
    if pos < len(ids):
        yield list(ids[pos:])


def stream_body(token_ids, state, *, finish=None, request_id="r", **choice):
    """A streaming derender body carrying one generate chunk with one choice (index 0)."""
    item = {"index": 0, "token_ids": list(token_ids), "finish_reason": finish, **choice}
    return {
        "stream": True,
        "stream_state": state,
        "generate_chunk": {"request_id": request_id, "choices": [item]},
    }


def byte_token_ids(tok, data: bytes):
    """The single-byte token id of each byte (byte-level vocab)."""
    from render_service.tokens.fast_tokenizer import byte_level_decoder

    inverse = {v: k for k, v in byte_level_decoder().items()}
    vocab = tok.get_vocab()
    return [vocab[inverse[b]] for b in data]
