"""``kwargs_data`` / ``mm_metadata`` items: msgpack + base64 as vLLM 0.33 writes them
(``mm_serde.encode_mm_kwargs_item`` over ``MsgpackEncoder``; reference multimodal.md §3).

One item is a msgpack map, in the processor's field order, ``{name: {"data": DATA, "field":
[FACTORY, {...}]}}``; a tensor is ``[dtype_name, shape, ExtType(3, raw C-order bytes)]``, a float
list stays a plain list. :func:`decode_item` reads the same layout back (tests, and clients that
want the tensors).
"""

from __future__ import annotations

import mmap
import threading
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
    """A uint8 tensor of ``shape`` that ``write(out, start)`` fills in place when the item is
    encoded, so a large tensor is produced where it is sent instead of being built and copied.

    ``out`` is a C-contiguous uint8 array ``[k, *shape[1:]]`` to receive rows ``start`` to
    ``start + k`` of the tensor; ``start`` and ``k`` are multiples of ``band_rows`` (``0``: only
    the whole tensor, ``start`` 0), so :func:`encode_payload` can write a band at a time into a
    buffer that stays in cache and base64 it from there."""

    shape: tuple[int, ...]
    write: Callable[[np.ndarray, int], Any]
    band_rows: int = 0

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


Segment = tuple[bytes, "np.ndarray | Pending | None"]


def _segments(fields: dict[str, Field]) -> list[Segment]:
    """One item's msgpack document as ``(bytes, tensor)`` pieces in order (the last tensor
    ``None``): the msgpack bytes before each large tensor's raw bytes, which are not copied."""
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
    rest: bytes = msgpack.packb(doc, use_bin_type=True)
    pieces: list[Segment] = []
    for marker, arr in large.items():
        head, sep, rest = rest.partition(bytes([0xD8, RAW_VIEW]) + marker)
        assert sep, "splice marker not found"
        pieces.append((head + _ext_header(arr.nbytes), arr))
    pieces.append((rest, None))
    return pieces


def _document(fields: dict[str, Field]) -> bytes | np.ndarray:
    """One item's msgpack document (bytes, or a uint8 array when large tensors were spliced in)."""
    pieces = _segments(fields)
    if len(pieces) == 1:
        return pieces[0][0]
    return _fill(np.empty(_length(pieces), dtype=np.uint8), pieces)


def _length(pieces: list[Segment]) -> int:
    """Bytes of the document the ``pieces`` make."""
    return sum(len(h) + (a.nbytes if a is not None else 0) for h, a in pieces)


def _fill(out: np.ndarray, pieces: list[Segment]) -> np.ndarray:
    """Write the document of ``pieces`` into ``out`` (1-D uint8 of :func:`_length` bytes), each
    tensor straight into its place (a :class:`Pending` one whole); returns ``out``."""
    pos = 0
    for head, tensor in pieces:
        out[pos:pos + len(head)] = np.frombuffer(head, dtype=np.uint8)
        pos += len(head)
        if isinstance(tensor, Pending):
            tensor.write(out[pos:pos + tensor.nbytes].reshape(tensor.shape), 0)
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
    (a 4000×3000 image: 96 MB) is written once, in chunks, straight into its buffer, and an
    answer sends it from there (:meth:`view`) instead of copying it into one JSON string.

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


def encode_payload(fields: dict[str, Field], whole_bytes: int | None = None) -> B64Payload:
    """:func:`encode_item`, held as a :class:`B64Payload` (the same bytes).

    The document is produced piece by piece into a small buffer that stays in cache (a
    :class:`Pending` tensor a band of about :data:`B64_STEP` bytes at a time) and base64'd from
    there into one :func:`ordinary_pages` buffer, so the raw document never exists whole in
    memory (a 4000×3000 image: 72 MB not written and read back). A document of at most
    ``whole_bytes`` (default :data:`WHOLE_BYTES`) is written whole instead (:func:`_whole_payload`)."""
    pieces = _segments(fields)
    total = _length(pieces)
    if total <= (WHOLE_BYTES if whole_bytes is None else whole_bytes):
        return _whole_payload(pieces, total)
    writer = _B64Writer(total)
    for head, tensor in pieces:
        writer.feed(np.frombuffer(head, dtype=np.uint8))
        if isinstance(tensor, Pending) and tensor.band_rows > 0 and tensor.shape[0] > 0:
            rows, row_bytes = tensor.shape[0], tensor.nbytes // tensor.shape[0]
            step = max(1, B64_STEP // (row_bytes * tensor.band_rows)) * tensor.band_rows
            for start in range(0, rows, step):
                k = min(step, rows - start)
                tensor.write(writer.space(k * row_bytes).reshape((k, *tensor.shape[1:])), start)
                writer.wrote(k * row_bytes)
        elif isinstance(tensor, Pending):
            whole = np.empty(tensor.shape, dtype=np.uint8)
            tensor.write(whole, 0)
            writer.feed(whole.reshape(-1))
        elif tensor is not None:
            writer.feed(tensor.reshape(-1).view(np.uint8))
    return B64Payload(writer.finish())


WHOLE_BYTES = 8 << 20
"""Documents up to this size (a 640×480 image: 1.8 MB; a 16-frame 320×240 video: 3.9 MB) are
written whole into a per-thread scratch buffer that is reused from item to item (its pages stay
mapped) and base64'd in one call into the payload: the banded path's per-band Python steps,
chunk copies and fresh output pages cost more than the encoding itself at this size (measured:
0.9 → ~0.2 ms for 640×480). Larger ones take the banded path, so no 72 MB document exists whole."""

_SCRATCH = threading.local()


def _scratch(n: int) -> np.ndarray:
    """This thread's reusable scratch buffer, ``n`` bytes of it (grown as needed, at most
    :data:`WHOLE_BYTES`; the worker threads each keep one)."""
    buf: np.ndarray | None = getattr(_SCRATCH, "buf", None)
    if buf is None or len(buf) < n:
        buf = _SCRATCH.buf = np.empty(max(n, 1 << 20), dtype=np.uint8)
    return buf[:n]


def _whole_payload(pieces: list[Segment], total: int) -> B64Payload:
    """:func:`encode_payload` of a small document: written whole into :func:`_scratch`, then
    one base64 call whose ``bytes`` the payload holds (the same text as the banded path)."""
    doc = _fill(_scratch(total), pieces)
    return B64Payload(np.frombuffer(pybase64.b64encode(doc.data), dtype=np.uint8))


PLAIN_PAGES_BYTES = 1 << 22
"""From this size on, :func:`ordinary_pages` maps the memory itself instead of asking numpy."""


def ordinary_pages(n: int) -> np.ndarray:
    """A new writable uint8 array of ``n`` bytes (uninitialised content).

    Large ones are an anonymous ``mmap`` in ordinary 4 KiB pages, populated at once (see
    :data:`_POPULATED`) and unmapped when the array goes:
    numpy advises its large buffers into transparent huge pages, and with the kernel's usual
    ``defrag=madvise`` each fault of such a buffer may compact memory synchronously — measured on
    the shared 2-core machine, a cold 4000×3000 render spent a median ~230 ms of system CPU with
    numpy's advice and ~70 ms in ordinary pages (the 96 MB answer is written once, kept in the
    cache, and sent; huge pages buy nothing there)."""
    if n < PLAIN_PAGES_BYTES:
        return np.empty(n, dtype=np.uint8)
    return np.frombuffer(mmap.mmap(-1, n, flags=_POPULATED), dtype=np.uint8)


_POPULATED = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0)
"""Flags of :func:`ordinary_pages`: every page is written anyway, so on Linux the kernel maps them
all at once (``MAP_POPULATE``) instead of one fault per page: 96 MB faulted in and filled in
~40 ms of CPU instead of ~72 ms (measured, 2-core machine)."""


class _B64Writer:
    """Base64 of a byte stream of known length into one output array, through a scratch buffer
    of a few :data:`B64_STEP` (whole 3-byte groups encoded as the scratch fills)."""

    def __init__(self, total: int) -> None:
        self.out = ordinary_pages(4 * ((total + 2) // 3))
        self.pos = 0  # bytes of ``out`` written
        self.scratch = np.empty(0, dtype=np.uint8)
        self.fill = 0  # bytes waiting in ``scratch``

    def space(self, n: int) -> np.ndarray:
        """``n`` bytes of scratch to write the next ``n`` bytes of the stream into."""
        if len(self.scratch) < self.fill + n:
            grown = np.empty(max(self.fill + n, 2 * B64_STEP), dtype=np.uint8)
            grown[:self.fill] = self.scratch[:self.fill]
            self.scratch = grown
        return self.scratch[self.fill:self.fill + n]

    def wrote(self, n: int) -> None:
        """The ``n`` bytes of :meth:`space` are written: encode every whole 3-byte group."""
        self.fill += n
        whole = self.fill - self.fill % 3
        if whole < B64_STEP:
            return
        self._encode(whole)

    def _encode(self, n: int) -> None:
        chunk = pybase64.b64encode(self.scratch[:n].data)
        self.out[self.pos:self.pos + len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
        self.pos += len(chunk)
        left = self.fill - n
        self.scratch[:left] = self.scratch[n:self.fill]
        self.fill = left

    def feed(self, data: np.ndarray) -> None:
        """Append ``data`` (1-D uint8), :data:`B64_STEP` bytes at a time."""
        for start in range(0, len(data), B64_STEP):
            part = data[start:start + B64_STEP]
            self.space(len(part))[:] = part
            self.wrote(len(part))

    def finish(self) -> np.ndarray:
        """The output, after encoding the rest (with padding)."""
        if self.fill:
            self._encode(self.fill)
        assert self.pos == len(self.out), "base64 length mismatch"
        return self.out


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
