"""The answer of a render with media tensors: the JSON around each item's base64, sent in pieces.

A multimodal render's answer is mostly its ``features.kwargs_data`` entries (a 4000×3000 image:
96 MB of base64 in a JSON of ~100 KB more). Serialising it the ordinary way copies every entry
into one new JSON buffer (orjson) before the socket copies it again; for a cached item (a
conversation's second turn) that copy is most of the request's CPU. Here the entries
(:class:`~render_service.render.multimodal.serde.B64Payload`) are swapped for markers, the rest
is serialised with orjson as usual, and the answer is sent as the JSON pieces between the
markers and the entries' own buffers, one ASGI body message each (``Content-Length`` is the sum).
The bytes on the wire are exactly those of ``orjson.dumps(result, default=json_default)``.
"""

from __future__ import annotations

import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ..render.multimodal.serde import B64Payload

_MARK = "mm-payload-" + secrets.token_hex(16)
"""Marker prefix of this process (random, so a request cannot contain it by chance or intent)."""

Piece = bytes | memoryview

_CORK: int | None = getattr(socket, "TCP_CORK", None)
"""Linux's ``TCP_CORK`` (``None`` elsewhere: :func:`corked` then does nothing)."""


def body_pieces(result: Any) -> list[Piece] | None:
    """The answer to ``result`` as pieces whose concatenation is its JSON, or ``None`` when it
    holds no :class:`B64Payload` in ``features.kwargs_data`` (then serialise it as usual)."""
    feats = result.get("features") if isinstance(result, dict) else None
    kwargs = feats.get("kwargs_data") if isinstance(feats, dict) else None
    if not isinstance(feats, dict) or not isinstance(kwargs, dict):
        return None
    payloads: list[B64Payload] = []
    swapped: dict[Any, Any] = {}
    for modality, items in kwargs.items():
        if not isinstance(items, list):
            swapped[modality] = items
            continue
        row: list[Any] = []
        for item in items:
            if isinstance(item, B64Payload):
                row.append(f"{_MARK}-{len(payloads)}")
                payloads.append(item)
            else:
                row.append(item)
        swapped[modality] = row
    if not payloads:
        return None
    try:
        doc = orjson.dumps({**result, "features": {**feats, "kwargs_data": swapped}},
                           option=orjson.OPT_NON_STR_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        return None  # nested too deeply or another odd value: the ordinary path answers it
    pieces: list[Piece] = []
    pos = 0
    for i, payload in enumerate(payloads):
        marker = f'"{_MARK}-{i}"'.encode()
        at = doc.find(marker, pos)
        if at < 0:
            return None
        pieces.append(doc[pos:at + 1])  # up to and with the opening quote
        pieces.append(payload.view())
        pos = at + len(marker) - 1  # from the closing quote on
    pieces.append(doc[pos:])
    return pieces


class PiecesResponse(Response):
    """A 200 ``application/json`` answer written as the given pieces, in order, without joining
    them (uvicorn writes each buffer to the socket as it is)."""

    media_type = "application/json"

    def __init__(self, pieces: list[Piece]) -> None:
        self.pieces = pieces
        self.status_code = 200
        self.background = None
        self.body = b""
        self.init_headers({"content-length": str(sum(len(p) for p in pieces))})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        last = len(self.pieces) - 1
        for i, piece in enumerate(self.pieces):
            await send({"type": "http.response.body", "body": piece, "more_body": i < last})


def _socket_of(send: Send) -> Any:
    """The connection's socket behind uvicorn's ``send`` (its ``RequestResponseCycle.send``, whose
    cycle holds the asyncio transport), or ``None`` for any other ``send`` (a wrapper, a test
    transport, another server)."""
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    get_extra_info = getattr(transport, "get_extra_info", None)
    return get_extra_info("socket") if callable(get_extra_info) else None


@contextmanager
def corked(send: Send) -> Iterator[None]:
    """Hold the answer's partial TCP segments (``TCP_CORK``) while its pieces are written, and
    push them when it ends (also on error), so the head, the JSON around each payload and the
    payloads leave in full-size segments instead of one small segment per piece.

    Without it a :class:`PiecesResponse` (head, JSON head, payload, JSON tail: four writes) sends
    a small segment per piece, each waking the reader; with it the server's CPU for sending a
    cached 640×480 answer (2.4 MB over loopback) fell by ~0.15 ms (README "Multimodal render").
    The bytes are unchanged. ``send`` without a socket behind it (:func:`_socket_of`): no-op;
    a socket that refuses the option (closed, not TCP) is left as it is."""
    sock = _socket_of(send) if _CORK is not None else None
    try:
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, _CORK, 1)
    except (OSError, AttributeError, ValueError):  # ValueError: uvloop's socket of a closed connection
        sock = None
    try:
        yield
    finally:
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, _CORK, 0)
            except (OSError, ValueError):
                pass  # the connection is gone (uvloop: "negative file descriptor"): nothing to push


def media_response(result: Any) -> Response | None:
    """:class:`PiecesResponse` of a render result with media tensors, else ``None``."""
    pieces = body_pieces(result)
    return None if pieces is None else PiecesResponse(pieces)
