"""``kwargs_data`` / ``mm_metadata`` items: msgpack + base64 as vLLM 0.33 writes them
(``mm_serde.encode_mm_kwargs_item`` over ``MsgpackEncoder``; reference multimodal.md §3).

One item is a msgpack map, in the processor's field order, ``{name: {"data": DATA, "field":
[FACTORY, {...}]}}``; a tensor is ``[dtype_name, shape, ExtType(3, raw C-order bytes)]``, a float
list stays a plain list. :func:`decode_item` reads the same layout back (tests, and clients that
want the tensors).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np
import pybase64

RAW_VIEW = 3
"""msgpack ext type of an inline tensor buffer (vLLM ``CUSTOM_TYPE_RAW_VIEW``)."""

_DTYPES = {
    "uint8": np.uint8,
    "int64": np.int64,
    "float32": np.float32,
    "float64": np.float64,
    "int32": np.int32,
    "float16": np.float16,
}


@dataclass(frozen=True, slots=True)
class BFloat16:
    """A bfloat16 tensor given as its raw 2-byte words (numpy has no bfloat16)."""

    words: np.ndarray  # uint16, any shape (0-d allowed)


@dataclass(frozen=True, slots=True)
class Pending:
    """A uint8 tensor of ``shape`` that ``write(out)`` fills in place when the item is encoded
    (``out``: C-contiguous uint8 array of that shape inside the item's buffer), so a large tensor
    is produced where it is sent instead of being built and then copied."""

    shape: tuple[int, ...]
    write: Callable[[np.ndarray], Any]

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor."""
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True, slots=True)
class Field:
    """One processed field: ``data`` (ndarray, :class:`BFloat16`, float list) and its factory.

    ``kind``: ``"batched"`` or ``"flat"`` (with ``slices`` ``[[start, stop, None]]`` over ``dim``).
    """

    data: Any
    kind: str
    keep_on_cpu: bool
    slices: list[list[Any]] | None = None
    dim: int = 0


def bfloat16(values: np.ndarray) -> BFloat16:
    """Round float32 values to bfloat16 (round-to-nearest-even, as torch ``.to(bfloat16)``)."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return BFloat16(rounded.astype(np.uint16))


def _tensor(data: Any) -> Any:
    if isinstance(data, BFloat16):
        w = data.words
        return ["bfloat16", list(w.shape), msgpack.ExtType(RAW_VIEW, w.astype("<u2").tobytes())]
    if isinstance(data, np.ndarray):
        little = data if data.dtype.byteorder in "<|=" else data.astype(data.dtype.newbyteorder("<"))
        return [data.dtype.name, list(data.shape), msgpack.ExtType(RAW_VIEW, little.tobytes(order="C"))]
    if isinstance(data, list):
        return [_tensor(d) for d in data]
    return data


def _factory(f: Field) -> list[Any]:
    if f.kind == "flat":
        return ["flat", {"keep_on_cpu": f.keep_on_cpu, "slices": f.slices, "dim": f.dim}]
    return ["batched", {"keep_on_cpu": f.keep_on_cpu}]


SPLICE_BYTES = 1 << 16
"""Tensors at least this large are written once into the output buffer instead of being copied
by ``tobytes`` and again by msgpack (a 4000×3000 image is 72 MB of patches)."""


_FIXEXT = {1: 0xD4, 2: 0xD5, 4: 0xD6, 8: 0xD7, 16: 0xD8}


def _ext_header(n: int) -> bytes:
    """msgpack's shortest header of an ext (type :data:`RAW_VIEW`) of ``n`` bytes, as msgpack writes it."""
    if n in _FIXEXT:
        return bytes([_FIXEXT[n], RAW_VIEW])
    if n < 1 << 8:
        return bytes([0xC7, n, RAW_VIEW])
    if n < 1 << 16:
        return b"\xc8" + n.to_bytes(2, "big") + bytes([RAW_VIEW])
    return b"\xc9" + n.to_bytes(4, "big") + bytes([RAW_VIEW])


def _document(fields: dict[str, Field]) -> bytes | np.ndarray:
    """One item's msgpack document (bytes, or a uint8 array when large tensors were spliced in)."""
    large: dict[bytes, np.ndarray | Pending] = {}
    doc = {}
    for name, f in fields.items():
        data = f.data
        spliced = isinstance(data, Pending) or (
            isinstance(data, np.ndarray) and data.nbytes >= SPLICE_BYTES and data.dtype.byteorder in "<|="
        )
        if spliced:
            marker = b"\x00mm-splice_" + len(large).to_bytes(5, "little")  # 16 bytes → fixext16
            large[marker] = data if isinstance(data, Pending) else np.ascontiguousarray(data)
            dtype = "uint8" if isinstance(data, Pending) else data.dtype.name
            doc[name] = {"data": [dtype, list(data.shape), msgpack.ExtType(RAW_VIEW, marker)],
                         "field": _factory(f)}
        else:
            doc[name] = {"data": _tensor(data), "field": _factory(f)}
    packed: bytes = msgpack.packb(doc, use_bin_type=True)
    if not large:
        return packed
    pieces: list[tuple[bytes, np.ndarray | Pending | None]] = []
    rest = packed
    for marker, arr in large.items():
        head, sep, rest = rest.partition(bytes([0xD8, RAW_VIEW]) + marker)
        assert sep, "splice marker not found"
        pieces.append((head + _ext_header(arr.nbytes), arr))
    pieces.append((rest, None))
    out = np.empty(sum(len(h) + (a.nbytes if a is not None else 0) for h, a in pieces), dtype=np.uint8)
    pos = 0
    for head, tensor in pieces:
        out[pos:pos + len(head)] = np.frombuffer(head, dtype=np.uint8)
        pos += len(head)
        if isinstance(tensor, Pending):
            tensor.write(out[pos:pos + tensor.nbytes].reshape(tensor.shape))
        elif tensor is not None:
            out[pos:pos + tensor.nbytes] = tensor.reshape(-1).view(np.uint8)
        if tensor is not None:
            pos += tensor.nbytes
    return out


def encode_item(fields: dict[str, Field]) -> str:
    """base64 (standard, padded) of one item's msgpack document, byte-identical to vLLM's.

    Large tensors (ndarrays of at least :data:`SPLICE_BYTES`, and every :class:`Pending`) are
    written once into the document buffer (a numpy array, so the allocator's large-page advice
    applies) instead of being copied by ``tobytes`` and again by msgpack."""
    doc = _document(fields)
    return str(pybase64.b64encode_as_string(doc if isinstance(doc, bytes) else doc.data))


class B64Payload:
    """An item's base64 text (ASCII) held in a uint8 array instead of a ``str``: a large item
    (a 4000×3000 image: 96 MB) is written once into memory the allocator maps in large pages,
    and an answer sends it from there (:meth:`view`) instead of copying it into one JSON string.

    ``str(payload)`` is the text (a copy); :func:`json_default` lets ``orjson.dumps`` write it
    as that string wherever an answer is serialised the ordinary way."""

    __slots__ = ("buf",)

    def __init__(self, buf: np.ndarray) -> None:
        self.buf = buf

    def __len__(self) -> int:
        return int(self.buf.nbytes)

    def __str__(self) -> str:
        return self.buf.tobytes().decode("ascii")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, B64Payload):
            return bool(np.array_equal(self.buf, other.buf))
        if isinstance(other, str):
            return str(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def view(self) -> memoryview:
        """The base64 bytes, without a copy."""
        return self.buf.data


def json_default(value: Any) -> Any:
    """``orjson.dumps(..., default=json_default)``: a :class:`B64Payload` as its string."""
    if isinstance(value, B64Payload):
        return str(value)
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


B64_STEP = 3 << 16
"""Input bytes per base64 call of :func:`encode_payload` (a multiple of 3, so only the last
chunk pads); its 256 KiB of output stays in cache on the way into the payload."""


def encode_payload(fields: dict[str, Field]) -> B64Payload:
    """:func:`encode_item`, held as a :class:`B64Payload` (the same bytes).

    The base64 is written chunk by chunk into one ``np.empty`` buffer: a fresh 96 MB ``bytes``
    costs a page fault per 4 KiB page, numpy's large buffers are advised into huge pages."""
    doc = _document(fields)
    src = memoryview(doc if isinstance(doc, bytes) else doc.data).cast("B")
    n = len(src)
    out = np.empty(4 * ((n + 2) // 3), dtype=np.uint8)
    pos = 0
    for start in range(0, n, B64_STEP):
        chunk = pybase64.b64encode(src[start:start + B64_STEP])
        out[pos:pos + len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
        pos += len(chunk)
    return B64Payload(out)


def _decode_data(data: Any) -> Any:
    if (
        isinstance(data, list)
        and len(data) == 3
        and isinstance(data[0], str)
        and isinstance(data[2], msgpack.ExtType)
    ):
        if data[2].code != RAW_VIEW:
            raise ValueError(f"unsupported msgpack ext type {data[2].code}")
        if data[0] == "bfloat16":
            return BFloat16(np.frombuffer(data[2].data, dtype="<u2").reshape(data[1]))
        return np.frombuffer(data[2].data, dtype=np.dtype(_DTYPES[data[0]]).newbyteorder("<")).reshape(
            data[1]
        )
    if isinstance(data, list):
        return [_decode_data(d) for d in data]
    return data


def decode_item(b64: str) -> dict[str, Field]:
    """Read one ``kwargs_data`` / ``mm_metadata`` entry back into fields.

    Raises:
        ValueError: not base64/msgpack, an unknown dtype or ext type, or an unknown factory.
    """
    try:
        doc = msgpack.unpackb(pybase64.b64decode(b64, validate=True), raw=False, strict_map_key=False)
    except Exception as exc:
        raise ValueError(f"not a msgpack item: {exc}") from None
    out = {}
    for name, spec in doc.items():
        kind, opts = spec["field"]
        if kind not in ("batched", "flat"):
            raise ValueError(f"unknown field factory {kind!r}")
        out[name] = Field(
            _decode_data(spec["data"]),
            kind,
            bool(opts["keep_on_cpu"]),
            opts.get("slices"),
            int(opts.get("dim", 0)),
        )
    return out
