"""FastEncoder on real prompts: the 745 real requests rendered by the Qwen3 chat template, and
the 9k-token benchmark chat, give exactly HF's ids. Also: tiktoken lets other threads run."""

from __future__ import annotations

import json
import threading

import pytest
from conftest import shared_path
from fast_tokenizer_support import (
    QWEN3,
    chat_requests,
    fast_encoder,
    hf_ids,
    reference_ids,
    render_text,
    rendered_prompts,
)

pytestmark = pytest.mark.shared


def test_745_real_requests_qwen3():
    """All 745 real requests render with Qwen3's template and encode to HF's exact ids
    (``reference_ids``: through the recorded digests of tests/goldens/prompt_ids.json where they
    apply, else HF here)."""
    texts = rendered_prompts(QWEN3)
    assert len(texts) == 745
    enc = fast_encoder(QWEN3)
    for text, (expected,) in zip(texts, reference_ids(QWEN3, [[text] for text in texts]), strict=True):
        assert enc.encode(text) == expected


@pytest.mark.parametrize("name", ["meta-llama--Llama-3.1-8B-Instruct", "openai--gpt-oss-20b",
                                  "mistralai--Mistral-Nemo-Instruct-2407"])
def test_real_requests_other_vocabularies(name):
    """A sample of 120 real requests rendered by non-Qwen templates encodes to HF's exact ids."""
    reqs = chat_requests()[::6]
    enc, checked = fast_encoder(name), 0
    for req in reqs:
        try:
            text = render_text(name, req["messages"], req.get("tools"), req.get("chat_template_kwargs"))
        except Exception:  # noqa: BLE001 - template limits (e.g. one tool call per message) are not ours
            continue
        assert enc.encode(text) == hf_ids(name, text)
        checked += 1
    assert checked >= 40


def test_chat_9k_qwen3():
    """The 9k-token benchmark chat renders and encodes to HF's exact ids (9,079 tokens)."""
    body = json.loads(shared_path("bench", "chat_9k.json").read_text(encoding="utf-8"))
    text = render_text(QWEN3, body["messages"], body.get("tools"))
    ids = fast_encoder(QWEN3).encode(text)
    assert ids == hf_ids(QWEN3, text)
    assert len(ids) == 9079


def test_encode_from_threads_is_consistent():
    """Four threads encoding different real prompts at once each get HF's ids (no shared mutable state)."""
    texts = rendered_prompts(QWEN3)[:40]
    enc = fast_encoder(QWEN3)
    expected = [ids for (ids,) in reference_ids(QWEN3, [[text] for text in texts])]
    results: dict[int, list[list[int]]] = {}

    def work(k: int) -> None:
        results[k] = [enc.encode(t) for t in texts[k::4]]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(4):
        assert results[k] == expected[k::4]
