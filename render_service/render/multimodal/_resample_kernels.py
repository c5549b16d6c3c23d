"""numba kernels of :mod:`.resample` (the height-only resize, the colour-plane split) (imported only when numba is installed, so that importing
the render wing never loads numba; module-level functions, so numba caches them on disk)."""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

PRECISION_BITS = 32 - 8 - 2
"""Pillow's 8-bit coefficient precision, as ``resample.PRECISION_BITS`` (a test checks they agree;
not imported from there, which imports this module)."""

jit = numba.njit(cache=True, nogil=True, boundscheck=False)


@jit
def taps(src: Any, y0: int, n: int, k: Any, row: Any) -> None:
    # one output row over the interleaved bytes: Pillow's ``ss = 1 << 21; ss += in * k``
    # per tap, then ``clip8(ss >> 22)``; 4 and 5 taps (bicubic upscaling) unrolled so the
    # loop over the row vectorises
    half = np.int32(1 << (PRECISION_BITS - 1))
    if n == 4:
        a, b, c, d = src[y0], src[y0 + 1], src[y0 + 2], src[y0 + 3]
        k0, k1, k2, k3 = k[0], k[1], k[2], k[3]
        for i in range(row.shape[0]):
            s = half + np.int32(a[i]) * k0 + np.int32(b[i]) * k1 + np.int32(c[i]) * k2 + np.int32(d[i]) * k3
            row[i] = np.uint8(min(max(s >> PRECISION_BITS, 0), 255))
    elif n == 5:
        a, b, c, d, e = src[y0], src[y0 + 1], src[y0 + 2], src[y0 + 3], src[y0 + 4]
        k0, k1, k2, k3, k4 = k[0], k[1], k[2], k[3], k[4]
        for i in range(row.shape[0]):
            s = (half + np.int32(a[i]) * k0 + np.int32(b[i]) * k1 + np.int32(c[i]) * k2
                 + np.int32(d[i]) * k3 + np.int32(e[i]) * k4)
            row[i] = np.uint8(min(max(s >> PRECISION_BITS, 0), 255))
    else:
        for i in range(row.shape[0]):
            s = half
            for t in range(n):
                s += np.int32(src[y0 + t, i]) * k[t]
            row[i] = np.uint8(min(max(s >> PRECISION_BITS, 0), 255))


@jit
def split_row(row: Any, channels: int, r: Any, g: Any, b: Any) -> None:
    # one row of interleaved pixels (C = channels: 3, or 4 for Pillow's RGBX) → its three
    # colour rows; constant strides, so it vectorises
    if channels == 4:
        for x in range(r.shape[0]):
            r[x] = row[4 * x]
            g[x] = row[4 * x + 1]
            b[x] = row[4 * x + 2]
    else:
        for x in range(r.shape[0]):
            r[x] = row[3 * x]
            g[x] = row[3 * x + 1]
            b[x] = row[3 * x + 2]


@jit
def planes(src: Any, channels: int, bounds: Any, kk: Any, out: Any) -> None:
    row = np.empty(src.shape[1], dtype=np.uint8)
    for yy in range(out.shape[1]):
        taps(src, bounds[yy, 0], bounds[yy, 1], kk[yy], row)
        split_row(row, channels, out[0, yy], out[1, yy], out[2, yy])


@jit
def interleaved(src: Any, bounds: Any, kk: Any, out: Any) -> None:
    for yy in range(out.shape[0]):
        taps(src, bounds[yy, 0], bounds[yy, 1], kk[yy], out[yy])


@jit
def split(src: Any, channels: int, out: Any) -> None:
    # [H, W·C] interleaved rows → colour planes [3, H, W] (Pillow's ``split`` and three fresh
    # images cost ~10× as much)
    for y in range(out.shape[1]):
        split_row(src[y], channels, out[0, y], out[1, y], out[2, y])
