"""Text ↔ token ids for render: one place that encodes, so a faster identical encoder can plug in.

All functions take the loaded model (:class:`~render_service.models.ModelBundle`, or anything with
its ``tokenizer`` and ``prompt_encoder``: :class:`TokenizedModel`) and use its
Hugging Face tokenizer's Rust backend (``tokenizer.backend_tokenizer``), which gives the same ids as
``tokenizer(text, add_special_tokens=...)`` without the Python wrapper's overhead.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol


class TokenizedModel(Protocol):
    """What this module reads of a model bundle (:class:`render_service.models.ModelBundle`)."""

    @property
    def tokenizer(self) -> Any: ...

    @property
    def prompt_encoder(self) -> Any: ...


def _backend(bundle: TokenizedModel) -> Any:
    return getattr(bundle.tokenizer, "backend_tokenizer", None)


def encode_prompt(bundle: TokenizedModel, text: str) -> list[int]:
    """Token ids of a rendered chat prompt: added/special tokens in the text are recognised and no
    BOS/EOS is added (the template wrote them; transformers' ``apply_chat_template`` encodes with
    ``add_special_tokens=False``; BR53). Uses the bundle's prefix-cached fast encoder, which is
    proven to give the same ids."""
    if bundle.prompt_encoder is not None:
        return bundle.prompt_encoder.encode(text)
    return encode_text(bundle, text, add_special_tokens=False)


def encode_prompt_with_offsets(
    bundle: TokenizedModel, text: str, *, add_special_tokens: bool = False
) -> tuple[list[int], list[tuple[int, int]]]:
    """:func:`encode_prompt` plus each token's ``(start, end)`` character span in ``text``
    (``return_token_offsets``); ``add_special_tokens`` as for completions prompts (added tokens
    span ``(0, 0)``)."""
    backend = _backend(bundle)
    if backend is None:
        out = bundle.tokenizer(text, add_special_tokens=add_special_tokens, return_offsets_mapping=True)
        return list(out["input_ids"]), [tuple(o) for o in out["offset_mapping"]]
    enc = backend.encode(text, add_special_tokens=add_special_tokens)
    return list(enc.ids), [tuple(o) for o in enc.offsets]


def encode_text(bundle: TokenizedModel, text: str, *, add_special_tokens: bool) -> list[int]:
    """Token ids of plain text (completions prompts, ``/tokenize``); ``add_special_tokens`` adds
    the tokenizer's BOS/EOS post-processing as ``tokenizer(text, add_special_tokens=...)``."""
    backend = _backend(bundle)
    if backend is not None:
        return list(backend.encode(text, add_special_tokens=add_special_tokens).ids)
    return list(bundle.tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"])


class TokenLookup(Mapping[str, int]):
    """Token text → id answered by the Rust backend on demand (``token_to_id``, added tokens
    included), the same mapping as ``tokenizer.get_vocab()`` without building that 150k-entry
    dict (~30 MB that stays resident) for the few marker lookups the parsers make."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self._backend = getattr(tokenizer, "backend_tokenizer", None)

    def __getitem__(self, text: str) -> int:
        backend = self._backend
        tid = backend.token_to_id(text) if backend is not None and isinstance(text, str) else None
        if tid is None:
            raise KeyError(text)
        return int(tid)

    def __iter__(self) -> Iterator[str]:
        return iter(self._tokenizer.get_vocab())

    def __len__(self) -> int:
        return len(self._tokenizer.get_vocab())

    def __bool__(self) -> bool:  # a tokenizer always has tokens; spares building the dict for len()
        return True


def vocab_lookup(bundle: TokenizedModel) -> Mapping[str, int]:
    """Token text → id for the bundle's tokenizer: a :class:`TokenLookup` over the Rust backend, or
    ``get_vocab()`` when there is none."""
    if _backend(bundle) is None:
        return dict(bundle.tokenizer.get_vocab())
    return TokenLookup(bundle.tokenizer)


def decode(bundle: TokenizedModel, ids: Sequence[int]) -> str:
    """Text of ``ids`` with special tokens kept (``tokenizer.decode(ids)``)."""
    return str(bundle.tokenizer.decode(list(ids)))


def token_strings(bundle: TokenizedModel, ids: Sequence[int]) -> list[str]:
    """Vocabulary strings of ``ids`` (``convert_ids_to_tokens``)."""
    return [str(t) for t in bundle.tokenizer.convert_ids_to_tokens(list(ids))]


def truncate(ids: list[int], limit: int | None, side: str | None, max_model_len: int) -> list[int]:
    """``truncate_prompt_tokens``: keep ``limit`` ids (``-1`` = ``max_model_len``) — the last ones
    (``side`` ``"left"``, the default) or the first ones (``"right"``); ``None`` keeps all."""
    if limit is None:
        return ids
    keep = max_model_len if limit == -1 else limit
    if len(ids) <= keep:
        return ids
    return ids[:keep] if side == "right" else ids[len(ids) - keep :]
