"""Incremental detokenization: a pure ``step``/``flush`` pair over a tiny carried state.

Two strategies, chosen once per tokenizer by :func:`detokenizer_for`:

* **Byte table** (every byte-level BPE tokenizer: GPT-2 style ``ByteLevel`` decoder). Each id is
  mapped once to its bytes (vocab token string → bytes through the GPT-2 byte decoder; added
  tokens → their content as UTF-8). A step appends each id's bytes to the held bytes (the
  tokens since the text last ended on a character boundary, as vLLM holds them) and decodes
  with an incremental UTF-8 decoder using ``errors="replace"`` semantics, so U+FFFD appears
  exactly where a whole decode puts one and an invalid byte is released at once (nothing
  stalls; bug case BR02). Cost O(new ids).
* **Window** (any other tokenizer, e.g. SentencePiece/Metaspace). The vLLM-style prefix/read
  offset scheme over a short window of ids: decode ``window[prefix:]``, emit what extends
  ``decode(window[prefix:read])``; hold while the text ends in U+FFFD, but at most
  :data:`MAX_HELD_IDS` ids, so genuinely invalid output is released (BR02).

Special tokens are dropped by filtering ids before decoding (``drop`` set), which equals
``tokenizer.decode(ids, skip_special_tokens=True)`` when ``drop`` is the tokenizer's special
set. Source of the behaviour: Hugging Face ``tokenizers`` ``ByteLevel`` decoder (lossy UTF-8
over the joined bytes) and vLLM ``detokenize_incrementally`` (window scheme).
"""

from __future__ import annotations

import codecs
import random
import threading
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..tokens.fast_tokenizer import _byte_level_table as byte_level_table

#: Ids the window strategy holds back at most while the text ends in U+FFFD.
MAX_HELD_IDS = 4
#: Bytes the byte table holds back at most while the text ends inside a character. vLLM 0.33's
#: ``detokenize_incrementally`` holds the whole text of the tokens since the last emission
#: (e.g. the space of a `` \xf0\x9f`` token) until the character completes; beyond this
#: bound the complete part is released and only the incomplete tail (≤ 3 bytes) kept (BR02).
MAX_HELD_BYTES = 16
#: Ids of prompt context the window strategy seeds with (leading-space rules of Metaspace).
SEED_IDS = 5
_REPLACEMENT = "\ufffd"


@dataclass(frozen=True, slots=True)
class DetokState:
    """Carried between steps. ``pending``: the bytes held back while they end inside a
    character (byte table, ≤ :data:`MAX_HELD_BYTES`).
    ``window``/``prefix``/``read``: the window strategy's ids and offsets (≤ a few ids)."""

    pending: bytes = b""
    window: tuple[int, ...] = ()
    prefix: int = 0
    read: int = 0


@dataclass(frozen=True, slots=True)
class Detokenizer:
    """Per-tokenizer decode facts, built once per bundle by :func:`detokenizer_for`.

    Attributes:
        tokenizer: the Hugging Face tokenizer (used by the window strategy and logprobs).
        token_bytes: id → bytes for byte-level tokenizers, ``None`` for the window strategy.
    """

    tokenizer: Any
    token_bytes: tuple[bytes, ...] | None

    def bytes_of(self, token_id: int) -> bytes:
        """The raw bytes of one id (byte table), or its UTF-8 decode (window strategy)."""
        table = self.token_bytes
        if table is not None:
            return table[token_id] if 0 <= token_id < len(table) else b""
        return self.tokenizer.decode([token_id], skip_special_tokens=False).encode("utf-8")

    def decode(self, ids: Sequence[int]) -> str:
        """Whole decode of ``ids`` (special tokens kept; filter ids to drop them)."""
        if self.token_bytes is not None:
            return b"".join(self.bytes_of(i) for i in ids).decode("utf-8", errors="replace")
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=False))


def _byte_table(tokenizer: Any) -> tuple[bytes, ...] | None:
    """id → bytes for a byte-level BPE tokenizer, or ``None`` when it is not one."""
    import tokenizers

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not isinstance(backend.decoder, tokenizers.decoders.ByteLevel):
        return None
    # one str.translate + latin-1 encode per token (C loops); a char outside the ByteLevel
    # alphabet fails the encode, as it has no byte (then not byte-level: None)
    to_latin1 = byte_level_table()
    size = max(len(tokenizer), backend.get_vocab_size(with_added_tokens=True))
    table: list[bytes] = [b""] * size
    try:
        for text, token_id in backend.get_vocab(with_added_tokens=False).items():
            table[token_id] = text.translate(to_latin1).encode("latin-1")
    except UnicodeEncodeError:
        return None
    for token_id, added in tokenizer.added_tokens_decoder.items():
        table[token_id] = added.content.encode("utf-8")
    return tuple(table)


def _table_agrees(tokenizer: Any, table: tuple[bytes, ...]) -> bool:
    """Self-check: the table decodes a fixed random id sample exactly as the tokenizer does."""
    rng = random.Random(0)
    ids = [rng.randrange(len(table)) for _ in range(400)]
    ids += list(tokenizer.added_tokens_decoder)[:50]
    got = b"".join(table[i] for i in ids).decode("utf-8", errors="replace")
    return got == tokenizer.decode(ids, skip_special_tokens=False)


_TABLES: weakref.WeakKeyDictionary[Any, tuple[bytes, ...] | None] = weakref.WeakKeyDictionary()
"""tokenizer → its checked byte table (``None``: the window strategy), kept while the tokenizer
lives: the table holds no reference to it, so a dropped tokenizer is freed with its table."""
_TABLES_LOCK = threading.Lock()


def detokenizer_for(tokenizer: Any, *, force_window: bool = False) -> Detokenizer:
    """The :class:`Detokenizer` of a tokenizer (byte table when it is byte-level BPE and passes a
    self-check, else the window strategy; ``force_window`` for tests). The table is built once per
    tokenizer (weakly keyed; a tokenizer that cannot be a weak key builds it on each call)."""
    if force_window:
        return Detokenizer(tokenizer=tokenizer, token_bytes=None)
    try:
        with _TABLES_LOCK:
            known = tokenizer in _TABLES
            table = _TABLES.get(tokenizer)
    except TypeError:  # unhashable or not weakly referenceable
        known, table = False, None
    if not known:
        table = _byte_table(tokenizer)
        if table is not None and not _table_agrees(tokenizer, table):
            table = None
        try:
            with _TABLES_LOCK:
                _TABLES[tokenizer] = table
        except TypeError:
            pass
    return Detokenizer(tokenizer=tokenizer, token_bytes=table)


def _utf8_step(pending: bytes, data: bytes, final: bool) -> tuple[str, bytes]:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text = decoder.decode(pending + data, final=final)
    return text, decoder.getstate()[0]


def seed(detok: Detokenizer, prompt_ids: Sequence[int] | None, drop: frozenset[int]) -> DetokState:
    """Initial state. The byte table needs no context (output bytes never merge with the prompt's;
    BR05); the window strategy is seeded with the last prompt ids for leading-space rules."""
    if detok.token_bytes is not None or not prompt_ids:
        return DetokState()
    window = tuple(i for i in prompt_ids[-SEED_IDS * 2 :] if i not in drop)[-SEED_IDS:]
    return DetokState(window=window, prefix=0, read=len(window))


def step(
    detok: Detokenizer, state: DetokState, ids: Iterable[int], drop: frozenset[int]
) -> tuple[str, DetokState]:
    """Decode new ids. Returns the new text (possibly empty) and the next state.

    Cost O(len(ids)) for the byte table; O(len(ids) · window) for the window strategy.
    """
    if detok.token_bytes is not None:
        text, pending = byte_step(detok.token_bytes, state.pending, ids, drop)
        return text, state if pending == state.pending else replace(state, pending=pending)
    kept = [i for i in ids if i not in drop]
    out: list[str] = []
    for token_id in kept:
        text, state = _window_step(detok, state, token_id)
        out.append(text)
    return "".join(out), state


def byte_step(
    table: tuple[bytes, ...], pending: bytes, ids: Iterable[int], drop: frozenset[int]
) -> tuple[str, bytes]:
    """The byte-table strategy of :func:`step` over plain values: the text of ``ids`` (less
    ``drop``) after the held bytes ``pending``, and the bytes held after them (the pipeline's
    streaming step calls it directly, without building a :class:`DetokState`)."""
    out_text: list[str] = []
    size = len(table)
    for token_id in ids:
        if token_id in drop:
            continue
        data = pending + table[token_id] if 0 <= token_id < size else pending
        try:  # whole characters (most tokens): what the incremental decoder gives, no tail
            out_text.append(data.decode("utf-8"))
            pending = b""
            continue
        except UnicodeDecodeError:
            pass
        text, tail = _utf8_step(b"", data, False)
        if not tail:
            out_text.append(text)
            pending = b""
        elif len(data) <= MAX_HELD_BYTES:
            pending = data  # hold the token's whole text while it ends mid-character
        else:
            out_text.append(text)
            pending = tail
    return "".join(out_text), pending


def _window_step(detok: Detokenizer, state: DetokState, token_id: int) -> tuple[str, DetokState]:
    window = (*state.window, token_id)
    prefix_text = detok.decode(window[state.prefix : state.read])
    full = detok.decode(window[state.prefix :])
    ready = len(full) > len(prefix_text) and not full.endswith(_REPLACEMENT)
    if not ready and len(window) - state.read < MAX_HELD_IDS:
        return "", replace(state, window=window)
    start = state.read
    return _suffix(prefix_text, full), DetokState(window=window[start:], prefix=0, read=len(window) - start)


def _suffix(prefix_text: str, full: str) -> str:
    """The part of ``full`` beyond ``prefix_text`` (beyond their common prefix when a merge
    rewrote the tail; never slices inside a character: BR04)."""
    if full.startswith(prefix_text):
        return full[len(prefix_text) :]
    common = 0
    for a, b in zip(prefix_text, full, strict=False):
        if a != b:
            break
        common += 1
    return full[common:]


def finish(detok: Detokenizer, state: DetokState) -> tuple[str, str, DetokState]:
    """End of output: ``(text, partial, fresh state)``: the held ids released as ``text``, except
    a character left incomplete at the end, which is given apart as ``partial`` (what a whole
    decode with ``errors="replace"`` gives for it, ending in U+FFFD; ``""`` when there is none).

    Source: vLLM 0.33 ``detokenize_incrementally`` never emits text that still ends in U+FFFD,
    so the online derenderer drops a trailing partial character, batch and streaming (a
    length-truncated output ending mid-UTF-8 gives no U+FFFD); its ``HarmonyParser.flush``
    decodes the ids of an unfinished header whole, which keeps it (the caller's choice)."""
    if detok.token_bytes is not None:
        partial = _utf8_step(state.pending, b"", True)[0] if state.pending else ""
        return "", partial, DetokState()
    if state.read >= len(state.window):
        return "", "", DetokState()
    prefix_text = detok.decode(state.window[state.prefix : state.read])
    rest = _suffix(prefix_text, detok.decode(state.window[state.prefix :]))
    if rest.endswith(_REPLACEMENT):
        return "", rest, DetokState()
    return rest, "", DetokState()


def flush(detok: Detokenizer, state: DetokState) -> tuple[str, DetokState]:
    """End of output: release held ids, dropping a character left incomplete at the end
    (:func:`finish` without its ``partial``)."""
    text, _, fresh = finish(detok, state)
    return text, fresh


def drop_set(
    special_ids: frozenset[int], marker_ids: frozenset[int] | None, skip_special_tokens: bool
) -> frozenset[int]:
    """Ids left out of the text: without a parser (``marker_ids`` ``None``) all special tokens
    when ``skip_special_tokens`` (the request's value, default true), else none; with a parser
    (``marker_ids`` given) ``skip_special_tokens`` says whether the parser drops the special
    tokens it does not use as markers (``render_service.parsing.drops_special_text``)."""
    if marker_ids is not None:
        return special_ids - marker_ids if skip_special_tokens else frozenset()
    return special_ids if skip_special_tokens else frozenset()
