"""The fastokens prompt encoder (render_service/tokens/fastokens_encoder.py): used only after its
start-up probes agree with Hugging Face; then identical on real messages and random text for the
shared tokenizers; a tokenizer it disagrees with keeps the other encoders (with a log line)."""

from __future__ import annotations

import json
import logging
import random
from typing import Any

import pytest
from conftest import model_dir, shared_path
from fast_tokenizer_support import MODEL_NAMES
from tokenizers import Tokenizer

from render_service.tokens import fastokens_encoder as fe
from render_service.tokens.prefix_cache import CachedEncoder

#: Every shared folder with a tokenizer.json (Qwen2 BPE with NFC and its Qwen2.5/Qwen3/R1 variants,
#: Llama 3, Mistral Tekken, gpt-oss o200k): the encoder checked is the one each folder's shared
#: bundle built at load, so checking them all costs only the comparisons.
FOLDERS = tuple(MODEL_NAMES)


class HF:
    """The folder's Hugging Face tokenizer (``tokenizers``, which transformers' fast tokenizers
    run), with the two methods the encoder build reads."""

    def __init__(self, folder: str) -> None:
        self.backend_tokenizer = Tokenizer.from_file(f"{model_dir(folder)}/tokenizer.json")

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(self.backend_tokenizer.encode(text, add_special_tokens=add_special_tokens).ids)

    def get_added_vocab(self) -> dict[str, int]:
        return {t.content: i for i, t in self.backend_tokenizer.get_added_tokens_decoder().items()}


def _texts(n: int) -> list[str]:
    out: list[str] = []
    for line in shared_path("data", "chat_requests.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        for m in json.loads(line)["messages"]:
            if isinstance(m.get("content"), str) and m["content"]:
                out.append(m["content"])
        if len(out) >= n:
            break
    rng = random.Random(7)
    out += ["".join(chr(rng.choice([rng.randint(32, 0x2FF), rng.randint(0x3000, 0x9FFF),
                                    rng.randint(0x1F300, 0x1F6FF), 10, 32]))
                    for _ in range(rng.randint(1, 60))) for _ in range(150)]
    return out


def _built_for_the_bundle(folder: str) -> tuple[Any, fe.FastokensEncoder]:
    """The folder's HF tokenizer and the encoder ``build_fastokens_encoder`` built from it for the
    folder's shared bundle (its prompt encoder's background build: the product's own path), so
    the fastokens tables and probes are built once per test process, not once more here."""
    from derender_helpers import bundle

    loaded = bundle(folder)
    prompt_encoder = loaded.prompt_encoder
    assert prompt_encoder.settled.wait(timeout=600)
    enc = prompt_encoder.encoder
    assert isinstance(enc, fe.FastokensEncoder), f"{folder}: the start-up build did not pick fastokens"
    assert enc.added == loaded.tokenizer.get_added_vocab()
    return loaded.tokenizer, enc


@pytest.mark.parametrize("folder", FOLDERS)
def test_proven_encoder_matches_hf_on_real_and_random_text(folder: str) -> None:
    tok, enc = _built_for_the_bundle(folder)
    texts = _texts(200)
    # inside a chat-shaped prompt with the tokenizer's own added tokens, too
    marks = sorted(enc.added)[:3]
    texts += [f"{marks[i % len(marks)]}{t}{marks[(i + 1) % len(marks)]}\n" for i, t in enumerate(texts[:100])]
    assert fe.first_mismatch(enc, tok, texts) is None
    cached = CachedEncoder(enc)
    for t in texts[:50]:
        assert cached.encode(t) == list(tok.encode(t, add_special_tokens=False))


def test_a_difference_on_a_probe_keeps_the_other_encoders(caplog: Any) -> None:
    class Shifted(HF):
        """A real tokenizer whose ids are shifted by one: every probe differs."""

        def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
            return [i + 1 for i in super().encode(text, add_special_tokens)]

    caplog.set_level(logging.INFO, logger="render_service.tokens.fastokens_encoder")
    assert fe.build_fastokens_encoder(Shifted("Qwen--Qwen3-0.6B")) is None
    assert "differs from Hugging Face on start-up probe" in caplog.text


def test_probe_texts_cover_added_tokens_and_are_seeded() -> None:
    added = {"<|im_start|>": 1, "<|im_end|>": 2}
    texts = fe.probe_texts(added)
    assert texts == fe.probe_texts(added)
    assert any(t.startswith("<|im_start|>") for t in texts)
    assert sum("<|im_end|>" in t for t in texts) >= 2


def test_tokenizers_of_one_file_share_the_loaded_fastokens_and_each_is_probed(caplog: Any) -> None:
    """Two tokenizer objects of one ``tokenizer.json`` (a bundle loaded again, one tokenizer in two
    folders) share one loaded ``fastokens.Tokenizer`` while an encoder of it lives, instead of
    loading it again (1.2-4 CPU-s each; the suite loaded Qwen3's up to 3 times per worker); the
    probes still run against each tokenizer, so one that differs is refused although a twin of
    its file passed."""

    class Shifted(HF):
        def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
            return [i + 1 for i in super().encode(text, add_special_tokens)]

    first = fe.build_fastokens_encoder(HF("Qwen--Qwen3-0.6B"))
    second = fe.build_fastokens_encoder(HF("Qwen--Qwen3-0.6B"))
    assert first is not None and second is not None and second is not first
    assert second.native is first.native
    assert second.encode("Hello <|im_start|>world") == first.encode("Hello <|im_start|>world")
    caplog.set_level(logging.INFO, logger="render_service.tokens.fastokens_encoder")
    assert fe.build_fastokens_encoder(Shifted("Qwen--Qwen3-0.6B")) is None
    assert "differs from Hugging Face on start-up probe" in caplog.text
