"""Multi-turn prefix reuse: encode a rendered prompt piece by piece, caching the pieces' ids.

A Hugging Face tokenizer whose added tokens are all matched on raw text (``normalized``, ``lstrip``,
``rstrip``, ``single_word`` false) first cuts the text at added tokens (leftmost-longest) and then
normalizes, pre-tokenizes and BPE-encodes every piece between them on its own
(``tokenizers`` ``AddedVocabulary::extract_and_normalize``). Hence::

    encode(p0 + t1 + p1 + ... + tn + pn) == encode(p0) + [id(t1)] + encode(p1) + ... + [id(tn)] + encode(pn)

and a piece cut out of the text contains no added token itself, so encoding it alone is the same as
encoding it in place (``tests/test_prefix_cache.py`` checks this identity on random text for every
shared model). In a chat prompt the pieces are the message bodies between ``<|im_start|>`` /
``<|im_end|>``-style tokens: turn k+1 shares all of turn k's pieces, so only the new ones are encoded.

:class:`CachedEncoder` keeps piece text → ids in a bounded LRU (estimated bytes, not entries), counts
hits and misses as plain ints, and is safe to call from many threads (one lock around the map; the
encoding itself runs outside it).
"""

from __future__ import annotations

import json
import sys
import threading
import weakref
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from .fast_tokenizer import (
    Unsupported,
    added_splitter,
    build_fast_encoder,
    check_added_tokens,
    tokenizer_backend,
)

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""Default memory cap of the piece cache (64 MiB ≈ 1.7 M cached token ids)."""

_INT_BYTES = 32  # an id ≥ 256 is its own int object (28 bytes, 32 allocated)
_ENTRY_OVERHEAD = 160  # OrderedDict node + tuple header, roughly


class PieceEncoder(Protocol):
    """What :class:`CachedEncoder` needs: HF-identical cutting at added tokens and piece encoding."""

    added: dict[str, int]

    def split_added(self, text: str) -> list[str]: ...

    def encode_piece(self, piece: str) -> list[int]: ...

    def encode(self, text: str) -> list[int]: ...


class HFPieceEncoder:
    """:class:`PieceEncoder` over the HF tokenizer itself (when no fast encoder could be proven).

    Only valid for tokenizers whose added tokens pass ``check_added_tokens``; build it through
    :func:`build_prompt_encoder`.
    """

    def __init__(self, tokenizer: Any, added: dict[str, int]) -> None:
        self.tokenizer = tokenizer
        self.added = dict(added)
        self.split_added = added_splitter(self.added)

    def encode_piece(self, piece: str) -> list[int]:
        """HF ids of a piece that contains no added token."""
        return list(self.tokenizer.encode(piece, add_special_tokens=False))

    def encode(self, text: str) -> list[int]:
        """HF ``encode(text, add_special_tokens=False)``."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))


@dataclass(slots=True)
class CacheStats:
    """Counters of a :class:`CachedEncoder` (plain ints, ready to export as Prometheus metrics).

    Attributes:
        hits, misses: piece lookups found / not found (empty pieces are not counted).
        evictions: entries dropped to stay under ``max_bytes``.
        too_large: pieces encoded but not cached because one entry would exceed ``max_entry_bytes``.
        entries, bytes: current number of entries and their estimated size in bytes.
    """

    hits: int = 0
    misses: int = 0
    evictions: int = 0
    too_large: int = 0
    entries: int = 0
    bytes: int = 0

    def snapshot(self) -> dict[str, int]:
        """A copy of the counters as a dict."""
        return asdict(self)


def entry_bytes(piece: str, ids: tuple[int, ...]) -> int:
    """Estimated memory of one cache entry: key string + id tuple + int objects + map overhead."""
    return sys.getsizeof(piece) + sys.getsizeof(ids) + _INT_BYTES * len(ids) + _ENTRY_OVERHEAD


RECENT_TEXTS = 4
"""Whole texts :class:`RecentTexts` keeps (the conversations most recently encoded)."""


def prefix_reuse_ok(added: dict[str, int]) -> bool:
    """Whether the ids of a text's head up to the end of an added token can be reused for another
    text with the same head: true when no added token contains another one (then no
    leftmost-longest match can start before that token's end and end after it, so both texts are
    cut the same way up to there, see :class:`RecentTexts`)."""
    return all(a == b or a not in b for a in added for b in added)


class RecentTexts:
    """The last few whole texts a :class:`CachedEncoder` encoded, with their ids and, for each
    added token, the character offset just after it and the number of ids up to it.

    A new text that starts with one of them up to such an offset ``b`` (a conversation's next
    turn, or the same turn with its last message changed) is cut at added tokens exactly as that
    text was up to ``b`` (:func:`prefix_reuse_ok`), and the pieces are encoded one by one, so its
    ids up to ``b`` are the kept ones: only ``text[b:]`` is cut and looked up. Safe to call from
    many threads (entries are replaced whole, never changed).
    """

    def __init__(self, added: dict[str, int], count: int) -> None:
        self.added = added
        self.count = count
        self.usable = prefix_reuse_ok(added)
        # (text, ids, token ends, ids up to each, non-empty pieces up to each); lists never changed
        self._texts: list[tuple[str, list[int], list[int], list[int], list[int]]] = []
        self._lock = threading.Lock()

    def head(self, text: str) -> tuple[int, list[int], list[int], list[int], list[int]]:
        """``(b, ids, ends, counts, pieces)`` of the longest kept head of ``text`` (``b`` = 0:
        none): the ids of ``text[:b]``, and for each added token up to ``b`` the offset after it,
        the ids and the non-empty pieces up to it, as new lists."""
        best: tuple[int, int, Any] = (0, 0, None)
        for entry in list(self._texts):  # most recent first
            if 2 * best[0] >= len(text):  # good enough: each further comparison copies the text
                break
            same = common_prefix_length(text, entry[0])
            if same <= best[0]:
                continue
            k = bisect_right(entry[2], same)
            if k and entry[2][k - 1] > best[0]:
                best = (entry[2][k - 1], k, entry)
        b, k, entry = best
        if entry is None:
            return 0, [], [], [], []
        return b, entry[1][:entry[3][k - 1]], entry[2][:k], entry[3][:k], entry[4][:k]

    def remember(self, text: str, ids: list[int], ends: list[int], counts: list[int],
                 pieces: list[int]) -> None:
        """Keep ``text`` (most recent first; the oldest beyond ``count`` is dropped)."""
        entry = (text, ids.copy(), ends.copy(), counts.copy(), pieces.copy())  # never changed
        with self._lock:
            kept = [e for e in self._texts if e[0] != text][: self.count - 1]
            self._texts = [entry, *kept]


def common_prefix_length(a: str, b: str, block: int = 16384) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (compared a block at a time in C,
    then bisected inside the first differing block)."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i:i + block] == b[i:i + block]:
        i += block
    if i >= n:
        return n
    lo, hi = i, min(i + block, n)
    if a[lo:hi] == b[lo:hi]:
        return hi
    while hi - lo > 1:  # the first difference is in [lo, hi)
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class CachedEncoder:
    """``encode(text)`` ≡ ``encoder.encode(text)``, re-encoding only pieces not seen recently.

    Args:
        encoder: a :class:`PieceEncoder` (a ``FastEncoder`` or :class:`HFPieceEncoder`).
        max_bytes: cap on the estimated memory of cached entries (LRU eviction beyond it).
        max_entry_bytes: a piece whose entry would be larger is encoded but never cached (default
            ``max_bytes // 4``, so one 26k-token tool result cannot flush the whole cache).

    Attributes:
        stats: live :class:`CacheStats`.
        observer: optional ``observer(hits, misses)`` called after each ``encode`` with that call's
            piece lookups (the app points it at its Prometheus cache counters).
    """

    def __init__(
        self, encoder: PieceEncoder, max_bytes: int = DEFAULT_MAX_BYTES, max_entry_bytes: int | None = None,
        recent_texts: int = RECENT_TEXTS,
    ) -> None:
        self.encoder = encoder
        self.recent_texts = recent_texts
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_bytes // 4 if max_entry_bytes is None else max_entry_bytes
        self.stats = CacheStats()
        self.observer: Callable[[int, int], None] | None = None
        self.settled = threading.Event()
        """Set once the encoder is final (see :func:`build_prompt_encoder` ``background``)."""
        self._recent: RecentTexts | None = None
        self._map: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self._lock = threading.Lock()

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; identical to ``encoder.encode(text)`` (see module docstring)."""
        encoder = self.encoder
        recent = self._recent_for(encoder.added)
        start, ids, ends, counts, done = recent.head(text) if recent is not None else (0, [], [], [], [])
        parts = encoder.split_added(text[start:] if start else text)  # piece, added token, ..., piece
        pieces, tokens = parts[0::2], parts[1::2]
        found, hits, misses = self._lookup(pieces, done[-1] if done else 0)
        if self.observer is not None:
            self.observer(hits, misses)
        pieces_done = done[-1] if done else 0
        added = encoder.added
        extend, append = ids.extend, ids.append
        new: list[tuple[str, tuple[int, ...]]] = []
        last = len(tokens)
        at = start
        for j, cached in enumerate(found):
            if cached is None:
                part = pieces[j]
                cached = tuple(encoder.encode_piece(part))
                new.append((part, cached))
            extend(cached)
            if j < last:
                token = tokens[j]
                append(added[token])
                if recent is not None:
                    at += len(pieces[j]) + len(token)
                    pieces_done += bool(pieces[j])
                    ends.append(at)
                    counts.append(len(ids))
                    done.append(pieces_done)
        if new:
            self._store(new)
        if recent is not None:
            recent.remember(text, ids, ends, counts, done)
        return ids

    def _recent_for(self, added: dict[str, int]) -> RecentTexts | None:
        """The :class:`RecentTexts` of the current encoder's added-token table (made anew after
        the encoder is swapped), ``None`` when turned off or the table does not allow it."""
        recent = self._recent
        if recent is not None and recent.added is added:
            return recent if recent.usable else None
        if self.recent_texts <= 0:
            return None
        recent = RecentTexts(added, self.recent_texts)
        self._recent = recent
        return recent if recent.usable else None

    def _lookup(self, pieces: list[str], reused: int = 0) -> tuple[list[tuple[int, ...] | None], int, int]:
        """The cached ids of each piece (``()`` for an empty one, ``None`` when not cached),
        and the number of hits and misses (empty pieces are not counted; ``reused``: pieces of
        a kept head, :class:`RecentTexts`, counted as hits)."""
        out: list[tuple[int, ...] | None] = []
        hits, misses = reused, 0
        with self._lock:
            get, touch = self._map.get, self._map.move_to_end
            for piece in pieces:
                if not piece:
                    out.append(())
                    continue
                hit = get(piece)
                if hit is not None:
                    touch(piece)
                    hits += 1
                else:
                    misses += 1
                out.append(hit)
            self.stats.hits += hits
            self.stats.misses += misses
        return out, hits, misses

    def _store(self, new: list[tuple[str, tuple[int, ...]]]) -> None:
        with self._lock:
            for piece, ids in new:
                size = entry_bytes(piece, ids)
                if size > self.max_entry_bytes or size > self.max_bytes:
                    self.stats.too_large += 1
                    continue
                if piece in self._map:  # another thread stored it meanwhile
                    continue
                self._map[piece] = ids
                self._sizes[piece] = size
                self.stats.bytes += size
                self._evict()
            self.stats.entries = len(self._map)

    def _evict(self) -> None:
        while self.stats.bytes > self.max_bytes and self._map:
            piece, _ = self._map.popitem(last=False)
            self.stats.bytes -= self._sizes.pop(piece)
            self.stats.evictions += 1

    def clear(self) -> None:
        """Drop every entry (counters other than entries/bytes are kept)."""
        with self._lock:
            self._map.clear()
            self._sizes.clear()
            self.stats.entries = self.stats.bytes = 0


def _piecewise_ok(tokenizer: Any) -> bool:
    """Whether HF's added tokens allow cutting the text first (see module docstring)."""
    tokens = _added_tokens(tokenizer)
    if tokens is None:
        return False
    try:
        check_added_tokens(tokens)
    except Unsupported:
        return False
    return True


def _added_tokens(tokenizer: Any) -> list[dict[str, Any]] | None:
    """The ``added_tokens`` entries of the tokenizer's ``tokenizer.json`` (``id``, ``content`` and the
    matching flags :func:`check_added_tokens` reads), in id order; ``None`` when it has no
    ``tokenizers`` backend (:func:`~.fast_tokenizer.tokenizer_backend` is ``None``).

    Read from the backend's ``get_added_tokens_decoder()`` (the same ``AddedToken`` objects the JSON
    is serialised from) instead of serialising and parsing the whole ``tokenizer.json`` (0.4-1.4
    CPU-s per load for a 130k-200k vocabulary; equal lists for every shared model and the embedded
    one); a backend without that method falls back to the JSON."""
    backend = tokenizer_backend(tokenizer)
    if backend is None:
        return None
    decoder = getattr(backend, "get_added_tokens_decoder", None)
    if decoder is None:
        return list(json.loads(backend.to_str()).get("added_tokens") or [])
    return [{"id": i, "content": t.content, "normalized": t.normalized, "lstrip": t.lstrip,
             "rstrip": t.rstrip, "single_word": t.single_word} for i, t in sorted(decoder().items())]


BUILD_THREAD = "fast-tokenizer-build"
"""Name of the background thread of ``build_prompt_encoder(..., background=True)``."""

_FASTEST: weakref.WeakKeyDictionary[Any, PieceEncoder | None] = weakref.WeakKeyDictionary()
"""tokenizer → its :func:`_fastest` encoder (``None``: none shown identical), kept while the
tokenizer lives: bundles of one tokenizer under several settings share the encoder's tables
(≈ 80-120 MB of ``fastokens`` per 130k-200k vocabulary) and its start-up probes run once. The
encoders hold no reference to the tokenizer, so a dropped tokenizer is freed with its entry."""
_FASTEST_LOCK = threading.Lock()


def _fastest(tokenizer: Any, proof_cache: Path | None) -> PieceEncoder | None:
    """The fastest encoder shown identical to ``tokenizer``: ``fastokens`` when its start-up
    probes pass (:mod:`.fastokens_encoder`), else the proven tiktoken ``FastEncoder``, else None.
    Built once per tokenizer object (:data:`_FASTEST`; a tokenizer that cannot be a weak key
    builds it on each call). The encoders are immutable and thread-safe, so sharing them changes
    no result."""
    from .fastokens_encoder import build_fastokens_encoder

    with _FASTEST_LOCK:  # one build per tokenizer, also when several bundles start at once
        try:
            if tokenizer in _FASTEST:
                return _FASTEST[tokenizer]
        except TypeError:  # unhashable or not weakly referenceable
            pass
        found: PieceEncoder | None = build_fastokens_encoder(tokenizer)
        if found is None:
            found = build_fast_encoder(tokenizer, proof_cache)
        try:
            _FASTEST[tokenizer] = found
        except TypeError:
            pass
        return found


def _upgrade(cached: CachedEncoder, tokenizer: Any, proof_cache: Path | None) -> None:
    """Swap the HF piece encoder of ``cached`` for the proven FastEncoder once it is built.

    Both give identical ids for every piece, so entries cached before the swap stay valid.
    """
    try:
        fast = _fastest(tokenizer, proof_cache)
        if fast is not None:
            cached.encoder = fast
    finally:
        cached.settled.set()
        from ..memory import release_memory  # the proof's temporary tables

        release_memory()


def build_prompt_encoder(
    tokenizer: Any,
    max_bytes: int = DEFAULT_MAX_BYTES,
    *,
    background: bool = False,
    proof_cache: Path | None = None,
) -> CachedEncoder | PieceEncoder:
    """The encoder the render path should use for templated prompt text.

    Returns a :class:`CachedEncoder` over the fastest encoder shown identical (``fastokens`` after its
    start-up probes, else the proven tiktoken ``FastEncoder``) when there is one, else
    over the HF tokenizer itself when its added tokens allow piecewise encoding, else a plain
    :class:`HFPieceEncoder` (``encode`` = HF). In every case ``.encode(text)`` equals
    ``tokenizer.encode(text, add_special_tokens=False)``. ``max_bytes <= 0`` disables the cache.

    With ``background=True`` it returns at once a :class:`CachedEncoder` over HF and builds the
    FastEncoder (≈ 1–2 s: the BPE proof) in a background thread (not a daemon: exit waits for it),
    switching to it when done; its
    ``settled`` event is set when that attempt has finished (successfully or not). Start it in the
    process that serves (after any fork): a thread does not survive ``fork``.
    ``proof_cache``: see :func:`~render_service.tokens.fast_tokenizer.build_fast_encoder`.
    """
    plain = HFPieceEncoder(
        tokenizer, dict(tokenizer.get_added_vocab()) if hasattr(tokenizer, "get_added_vocab") else {}
    )
    if max_bytes <= 0:
        fast = _fastest(tokenizer, proof_cache)
        return fast if fast is not None else plain
    if not _piecewise_ok(tokenizer):
        return plain
    if background:
        cached = CachedEncoder(plain, max_bytes)
        threading.Thread(
            # Not a daemon: at exit the interpreter waits for the build instead of stopping the
            # thread inside native code (fastokens / tiktoken), which aborts the process (SIGABRT,
            # "FATAL: exception not rethrown") when a server is stopped during its start-up build.
            target=_upgrade, args=(cached, tokenizer, proof_cache), name=BUILD_THREAD, daemon=False
        ).start()
        return cached
    found = _fastest(tokenizer, proof_cache)
    cached = CachedEncoder(found if found is not None else plain, max_bytes)
    cached.settled.set()
    return cached
