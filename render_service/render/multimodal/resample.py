"""Pillow's bicubic resize along the height only, byte for byte, compiled with numba.

When ``smart_resize`` keeps the width and changes the height (a 4000×3000 photo → 4000×3008 on
Qwen3-VL, a 320×240 video → 320×256), Pillow runs only its vertical 8-bit pass
(``libImaging/Resample.c``: ``precompute_coeffs``, ``normalize_coeffs_8bpc``,
``ImagingResampleVertical_8bpc``), one scalar multiply-add per tap, byte and output row: ~75 ms
of a 12 M pixel image. This module computes the same integers (the same double-precision
coefficients, the same 22-bit fixed-point rounding, the same ``1 << 21`` rounding bias and
clamp) with the loops compiled by numba, a row at a time over the interleaved bytes (SIMD), and
writes the colour planes the patch layout wants in the same pass. The output is byte-identical
to ``Image.resize((w, h'), BICUBIC)`` (``tests/test_multimodal_resample.py`` checks it on every
test medium and on random sizes); it is an optional extra (``render-service[fast]``, numba):
without numba (or until the kernels are compiled, :func:`start`), :func:`ready` is false
and the callers use Pillow.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import warnings
from typing import Any

import numpy as np

PRECISION_BITS = 32 - 8 - 2
"""Pillow's fixed-point precision of 8-bit resampling coefficients."""
BICUBIC_SUPPORT = 2.0

_KERNELS: dict[str, Any] = {}
_LOCK = threading.Lock()
_DONE = threading.Event()


def _bicubic(x: float) -> float:
    """Pillow's ``bicubic_filter`` (a = -0.5)."""
    a = -0.5
    if x < 0.0:
        x = -x
    if x < 1.0:
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    if x < 2.0:
        return (((x - 5) * x + 8) * x - 4) * a
    return 0.0


@functools.lru_cache(maxsize=64)
def coefficients(in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Pillow's ``precompute_coeffs`` + ``normalize_coeffs_8bpc`` for BICUBIC over the whole
    axis: ``(bounds [out, 2] int32 (first input index, taps), kk [out, ksize] int32)``, read-only
    (cached per size pair: a video's frames, a camera's photos share them)."""
    scale = in_size / out_size
    filterscale = max(scale, 1.0)
    support = BICUBIC_SUPPORT * filterscale
    ksize = int(math.ceil(support)) * 2 + 1
    bounds = np.zeros((out_size, 2), dtype=np.int32)
    kk = np.zeros((out_size, ksize), dtype=np.int32)
    one = float(1 << PRECISION_BITS)
    ss = 1.0 / filterscale
    for xx in range(out_size):
        center = (xx + 0.5) * scale
        xmin = max(int(center - support + 0.5), 0)
        xmax = min(int(center + support + 0.5), in_size) - xmin
        k = [_bicubic((x + xmin - center + 0.5) * ss) for x in range(xmax)]
        ww = 0.0
        for w in k:
            ww += w
        for x, w in enumerate(k):
            if ww != 0.0:
                w /= ww
            kk[xx, x] = int(-0.5 + w * one) if w < 0 else int(0.5 + w * one)
        bounds[xx] = xmin, xmax
    bounds.flags.writeable = kk.flags.writeable = False
    return bounds, kk


def _compile() -> dict[str, Any]:
    from . import _resample_kernels as kernels  # imports numba (ImportError without it)

    return {"planes": kernels.planes, "interleaved": kernels.interleaved, "split": kernels.split}


def _build() -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numba's notes on its cache location
            kernels = _compile()
            _warm(kernels)
        _KERNELS.update(kernels)
    except ImportError:
        pass  # no numba: Pillow resizes (the same bytes)
    except Exception:  # noqa: BLE001 - e.g. numba cannot compile or cache here: Pillow resizes
        logging.getLogger(__name__).warning("resize kernel not compiled; Pillow resizes", exc_info=True)
    finally:
        _DONE.set()


def _warm(kernels: dict[str, Any]) -> None:
    """Compile the kernels for the array types the callers pass (:func:`_prepared`: read-only
    sources and coefficients, writable outputs)."""
    src, bounds, kk = _prepared(np.zeros((3, 2, 4), dtype=np.uint8), 4)
    kernels["planes"](src, 4, bounds, kk, np.empty((3, 4, 2), dtype=np.uint8))
    kernels["interleaved"](src, bounds, kk, np.empty((4, 8), dtype=np.uint8))
    kernels["split"](src, 4, np.empty((3, 3, 2), dtype=np.uint8))


def start() -> None:
    """Compile the kernels in a background thread (a few seconds the first time, well under one
    from numba's on-disk cache); until they are ready :func:`ready` is false and the callers use
    Pillow, which gives the same bytes."""
    with _LOCK:
        if not _KERNELS.get("started"):
            _KERNELS["started"] = True
            threading.Thread(target=_build, name="resample-jit", daemon=True).start()


def wait(timeout: float | None = None) -> bool:
    """Start the compile if needed and wait for it; ``True`` when the kernels are usable (numba
    installed)."""
    start()
    _DONE.wait(timeout)
    return ready()


def ready() -> bool:
    """``True`` once the kernels are compiled (never, without numba)."""
    return "planes" in _KERNELS


def _rows(pixels: np.ndarray) -> np.ndarray:
    """``pixels`` ``[H, W, C]`` as read-only ``[H, W·C]`` rows (one array type for every
    caller: one compiled specialisation)."""
    h, w, c = pixels.shape
    rows = np.ascontiguousarray(pixels).reshape(h, w * c).view()
    rows.flags.writeable = False
    return rows


def _prepared(pixels: np.ndarray, height: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``pixels`` ``[H, W, C]`` as :func:`_rows` and the coefficients to ``height`` rows."""
    bounds, kk = coefficients(pixels.shape[0], height)
    return _rows(pixels), bounds, kk


def _kernel(name: str) -> Any:
    if not ready():
        raise RuntimeError("the numba kernels are not compiled (numba missing or still compiling)")
    return _KERNELS[name]


def vertical_planes(pixels: np.ndarray, height: int, out: np.ndarray | None = None, top: int = 0) -> np.ndarray:
    """``pixels`` ``[H, W, C]`` uint8 (C 3 or 4, e.g. Pillow's RGBX memory) resized to ``height``
    rows as Pillow's BICUBIC does → the first three channels as planes ``[3, height, W]`` uint8
    (written into ``out`` when given: C-contiguous, ``[3, n, W]``, then only the output rows
    ``top`` to ``top + n``, the same bytes as those rows of the whole result: each output row
    is computed from its own taps alone).

    Raises:
        RuntimeError: the kernels are not ready (check :func:`ready` first).
    """
    kernel = _kernel("planes")
    rows, bounds, kk = _prepared(pixels, height)
    if out is None:
        out = np.empty((3, height - top, pixels.shape[1]), dtype=np.uint8)
    n = out.shape[1]
    kernel(rows, pixels.shape[2], bounds[top:top + n], kk[top:top + n], out)
    return out


def vertical(pixels: np.ndarray, height: int) -> np.ndarray:
    """``pixels`` ``[H, W, C]`` uint8 resized to ``height`` rows as Pillow's BICUBIC does →
    ``[height, W, C]`` uint8.

    Raises:
        RuntimeError: the kernels are not ready (check :func:`ready` first).
    """
    kernel = _kernel("interleaved")
    rows, bounds, kk = _prepared(pixels, height)
    out = np.empty((height, *pixels.shape[1:]), dtype=np.uint8)
    kernel(rows, bounds, kk, out.reshape(height, rows.shape[1]))
    return out


def split_planes(pixels: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``pixels`` ``[H, W, C]`` uint8 (C 3 or 4, e.g. Pillow's RGBX memory read in place) → the
    first three channels as planes ``[3, H, W]`` uint8 (written into ``out`` when given:
    C-contiguous, that shape): what ``Image.split`` gives, without its three new images
    (~0.03 against ~0.3 ms for 640×480).

    Raises:
        RuntimeError: the kernels are not ready (check :func:`ready` first).
    """
    kernel = _kernel("split")
    h, w, c = pixels.shape
    if out is None:
        out = np.empty((3, h, w), dtype=np.uint8)
    kernel(_rows(pixels), c, out)
    return out
