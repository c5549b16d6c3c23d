"""Media item hashes as vLLM 0.33 computes them (``MultiModalHasher``; reference multimodal.md §4).

The digest input of one item is ``{"model_id", <modality>: item, "mm_processor_kwargs"?,
"media_io_kwargs"?}`` walked in sorted key order; every value is tagged by kind (none, sequence,
mapping, leaf) and every byte string is framed by its little-endian uint64 length, so differently
shaped values never collide. An image decoded from bytes is hashed as its original file bytes
(with the colour-conversion settings when its mode was converted); a video as its file bytes
(or the sampled frames, when those are smaller) plus the sampling metadata.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

ALGORITHMS = ("blake3", "sha256", "sha512")
"""``--mm-hasher-algorithm`` choices (default blake3)."""


@dataclass(frozen=True, slots=True)
class EncodedImage:
    """An image known by its encoded bytes; ``io_config`` is set when its mode was converted
    (``{"image_mode": "RGB", "rgba_background_color": (255, 255, 255)}``)."""

    data: bytes
    io_config: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class EncodedVideo:
    """A video known by its file bytes (or sampled frames, when smaller) and its sampling
    metadata (``total_num_frames``, ``fps``, ``duration``, ``video_backend``, ``frames_indices``,
    ``do_sample_frames``)."""

    data: bytes | np.ndarray
    metadata: dict[str, Any]


def _framed(b: bytes | memoryview) -> Iterator[bytes | memoryview]:
    # the size in bytes: ``len`` of a memoryview is its first dimension (the frame count of a
    # ``[n, H, W, 3]`` video), vLLM's ``_framed`` uses ``nbytes``
    yield struct.pack("<Q", b.nbytes if isinstance(b, memoryview) else len(b))
    yield b


def _value(obj: Any) -> Iterator[bytes | memoryview]:
    if obj is None:
        yield b"\x00"
    elif isinstance(obj, (list, tuple)):
        yield b"\x01" + struct.pack("<Q", len(obj))
        for elem in obj:
            yield from _value(elem)
    elif isinstance(obj, dict):
        yield b"\x02" + struct.pack("<Q", len(obj))
        for k, v in obj.items():
            yield from _framed(str(k).encode())
            yield from _value(v)
    else:
        yield b"\x03"
        yield from _leaf(obj)


def _item(key: str, obj: Any) -> Iterator[bytes | memoryview]:
    yield from _framed(key.encode())
    yield from _value(obj)


def _leaf(obj: Any) -> Iterator[bytes | memoryview]:
    if isinstance(obj, (bytes, memoryview)):
        yield from _framed(obj)
    elif isinstance(obj, str):
        yield from _framed(obj.encode())
    elif isinstance(obj, (bool, int, float, np.integer, np.floating)):
        yield from _framed(np.array(obj).tobytes())
    elif isinstance(obj, EncodedImage):
        inner: Any = obj.data if not obj.io_config else {"io_config": obj.io_config, "data": obj.data}
        yield from _item("image", inner)
    elif isinstance(obj, EncodedVideo):
        yield from _item("video", obj.data)
    elif isinstance(obj, np.ndarray):
        data: Any = obj.item() if obj.ndim == 0 else np.ascontiguousarray(obj).view(np.uint8).data
        yield from _item("ndarray", {"dtype": obj.dtype.str, "shape": obj.shape, "data": data})
    else:
        raise TypeError(f"cannot hash a {type(obj).__name__}")


def _hasher(algorithm: str) -> Any:
    if algorithm == "blake3":
        from blake3 import blake3

        return blake3()
    if algorithm in ("sha256", "sha512"):
        return hashlib.new(algorithm)
    raise ValueError(f"unknown --mm-hasher-algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")


def hash_item(algorithm: str, model_id: str, modality: str, item: Any, factors: dict[str, Any]) -> str:
    """Lowercase hex digest of one media item (vLLM ``MultiModalHasher.hash_kwargs``).

    ``item``: :class:`EncodedImage`, a ``(EncodedVideo, metadata)`` pair for video, or a uuid
    string; ``factors``: the non-empty ``mm_processor_kwargs`` / ``media_io_kwargs`` entries.

    Raises:
        ValueError: unknown algorithm.
    """
    h = _hasher(algorithm)
    kwargs: dict[str, Any] = {"model_id": model_id, modality: item, **factors}
    for key in sorted(kwargs):
        for chunk in _item(key, kwargs[key]):
            h.update(chunk)
    return str(h.hexdigest())
