"""The opaque, client-carried ``stream_state`` string: encode, decode, validate, sign.

Format (version 1)::

    "1" FLAG "." base64url(BODY) [ "." base64url(HMAC-SHA256(key, HEAD "." BODY)[:16]) ]

``FLAG`` is ``j`` (BODY is the orjson of :class:`~render_service.protocol.derender.StreamState`,
defaults left out) or ``z`` (the same, zlib-compressed, used only when smaller). Signed when
``keys`` is non-empty (the pipeline's ``state_keys``: configured keys, or the key derived from the
configuration fingerprint): signed with the first key, any key accepted (key rotation); unsigned
states are then rejected. With no keys (``--allow-unsigned-stream-state``) states are unsigned
and a signed state is accepted without verification being possible (the signature is ignored).

Decoding never raises anything but :class:`~render_service.errors.InvalidStreamState` (400):
malformed text, wrong version, bad signature, oversized, failed strict validation, or a state
made under another configuration (``cfg`` ≠ :func:`render_service.fingerprint.config_fingerprint` prefix).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import threading
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import orjson
from pydantic import ValidationError

from ..errors import InvalidStreamState
from ..fingerprint import FINGERPRINT_CHARS
from ..protocol.derender import StreamState

VERSION = "1"
#: Largest accepted encoded state and decompressed body, in bytes.
MAX_STATE_BYTES = 4 << 20
_SIG_BYTES = 16
_SIG_CHARS = 22  # unpadded base64url of the 16 signature bytes
#: Bodies up to this many bytes are sent uncompressed (``j``): zlib's set-up per call (about
#: 20 µs to compress, 6 µs to inflate) costs more than the few hundred bytes it saves on a
#: typical state (the parser's and detokenizer's small dicts); larger ones (an open tool call's
#: arguments, Responses' items) are compressed.
COMPRESS_OVER = 512
#: zlib level of compressed bodies: a Responses state carries the output text so far, and level 6
#: spends about twice level 3's CPU on it for 12 % fewer bytes (1,000 tokens: 0.197 vs 0.169 ms
#: per chunk, 1,460 vs 1,570 state bytes; 4,000 tokens: 0.633 vs 0.355 ms, 3,821 vs 4,353 bytes;
#: ``python -m benchmarks.responses_state_size``).
COMPRESS_LEVEL = 3


_URLSAFE = bytes.maketrans(b"+/", b"-_")


def _b64_bytes(data: bytes) -> bytes:
    """Unpadded base64url of ``data`` as ASCII bytes (``base64.urlsafe_b64encode`` without its
    wrapper calls)."""
    return binascii.b2a_base64(data, newline=False).translate(_URLSAFE).rstrip(b"=")


def _b64(data: bytes) -> str:
    """:func:`_b64_bytes` as text."""
    return _b64_bytes(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


_PADS: dict[str, tuple[Any, Any]] = {}


def _pads(key: str) -> tuple[Any, Any]:
    """SHA-256 states after the HMAC inner and outer key pads of ``key`` (RFC 2104), made once
    per key: each signature then hashes only the message (about 1 µs instead of the 6 µs of
    OpenSSL's one-shot HMAC, which sets up the key schedule every call)."""
    pads = _PADS.get(key)
    if pads is None:
        raw = key.encode("utf-8")
        if len(raw) > 64:  # SHA-256's block size
            raw = hashlib.sha256(raw).digest()
        raw = raw.ljust(64, b"\0")
        pads = (hashlib.sha256(bytes(b ^ 0x36 for b in raw)), hashlib.sha256(bytes(b ^ 0x5C for b in raw)))
        if len(_PADS) < 64:  # a server has one to a few keys; tests many
            _PADS[key] = pads
    return pads


def hmac_sha256(key: str, message: bytes) -> bytes:
    """HMAC-SHA256 of ``message`` under ``key`` (UTF-8): the bytes of
    ``hmac.digest(key.encode(), message, "sha256")``, from precomputed pads (:func:`_pads`)."""
    inner_pad, outer_pad = _pads(key)
    inner = inner_pad.copy()
    inner.update(message)
    outer = outer_pad.copy()
    outer.update(inner.digest())
    return outer.digest()  # type: ignore[no-any-return]


def _sign(key: str, message: str) -> str:
    return _b64(hmac_sha256(key, message.encode("ascii"))[:_SIG_BYTES])


_FIELDS = tuple(StreamState.model_fields.items())
_DEFAULTS = {name: f.get_default(call_default_factory=True) for name, f in _FIELDS}


def state_body(state: StreamState) -> dict[str, Any]:
    """The fields of ``state`` that differ from their defaults, as plain values: what
    ``state.model_dump(exclude_defaults=True)`` gives (the fields are JSON values or plain
    dicts/lists of them), read straight from the instance (a third of the time)."""
    values = state.__dict__
    return {name: values[name] for name, default in _DEFAULTS.items() if values[name] != default}


_HEADS = {"j": f"{VERSION}j.".encode(), "z": f"{VERSION}z.".encode()}


def encode_state(state: StreamState, keys: Sequence[str] = ()) -> str:
    """Serialize ``state`` to the opaque string (signed with ``keys[0]`` when keys are given).

    Built as bytes and decoded once (the signature is over the same ASCII bytes as the text)."""
    body = orjson.dumps(state_body(state))
    packed = zlib.compress(body, COMPRESS_LEVEL) if len(body) > COMPRESS_OVER else body
    flag = "z" if len(packed) < len(body) else "j"
    message = _HEADS[flag] + _b64_bytes(packed if flag == "z" else body)
    if keys:
        message += b"." + _b64_bytes(hmac_sha256(keys[0], message)[:_SIG_BYTES])
    return message.decode("ascii")


def _check_signature(message: str, signature: str | None, keys: Sequence[str]) -> None:
    if not keys:
        return
    if signature is None:
        if not _whole_body(message):
            raise InvalidStreamState(_CUT)
        raise InvalidStreamState("invalid stream_state: unsigned, but this server requires signed states")
    if len(signature) != _SIG_CHARS:
        raise InvalidStreamState(_CUT)
    if not any(hmac.compare_digest(_sign(k, message), signature) for k in keys):
        raise InvalidStreamState("invalid stream_state: signature does not match (tampered or foreign key)")


_CUT = (
    "invalid stream_state: incomplete (cut short or changed: send back exactly the string the "
    "previous call returned)"
)


def _whole_body(message: str) -> bool:
    """Whether an unsigned ``HEAD.BODY`` holds a whole state body (a JSON object): a signed state
    cut anywhere before its signature loses the signature too, and must not read as "unsigned"."""
    head, _, payload = message.partition(".")
    try:
        return isinstance(orjson.loads(_body(head[1], payload)), dict)
    except (InvalidStreamState, orjson.JSONDecodeError):
        return False


def _body(flag: str, payload: str) -> bytes:
    try:
        raw = _unb64(payload)
    except (binascii.Error, ValueError):
        raise InvalidStreamState("invalid stream_state: not base64url") from None
    if flag == "j":
        return raw
    inflater = zlib.decompressobj()
    try:
        body = inflater.decompress(raw, MAX_STATE_BYTES)
    except zlib.error:
        raise InvalidStreamState("invalid stream_state: corrupt compressed body") from None
    if inflater.unconsumed_tail:
        raise InvalidStreamState("invalid stream_state: body too large")
    return body


def decode_state(text: object, fingerprint: str, keys: Sequence[str] = ()) -> StreamState:
    """Parse and validate an opaque state string.

    Raises:
        InvalidStreamState: malformed, wrong version, unsigned/bad signature when keys are
            configured, strict validation failed, or made under another configuration.
    """
    if not isinstance(text, str):
        raise InvalidStreamState(
            "invalid stream_state: expected the opaque string returned by the previous call"
        )
    if len(text) > MAX_STATE_BYTES:
        raise InvalidStreamState("invalid stream_state: too large")
    parts = text.split(".")
    if not text.isascii() or len(parts) not in (2, 3) or len(parts[0]) != 2:
        raise InvalidStreamState("invalid stream_state: malformed")
    head, payload = parts[0], parts[1]
    if head[0] != VERSION or head[1] not in "jz":
        raise InvalidStreamState(
            f"invalid stream_state: unsupported version {head!r} (this server writes {VERSION!r})"
        )
    try:
        _check_signature(f"{head}.{payload}", parts[2] if len(parts) == 3 else None, keys)
    except InvalidStreamState:
        if _foreign_cfg(head[1], payload, fingerprint):
            raise _other_configuration() from None
        raise
    try:
        fields = orjson.loads(_body(head[1], payload))
    except orjson.JSONDecodeError:
        raise InvalidStreamState(_CUT) from None  # an unsigned state cut short
    try:
        state = StreamState.model_validate(fields, strict=True)
    except (ValidationError, TypeError) as exc:
        raise InvalidStreamState(f"invalid stream_state: {type(exc).__name__}") from None
    if state.cfg != fingerprint[:FINGERPRINT_CHARS]:
        raise _other_configuration()
    return state


class StateCache:
    """The states this process handed out most recently, by their exact ``stream_state`` text.

    A stream's next chunk usually comes back to the replica that answered the last one (one
    keep-alive connection, or sticky routing), with the very string that replica returned: the
    state is then taken from here instead of being decoded, verified and validated again (and,
    as it is removed when taken, advanced without a copy). Only strings this process made are
    keys, so a hit is exactly what decoding that string would give; anything else (another
    replica's state, a retry of a chunk whose answer was lost, a tampered string) misses and is
    decoded as before. Bounded to ``max_entries`` (least recently stored dropped first); states
    longer than ``max_chars`` are not kept. Thread-safe.
    """

    def __init__(self, max_entries: int = 1024, max_chars: int = 16384) -> None:
        self.max_entries = max_entries
        self.max_chars = max_chars
        self._map: OrderedDict[str, StreamState] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, text: str, state: StreamState) -> None:
        """Keep ``state`` as the decoding of ``text`` (the caller hands ``state`` over: it must
        not be changed afterwards)."""
        if self.max_entries <= 0 or len(text) > self.max_chars:
            return
        with self._lock:
            self._map[text] = state
            while len(self._map) > self.max_entries:
                self._map.popitem(last=False)

    def take(self, text: object) -> StreamState | None:
        """The state stored for ``text``, removed (the caller owns it), or ``None``."""
        if not isinstance(text, str):
            return None
        with self._lock:
            return self._map.pop(text, None)

    def __contains__(self, text: object) -> bool:
        return text in self._map

    def __len__(self) -> int:
        return len(self._map)


def _other_configuration() -> InvalidStreamState:
    return InvalidStreamState(
        "invalid stream_state: made under another server configuration "
        "(model, template or parsers differ)"
    )


def _foreign_cfg(flag: str, payload: str, fingerprint: str) -> bool:
    """Whether a state that failed verification names another configuration: without configured
    keys the signing key is derived from the fingerprint, so a state from a differently configured
    replica fails its signature; say why instead of "signature does not match". Only the ``cfg``
    string is read (bounded body, nothing else trusted)."""
    try:
        cfg = orjson.loads(_body(flag, payload)).get("cfg")
    except (InvalidStreamState, orjson.JSONDecodeError, AttributeError):
        return False
    return isinstance(cfg, str) and cfg != fingerprint[:FINGERPRINT_CHARS]
