"""A second fast prompt encoder, ``fastokens`` (Rust, loaded from the tokenizer's own
``tokenizer.json``), used only where a start-up proof shows it gives Hugging Face's ids.

:func:`build_fastokens_encoder` loads it and encodes every text of :func:`probe_texts` (chat-shaped
text around every added token, whitespace runs, digits, code, NFC/NFD Unicode, emoji, plus
seeded random Unicode) both as a whole and piece by piece (cut at added tokens, as
:class:`~render_service.tokens.prefix_cache.CachedEncoder` encodes), comparing with
``tokenizer.encode(text, add_special_tokens=False)``. One difference → ``None`` and a log line,
and the caller keeps the tiktoken :class:`~render_service.tokens.fast_tokenizer.FastEncoder` (or
Hugging Face). Unlike the tiktoken path this is a test, not a proof by construction: the probes
are what it is known to agree on; ``tests/test_fastokens_encoder.py`` adds real messages and
random text for every shared tokenizer.
"""

from __future__ import annotations

import hashlib
import logging
import random
import weakref
from typing import Any

from .fast_tokenizer import added_splitter, encode_by_pieces, tokenizer_json

logger = logging.getLogger(__name__)


class FastokensEncoder:
    """The :class:`~render_service.tokens.prefix_cache.PieceEncoder` over a ``fastokens.Tokenizer``.

    Attributes:
        native: the ``fastokens.Tokenizer``. added: added-token text → id (HF's added vocabulary).
    """

    def __init__(self, native: Any, added: dict[str, int]) -> None:
        self.native = native
        self.added = dict(added)
        self.split_added = added_splitter(self.added)

    def encode_piece(self, piece: str) -> list[int]:
        """Ids of a piece that contains no added token."""
        return list(self.native.encode(piece, add_special_tokens=False).ids)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` with added tokens recognised (HF ``encode(..., add_special_tokens=False)``)."""
        return list(self.native.encode(text, add_special_tokens=False).ids)

    def encode_pieces(self, text: str) -> list[int]:
        """Ids of ``text`` cut at added tokens and encoded piece by piece (the cached path)."""
        return encode_by_pieces(self, text)


_SAMPLES = (
    "Hello, world! How are you today?",
    "  leading and trailing spaces  \n\n\n\ttabs\t\tand\r\nCRLF\n",
    "Numbers 1234567890 3.14159 -42 1e10 0x1F 2024-12-01 12:30:45",
    "def f(x):\n    return {'a': [1, 2, 3], \"b\": None}  # comment\n",
    "<html><body class=\"x\">&amp; &lt;tag&gt;</body></html>",
    "Ünïcödé: café naïve coöperate Straße ÆØÅ ñ",
    "Cafe\u0301 e\u0301 A\u030a \u1e9b\u0323 (NFD and odd compositions)",
    "日本語のテキスト。中文文本，한국어 텍스트",
    "Emoji 🙂👍🏽👨‍👩‍👧 flags 🇫🇷 and ZWJ",
    "Arabic مرحبا Hebrew שלום Thai สวัสดี Devanagari नमस्ते",
    "I'm you're he'll we've they'd DON'T Can'T",
    "\u00a0non-breaking\u2009thin\u200bzero-width\ufeffbom",
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}",
    "....!!!???,,,;;;:::---___===+++***///\\\\|||~~~```",
    "a" * 300 + " " + "ab" * 200,
)


def probe_texts(added: dict[str, int], seed: int = 15, random_count: int = 200) -> list[str]:
    """Probe texts: :data:`_SAMPLES`, each joined with added tokens in chat style
    (``<tok>sample<tok>``), and ``random_count`` seeded random strings over ASCII, Latin,
    CJK, emoji, combining marks and whitespace."""
    texts = list(_SAMPLES)
    tokens = sorted(added)
    for i, token in enumerate(tokens[:400]):
        sample = _SAMPLES[i % len(_SAMPLES)]
        texts.append(f"{token}{sample}{token}\n{sample}")
    rng = random.Random(seed)
    ranges = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x3040, 0x30FF), (0x4E00, 0x4FFF),
              (0x1F300, 0x1F64F), (0x0600, 0x06FF), (0x0E00, 0x0E7F)]
    spaces = [" ", "  ", "\n", "\n\n", "\t", "\r\n"]
    for _ in range(random_count):
        parts = []
        for _ in range(rng.randint(1, 40)):
            if rng.random() < 0.2:
                parts.append(rng.choice(spaces))
            elif tokens and rng.random() < 0.05:
                parts.append(rng.choice(tokens))
            else:
                lo, hi = rng.choice(ranges)
                parts.append("".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 8))))
        texts.append("".join(parts))
    return texts


def first_mismatch(encoder: FastokensEncoder, tokenizer: Any, texts: list[str]) -> str | None:
    """The first text whose ids (whole, or piece by piece) differ from HF's, else ``None``."""
    for text in texts:
        want = list(tokenizer.encode(text, add_special_tokens=False))
        if encoder.encode(text) != want or encoder.encode_pieces(text) != want:
            return text
    return None


_LOADED: weakref.WeakValueDictionary[bytes, FastokensEncoder] = weakref.WeakValueDictionary()
"""sha256 of a ``tokenizer.json`` text → a live encoder that passed its probes over it: another
tokenizer object of the same file (a bundle loaded again, the same tokenizer in two folders)
reuses its ``fastokens.Tokenizer`` (1.2-4 CPU-s to load; immutable, thread-safe) and runs the
probes against itself. Weak: an encoder no bundle uses is freed as before."""


def build_fastokens_encoder(tokenizer: Any) -> FastokensEncoder | None:
    """A :class:`FastokensEncoder` for ``tokenizer`` when ``fastokens`` is installed, loads its
    ``tokenizer.json`` and agrees with it on every probe (:func:`probe_texts`); else ``None``
    (logged at INFO). The loaded ``fastokens.Tokenizer`` is shared with a live encoder of the same
    ``tokenizer.json`` text (:data:`_LOADED`); the probes run for every tokenizer. Never raises."""
    text = tokenizer_json(tokenizer)
    if text is None:
        return None
    try:
        import fastokens
    except ImportError:
        logger.info("fastokens: not installed")
        return None
    added = dict(tokenizer.get_added_vocab()) if hasattr(tokenizer, "get_added_vocab") else {}
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    try:
        twin = _LOADED.get(digest)
        native = twin.native if twin is not None else fastokens.Tokenizer.from_json_str(text)
        encoder = FastokensEncoder(native, added)
        bad = first_mismatch(encoder, tokenizer, probe_texts(added))
    except Exception as exc:  # noqa: BLE001 - any failure of the optional engine: keep the others
        logger.info("fastokens: cannot use it for this tokenizer (%s: %s)", type(exc).__name__, exc)
        return None
    if bad is not None:
        logger.info("fastokens: differs from Hugging Face on start-up probe %r; not using it", bad[:80])
        return None
    logger.info("fastokens: identical to Hugging Face on the start-up probes; using it")
    _LOADED[digest] = encoder
    return encoder
