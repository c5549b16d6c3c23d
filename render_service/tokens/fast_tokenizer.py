"""Fast, provably identical prompt encoding: a ``tiktoken`` encoder built from a HF byte-level BPE tokenizer.

``build_fast_encoder(tokenizer)`` reads the tokenizer's own ``tokenizer.json`` (vocabulary, merges,
normalizer, pre-tokenizer regex, added tokens) and returns a :class:`FastEncoder` whose
``encode(text)`` equals ``tokenizer.encode(text, add_special_tokens=False)``, or ``None`` when that
equality cannot be proven for this tokenizer (the caller then keeps using Hugging Face).

Why the result is identical (each point is checked at build time; any failure → ``None``):

* Added tokens. HF splits the raw text at added tokens first (Aho-Corasick, leftmost-longest), then
  normalizes, pre-tokenizes and BPE-encodes each piece on its own. We accept only added tokens with
  ``normalized``/``lstrip``/``rstrip``/``single_word`` all false (matched on raw text, no whitespace
  eating) of which none is a prefix of another, so tiktoken's leftmost-first special-token regex finds
  the same matches; both ``special`` and non-special added tokens are matched (HF matches both).
* Normalizer: none, or NFC. NFC is applied per piece between added tokens exactly as HF does, with
  HF's own normalizer object; the fast path skips it when ``unicodedata.is_normalized`` says the text
  is already NFC (ASCII always is), in which case every piece is unchanged too.
* Pre-tokenizer: ``Split(Regex, Isolated)`` + ``ByteLevel(use_regex=False)``; the regex is handed to
  tiktoken (fancy-regex) unchanged after checking that it compiles there.
* BPE: ranks = HF ids of the byte strings. Rank-order BPE (tiktoken) equals merges-order BPE (HF) on
  every input when (1) for every token ``t`` the pure rank-BPE loop on ``bytes(t)`` passes through a
  2-part state ``s2(t)`` and that pair is a merge, (2) merge priority is strictly increasing in the
  rank of the merged token over those pairs, and (3) either ``ignore_merges`` (HF and tiktoken both
  look a whole piece up first) or every token is produced by (1). Proof sketch: in any state of the
  rank loop, a run covering exactly ``t``'s bytes with two tokens has evolved as the isolated loop on
  ``bytes(t)`` (merges inside a span covered at that moment never involved outside tokens, and were
  taken in the isolated order), whose only 2-part state is ``s2(t)``. So every adjacent pair that can
  merge in the rank loop is some ``s2(t)``, which by (1)/(2) is also the merge HF picks, tie by tie.

Source of the HF behaviour: ``tokenizers`` ``AddedVocabulary::extract_and_normalize``,
``models::bpe::Word::merge_all`` (priority = merge index, ties leftmost), ``ignore_merges``.
"""

from __future__ import annotations

import hashlib
import logging
import pickle
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import tiktoken

logger = logging.getLogger(__name__)


_NEVER = 1 << 62  # rank of a pair that is not a token


class Unsupported(Exception):
    """This tokenizer cannot be proven identical under tiktoken; the message says why."""


def byte_level_decoder() -> dict[str, int]:
    """Map of HF ByteLevel alphabet characters back to byte values (the GPT-2 byte↔unicode table).

    Printable Latin-1 bytes map to themselves; the other 68 bytes to U+0100 onwards, in byte order.
    """
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {chr(b): b for b in printable}
    extra = 0
    for b in range(256):
        if b not in printable:
            table[chr(0x100 + extra)] = b
            extra += 1
    return table


@dataclass(frozen=True, slots=True)
class TokenizerSpec:
    """The parts of a ``tokenizer.json`` that the fast path reproduces.

    Attributes:
        pattern: pre-tokenizer Split regex (HF/Oniguruma syntax, accepted by fancy-regex as is).
        nfc: whether the normalizer is NFC (else there is none).
        ranks: token bytes → id, added tokens excluded.
        added: added-token text → id.
        ignore_merges: the BPE model's ``ignore_merges`` flag.
        merges: merge pairs as byte strings, in priority order.
    """

    pattern: str
    nfc: bool
    ranks: dict[bytes, int]
    added: dict[str, int]
    ignore_merges: bool
    merges: list[tuple[bytes, bytes]]


def _check_model(model: dict[str, Any]) -> None:
    if model.get("type") != "BPE":
        raise Unsupported(f"model type {model.get('type')!r} is not BPE")
    if model.get("byte_fallback") or model.get("dropout") or model.get("continuing_subword_prefix") \
            or model.get("end_of_word_suffix"):
        raise Unsupported("BPE options byte_fallback/dropout/subword prefix/suffix are not supported")


def _split_pattern(pre: dict[str, Any] | None) -> str:
    """The Split regex of a ``Sequence[Split(Isolated), ByteLevel(use_regex=False)]`` pre-tokenizer."""
    steps = (pre or {}).get("pretokenizers") if (pre or {}).get("type") == "Sequence" else None
    if not steps or len(steps) != 2:
        raise Unsupported("pre-tokenizer is not Sequence[Split, ByteLevel]")
    split, byte_level = steps
    if split.get("type") != "Split" or split.get("behavior") != "Isolated" or split.get("invert"):
        raise Unsupported("first pre-tokenizer is not Split(Isolated, invert=false)")
    if "Regex" not in split.get("pattern", {}):
        raise Unsupported("Split pattern is not a regex")
    if byte_level.get("type") != "ByteLevel" or byte_level.get("use_regex") \
            or byte_level.get("add_prefix_space"):
        raise Unsupported("second pre-tokenizer is not ByteLevel(use_regex=false, add_prefix_space=false)")
    return str(split["pattern"]["Regex"])


def check_added_tokens(tokens: list[dict[str, Any]]) -> dict[str, int]:
    """Added-token text → id, when every token is matched on raw text with no whitespace eating and
    none is a prefix of another (so cutting the text at them is unambiguous and piecewise-exact).

    Raises:
        Unsupported: a token with ``normalized``/``lstrip``/``rstrip``/``single_word``, or a prefix pair.
    """
    added: dict[str, int] = {}
    for tok in tokens:
        if tok.get("normalized") or tok.get("lstrip") or tok.get("rstrip") or tok.get("single_word"):
            raise Unsupported(f"added token {tok['content']!r} has normalized/lstrip/rstrip/single_word set")
        added[tok["content"]] = int(tok["id"])
    contents = sorted(added)
    for a, b in zip(contents, contents[1:], strict=False):
        if b.startswith(a):  # sorted order puts a prefix right before some extension of it
            raise Unsupported(f"added token {a!r} is a prefix of {b!r}")
    return added


def _byte_level_table() -> dict[int, str]:
    """``str.translate`` table: ByteLevel alphabet char → the Latin-1 char of its byte; any other
    Latin-1 char → a lone surrogate, so that ``.encode("latin-1")`` fails on non-byte-level text."""
    table: dict[int, str] = {c: "\udfff" for c in range(256)}
    table.update({ord(ch): chr(b) for ch, b in byte_level_decoder().items()})
    return table


def _ranks(vocab: dict[str, int], added: dict[str, int]) -> dict[bytes, int]:
    table = _byte_level_table()
    added_ids = {i: s for s, i in added.items()}
    ranks: dict[bytes, int] = {}
    for text, idx in vocab.items():
        if idx in added_ids:
            if added_ids[idx] != text:  # HF's BPE could emit this id for other text
                raise Unsupported(f"vocab id {idx} is added token {added_ids[idx]!r} but BPE text {text!r}")
            continue
        try:
            ranks[text.translate(table).encode("latin-1")] = idx
        except UnicodeEncodeError:
            raise Unsupported(f"vocab entry {text!r} is not byte-level text") from None
    if len(set(ranks.values())) != len(ranks) or sum(1 for b in ranks if len(b) == 1) != 256:
        raise Unsupported("vocab ids are not unique or not all 256 bytes are tokens")
    return ranks


def _merges(raw: list[Any]) -> list[tuple[bytes, bytes]]:
    table = _byte_level_table()
    out = []
    try:
        for m in raw:
            a, b = m.split(" ", 1) if isinstance(m, str) else m
            out.append((a.translate(table).encode("latin-1"), b.translate(table).encode("latin-1")))
    except UnicodeEncodeError:
        raise Unsupported("a merge is not byte-level text") from None
    return out


def parse_spec(tokenizer_json: str) -> TokenizerSpec:
    """Extract a :class:`TokenizerSpec` from ``tokenizer.json`` text.

    Raises:
        Unsupported: a component outside the supported set (see the module docstring).
    """
    data = orjson.loads(tokenizer_json)
    model = data.get("model") or {}
    _check_model(model)
    norm = data.get("normalizer")
    if norm is not None and norm.get("type") != "NFC":
        raise Unsupported(f"normalizer {norm.get('type')!r} is not NFC")
    added = check_added_tokens(data.get("added_tokens") or [])
    return TokenizerSpec(
        pattern=_split_pattern(data.get("pre_tokenizer")),
        nfc=norm is not None,
        ranks=_ranks(model["vocab"], added),
        added=added,
        ignore_merges=bool(model.get("ignore_merges")),
        merges=_merges(model.get("merges") or []),
    )


def two_part_state(piece: bytes, ranks: dict[bytes, int]) -> tuple[bytes, bytes] | None:
    """Run the rank-BPE loop (lowest rank first, leftmost on ties) on ``piece`` to its 2-part state.

    Returns ``None`` when the loop gets stuck with more than two parts.

    The proof calls this once per vocabulary token (130k-200k), so pieces of 2 and 3 bytes (a fifth
    of a vocabulary) take the loop's result without running it: 2 bytes are the 2-part state; of 3,
    the lower-ranked pair merges (the left one on a tie), and none when neither is a token.
    """
    n = len(piece)
    if n < 3:
        return (piece[:1], piece[1:]) if n == 2 else None
    get, never = ranks.get, _NEVER
    if n == 3:
        left, right = get(piece[:2], never), get(piece[1:], never)
        if right < left:
            return (piece[:1], piece[1:])
        return None if left == never else (piece[:2], piece[2:])
    parts = [piece[i : i + 1] for i in range(n)]
    pair_ranks = [get(piece[i : i + 2], never) for i in range(n - 1)]
    while len(parts) > 2:
        best = min(pair_ranks)
        if best == never:
            return None
        i = pair_ranks.index(best)  # leftmost lowest
        merged = parts[i] + parts[i + 1]
        parts[i : i + 2] = [merged]
        del pair_ranks[i]
        if i < len(parts) - 1:
            pair_ranks[i] = get(merged + parts[i + 1], never)
        if i > 0:
            pair_ranks[i - 1] = get(parts[i - 1] + merged, never)
    return (parts[0], parts[1])


def prove_rank_bpe(spec: TokenizerSpec) -> None:
    """Check conditions (1)–(3) of the module docstring: rank-order BPE ≡ merges-order BPE.

    Raises:
        Unsupported: a condition fails; the message names the first offending token.
    """
    priority = {pair: i for i, pair in enumerate(spec.merges)}
    used: list[tuple[int, int]] = []
    for token, rank in spec.ranks.items():
        if len(token) < 2:
            continue
        pair = two_part_state(token, spec.ranks)
        if pair is None:
            if not spec.ignore_merges:
                raise Unsupported(f"token {token!r} is not produced by rank BPE and ignore_merges is off")
            continue
        if pair not in priority:
            raise Unsupported(f"rank BPE merges {pair!r} into {token!r} but the merges list lacks it")
        used.append((priority[pair], rank))
    used.sort()
    for (_, r1), (_, r2) in zip(used, used[1:], strict=False):
        if r1 >= r2:
            raise Unsupported(f"merge priority is not increasing with rank (ranks {r1} then {r2})")


def added_splitter(added: dict[str, int]) -> Callable[[str], list[str]]:
    """A function cutting text at added tokens: ``[piece, token, piece, ..., token, piece]``.

    Odd positions are added-token texts, matched leftmost-longest like HF's Aho-Corasick (Python's
    ``re`` tries the alternatives longest first); even positions are the raw pieces between them
    (possibly empty).
    """
    if not added:
        return lambda text: [text]
    alternation = "|".join(re.escape(t) for t in sorted(added, key=len, reverse=True))
    return re.compile(f"({alternation})").split


class FastEncoder:
    """``encode(text)`` ≡ the HF tokenizer's ``encode(text, add_special_tokens=False)``, via tiktoken.

    Build with :func:`build_fast_encoder`. Thread-safe (immutable); tiktoken releases the GIL while
    encoding.

    Attributes:
        encoding: the ``tiktoken.Encoding`` (ranks = HF ids; added tokens as special tokens).
        added: added-token text → id (every one is matched in text, special or not).
    """

    def __init__(self, spec: TokenizerSpec, normalize: Callable[[str], str] | None, name: str = "hf") -> None:
        self.added = dict(spec.added)
        self.encoding = tiktoken.Encoding(
            name=name, pat_str=spec.pattern, mergeable_ranks=spec.ranks, special_tokens=self.added
        )
        self._normalize = normalize if spec.nfc else None
        self._all = frozenset(self.added)
        self.split_added = added_splitter(self.added)
        """``split_added(text)``: ``text`` cut at added tokens as HF cuts it (see :func:`added_splitter`)."""

    def encode_piece(self, piece: str) -> list[int]:
        """Ids of a piece that contains no added token (an even element of :meth:`split_added`)."""
        if self._normalize is not None and not piece.isascii() \
                and not unicodedata.is_normalized("NFC", piece):
            piece = self._normalize(piece)
        return self.encoding.encode_ordinary(piece)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, added tokens recognised; identical to HF (see module docstring).

        Raises:
            UnicodeEncodeError: ``text`` holds lone surrogates (HF cannot take it either).
        """
        if not text.isascii():
            text.encode("utf-8")  # lone surrogates: fail like HF rather than tiktoken's repair
            if self._normalize is not None and not unicodedata.is_normalized("NFC", text):
                return self._encode_pieces(text)
        return self.encoding.encode(text, allowed_special=self._all, disallowed_special=())

    def _encode_pieces(self, text: str) -> list[int]:
        return encode_by_pieces(self, text)


def encode_by_pieces(encoder: Any, text: str) -> list[int]:
    """Ids of ``text`` cut at added tokens (``encoder.split_added``) with each piece encoded on
    its own (``encoder.encode_piece``) and each added token by its id (``encoder.added``)."""
    ids: list[int] = []
    for i, part in enumerate(encoder.split_added(text)):
        if i % 2:
            ids.append(encoder.added[part])
        elif part:
            ids.extend(encoder.encode_piece(part))
    return ids


def tokenizer_backend(tokenizer: Any) -> Any:
    """The ``tokenizers.Tokenizer`` behind a HF fast tokenizer (or the ``tokenizers.Tokenizer``
    itself), else None."""
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
    if backend is None and hasattr(tokenizer, "to_str"):
        backend = tokenizer
    return backend if backend is not None and hasattr(backend, "to_str") else None


def tokenizer_json(tokenizer: Any) -> str | None:
    """The ``tokenizer.json`` text of a HF fast tokenizer (or a ``tokenizers.Tokenizer``), else None."""
    backend = tokenizer_backend(tokenizer)
    return None if backend is None else backend.to_str()


PROOF_VERSION = "rank-bpe-proof-1"
"""Bumped whenever :func:`prove_rank_bpe` changes, so cached verdicts of older proofs are ignored."""


def _proof_marker(proof_cache: Path, tokenizer_text: str) -> Path:
    digest = hashlib.sha256(f"{PROOF_VERSION}\n{tokenizer_text}".encode()).hexdigest()
    return proof_cache / f"{digest}.proven"


_PROVEN: set[bytes] = set()
""":func:`_bpe_digest` of every BPE model proven in this process. The proof reads only the ranks,
the merges and ``ignore_merges``, which tokenizers of one family share whatever their added
tokens (the six Qwen2-vocabulary folders of ../shared/models: one proof instead of six)."""


def _bpe_digest(spec: TokenizerSpec) -> bytes:
    """sha256 of what :func:`prove_rank_bpe` reads (ranks in vocab order, merges, ``ignore_merges``)
    and :data:`PROOF_VERSION`; ~0.05 s for 150k tokens against the proof's 2-4 s."""
    payload = (PROOF_VERSION, list(spec.ranks.items()), spec.merges, spec.ignore_merges)
    return hashlib.sha256(pickle.dumps(payload, protocol=5)).digest()


def _prove_once(spec: TokenizerSpec, text: str, proof_cache: Path | None) -> None:
    """:func:`prove_rank_bpe`, skipped when this process proved the same BPE model already
    (:data:`_PROVEN`) or ``proof_cache`` holds a marker for this exact tokenizer.json (sha256 of the
    text and :data:`PROOF_VERSION`); a marker is written after a successful proof (or a proven twin).

    Raises:
        Unsupported: the proof fails (never remembered).
    """
    marker = _proof_marker(proof_cache, text) if proof_cache is not None else None
    if marker is not None and marker.is_file():
        return
    digest = _bpe_digest(spec)
    if digest not in _PROVEN:
        prove_rank_bpe(spec)
        _PROVEN.add(digest)  # only after a proof that passed
    if marker is not None:
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(PROOF_VERSION + "\n", encoding="utf-8")
        except OSError as exc:
            logger.info("fast tokenizer: cannot record the proof in %s (%s)", proof_cache, exc)


def build_fast_encoder(tokenizer: Any, proof_cache: Path | None = None) -> FastEncoder | None:
    """A :class:`FastEncoder` identical to ``tokenizer`` (HF), or ``None`` when not provably identical.

    Takes ≈ 1–2.5 s for a 130k–200k vocabulary, most of it the BPE proof (every token walked once).
    ``proof_cache``: optional folder remembering successful proofs per tokenizer.json hash, so later
    starts (and other workers) skip the proof; a BPE model this process proved already (another
    tokenizer of the same family: :data:`_PROVEN`) is not proven again. Never raises for an unsupported tokenizer; logs the
    reason at INFO and returns ``None``.
    """
    text = tokenizer_json(tokenizer)
    if text is None:
        logger.info("fast tokenizer: not a tokenizers-backed tokenizer; using Hugging Face")
        return None
    try:
        spec = parse_spec(text)
        _prove_once(spec, text, proof_cache)
        backend = getattr(tokenizer, "backend_tokenizer", None) or tokenizer
        normalizer = getattr(backend, "normalizer", None)
        encoder = FastEncoder(spec, normalizer.normalize_str if normalizer is not None else None)
    except Unsupported as exc:
        logger.info("fast tokenizer: %s; using Hugging Face", exc)
        return None
    except ValueError as exc:  # tiktoken/fancy-regex rejected the pattern
        logger.info("fast tokenizer: tiktoken cannot take this tokenizer (%s); using Hugging Face", exc)
        return None
    return encoder
