"""Helpers shared by the fast-tokenizer and prefix-cache tests: loaded tokenizers and text strategies."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import MODELS, REPO, folder_memo, shared_path
from conftest import hf_tokenizer as _hf_tokenizer
from hypothesis import strategies as st

from render_service.tokens.fast_tokenizer import FastEncoder, build_fast_encoder

if str(REPO / "tools") not in sys.path:
    sys.path.insert(0, str(REPO / "tools"))
import record_code_point_goldens as digests  # noqa: E402

MODEL_NAMES = (
    sorted(p.name for p in MODELS.glob("*") if (p / "tokenizer.json").is_file()) if MODELS.is_dir() else []
)
"""Every folder of ../shared/models with a tokenizer.json."""

QWEN3 = "Qwen--Qwen3-0.6B"


def hf_tokenizer(name: str):  # type: ignore[no-untyped-def]
    """The Hugging Face tokenizer of ``../shared/models/<name>`` (loaded once per session)."""
    return _hf_tokenizer(name)


def fast_encoder(name: str) -> FastEncoder | None:
    """``build_fast_encoder`` of that tokenizer (built once per process while the folder is among
    the recently used ones, and dropped with its bundles: ``conftest.folder_memo``).

    A shared bundle of the folder that is already loaded (``conftest.shared_bundle``) and whose
    prompt encoder is exactly this encoder (built from the same HF tokenizer object by
    ``build_prompt_encoder`` → ``build_fast_encoder`` when ``fastokens`` is not used) lends it, so the
    BPE proof runs and its tables are held once per process; no bundle is loaded for this (with
    ``fastokens`` installed every shared folder's bundle uses it, and loading a bundle only to find
    that cost 2-5 CPU-s per folder)."""
    return folder_memo(name, "fast_encoder", lambda: _build_fast_encoder(name))  # type: ignore[no-any-return]


def _build_fast_encoder(name: str) -> FastEncoder | None:
    from conftest import _BUNDLE_PATH, _BUNDLES

    tok = hf_tokenizer(name)
    path = str(shared_path("models", name))
    for key, loaded in list(_BUNDLES.items()):
        if _BUNDLE_PATH.get(key) != path or loaded.tokenizer is not tok:
            continue
        settled = getattr(loaded.prompt_encoder, "settled", None)
        if settled is not None and settled.wait(timeout=600):
            built = loaded.prompt_encoder.encoder
            if isinstance(built, FastEncoder):
                return built
    return build_fast_encoder(tok)


def hf_ids(name: str, text: str) -> list[int]:
    """The reference: HF ``encode(text, add_special_tokens=False)``."""
    return hf_tokenizer(name).encode(text, add_special_tokens=False)


def _recorded_digests(name: str) -> dict[str, str]:
    """The HF ids digests recorded for ``name`` in ``tests/goldens/prompt_ids.json`` (by
    ``tools/record_prompt_goldens.py``), keyed by the texts' digest; empty unless they were
    recorded under this folder's key (tokenizer files, library versions)."""
    def golden() -> dict[str, str]:
        recorded = json.loads((REPO / "tests" / "goldens" / "prompt_ids.json").read_text(encoding="utf-8"))
        entry = recorded.get(name, {})
        trusted = entry.get("key") == digests.reference_key(shared_path("models", name))
        return dict(entry.get("groups", {})) if trusted else {}

    return folder_memo(name, "prompt_ids_golden", golden)  # type: ignore[no-any-return]


def are_recorded_hf_ids(name: str, texts: list[str], ids: list[list[int]]) -> bool:
    """Whether ``ids`` (one list per text of ``texts``) are HF's ids of ``texts`` as recorded:
    their sha256 digest equals the HF digest recorded for that group (:func:`_recorded_digests`).
    False for a group not recorded (then compare with :func:`reference_ids`)."""
    want = _recorded_digests(name).get(digests.texts_digest(texts))
    return want is not None and digests.ids_digest(ids) == want


def reference_ids(name: str, groups: list[list[str]]) -> list[list[list[int]]]:
    """HF's ids (:func:`hf_ids`) of every text of every group, in the same nesting.

    A group whose texts' digest is in ``tests/goldens/prompt_ids.json`` (recorded from HF by
    ``tools/record_prompt_goldens.py``) under the same key (tokenizer files, library versions) takes
    the ids of our uncached :func:`fast_encoder` when their digest equals the recorded HF digest
    (so they are HF's ids, :func:`are_recorded_hf_ids`); any other group is encoded by HF here. HF
    costs ~8 times the CPU of the fast encoder on these prompts, and the tests compare the
    reference with our (cached) encoders exactly as before."""
    out = []
    for texts in groups:
        if digests.texts_digest(texts) in _recorded_digests(name):
            ours = [fast_encoder(name).encode(text) for text in texts]  # type: ignore[union-attr]
            if are_recorded_hf_ids(name, texts, ours):
                out.append(ours)
                continue
        out.append([hf_ids(name, text) for text in texts])
    return out


def conversation_turns(req: dict) -> list[list[dict]]:
    """Prefixes of a conversation that end at a user or tool message (one per turn)."""
    msgs = req["messages"]
    return [msgs[:k] for k in range(1, len(msgs) + 1) if msgs[k - 1]["role"] in ("user", "tool")]


def rendered_turns(name: str, req: dict, kwargs: bool = True) -> list[str]:
    """Every turn of ``req`` (:func:`conversation_turns`) rendered by :func:`render_text` (with the
    request's ``chat_template_kwargs`` unless ``kwargs`` is false)."""
    extra = req.get("chat_template_kwargs") if kwargs else None
    return [render_text(name, messages, req.get("tools"), extra) for messages in conversation_turns(req)]


def rendered_prompts(name: str) -> list[str]:
    """Every real request rendered by ``name``'s template (requests it cannot render left out)."""
    texts = []
    for req in chat_requests():
        try:
            texts.append(render_text(name, req["messages"], req.get("tools"), req.get("chat_template_kwargs")))
        except Exception:  # noqa: BLE001 - a template that cannot render this request is not our subject
            continue
    return texts


def prompt_groups() -> dict[str, list[list[str]]]:
    """The text groups ``tools/record_prompt_goldens.py`` records: for Qwen3, every multi-turn
    conversation's turns (as the prefix-cache tests render them) and each real request alone."""
    multi = [rendered_turns(QWEN3, req) for req in chat_requests() if req["meta"].get("multi_turn")]
    return {QWEN3: multi + [[text] for text in rendered_prompts(QWEN3)]}


def chat_requests() -> list[dict]:
    """The 745 real requests of ../shared/data/chat_requests.jsonl."""
    path = shared_path("data", "chat_requests.jsonl")
    lines = Path(path).read_text(encoding="utf-8").split("\n")  # not splitlines(): U+2028 is inside JSON
    return [json.loads(line) for line in lines if line.strip()]


def render_text(name: str, messages: list[dict], tools: list | None = None, kwargs: dict | None = None
                ) -> str:
    """Prompt text as the chat template renders it (``tokenize=False, add_generation_prompt=True``)."""
    return hf_tokenizer(name).apply_chat_template(
        messages, tools=tools or None, tokenize=False, add_generation_prompt=True, **(kwargs or {})
    )


_ATOMS_FIXED = [
    " ", "  ", "   ", "\n", "\n\n", "\t", "\r\n", " \n ", "   \n", "\u00a0", "\u3000", "\u2028",
    "'s", "'S", "'LL", "'ll", "'re", "'VE", "'d", "'M", "'t", "ſ", "'ſ", "Don't", "I'M",
    "😀", "😶‍🌫️", "👍🏽", "🇺🇸", "\u200d", "e\u0301", "\u0301", "\u0338", "가", "\u11a8", "Å", "Ω", "ﬁ",
    "½", "²", "١٢٣", "१२", "Ⅻ", "{\"a\": 1}", "</", "<|", "|>", "[INST]", "<<", ">>",
]


def prompt_texts(added: list[str]) -> st.SearchStrategy[str]:
    """Random text mixing unicode, added/special tokens, whitespace runs, digits, CJK, emoji,
    contractions, combining marks and newlines."""
    atom = st.one_of(
        st.text(max_size=24),
        st.sampled_from(added) if added else st.just("<|x|>"),
        st.sampled_from(_ATOMS_FIXED),
        st.from_regex(r"[0-9]{1,14}", fullmatch=True),
        st.text(alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), min_size=1, max_size=8),
        st.text(alphabet=st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF), min_size=1, max_size=4),
        st.text(alphabet=" \t\n\r\u0301abcXYZ.,-_/<>|[]'", max_size=16),
    )
    return st.lists(atom, max_size=30).map("".join)
