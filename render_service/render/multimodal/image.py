"""Image decode and Qwen-VL patching with Pillow + numpy (HF ``Qwen2VLImageProcessor`` with
``do_rescale=False, do_normalize=False``, as vLLM 0.33 calls it; reference multimodal.md §3.1, §5).

Output pixels are the uint8 patches vLLM sends (the engine rescales and normalises on the GPU).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import io
import math
import re
import warnings
from collections.abc import Callable

import numpy as np
from PIL import Image, ImageOps

from ...errors import InvalidRequest
from . import resample, serde
from .registry import VisionArch

RGBA_BACKGROUND = (255, 255, 255)
"""Background that transparent images are composited onto (vLLM ``rgba_background_color``)."""


PILLOW_BLOCKS = 4
"""Freed Pillow image blocks kept for reuse (a decoded image and its three split planes), so the
next decode writes into memory already mapped instead of fresh pages; with
:data:`PILLOW_BLOCK_BYTES` that holds at most 256 MB."""
PILLOW_BLOCK_BYTES = 64 << 20
"""Pillow's largest allocation block (``set_block_size``; its default is 16 MB): a decoded image
up to this size (16 M pixels in RGB's 4 bytes, so every image Qwen3-VL keeps at full size) is
one contiguous block, which its Arrow export (:func:`_arrow_rgbx`) then hands to the resize
kernel without a copy. A block is sized to the image, not to this bound."""


def configure_pillow() -> None:
    """Process-wide Pillow settings of a vision server: :data:`PILLOW_BLOCK_BYTES` blocks, keep
    :data:`PILLOW_BLOCKS` freed image blocks (``Image.core.set_blocks_max``; Pillow's default 0
    hands every block back), and no Pillow decompression-bomb check
    (``Image.MAX_IMAGE_PIXELS = None``): :func:`decode_image` enforces ``--max-image-pixels``
    from the header itself, with a clear 400 naming the size, where Pillow's own check raises its
    raw message (vLLM answers that one with a 500). The common format plugins (JPEG, PNG, …) are
    imported here (``Image.preinit``), not by the first image decoded."""
    core = Image.core
    if core.get_block_size() < PILLOW_BLOCK_BYTES:
        core.set_block_size(PILLOW_BLOCK_BYTES)
    if core.get_blocks_max() < PILLOW_BLOCKS:
        core.set_blocks_max(PILLOW_BLOCKS)
    Image.MAX_IMAGE_PIXELS = None
    Image.preinit()  # the common format plugins imported now, not by the first image


def too_many_pixels(width: int, height: int, max_pixels: int, what: str = "Image") -> InvalidRequest:
    """The 400 of an image (``what`` ``"Video frame"`` for a video) over the pixel budget: vLLM's
    wording for its ``VLLM_MAX_IMAGE_PIXELS`` limit, naming this server's flag."""
    return InvalidRequest(
        f"{what} dimensions {width}x{height} ({width * height} pixels) exceed the maximum of "
        f"{max_pixels} pixels. Set --max-image-pixels to increase this limit."
    )


_OBJECT_AT = re.compile(r" at 0x[0-9a-fA-F]+>")


def load_error(exc: Exception, what: str = "image") -> InvalidRequest:
    """``Failed to load image: <reason>`` (vLLM's text; ``what`` ``"video"`` for a video), with
    object addresses dropped from the reason (``<_io.BytesIO object at 0x7f…>`` →
    ``<_io.BytesIO object>``, as vLLM's answer reads), so a bad file always gives one message."""
    return InvalidRequest(f"Failed to load {what}: {_OBJECT_AT.sub('>', str(exc))}")


def check_resized(height: int, width: int, budget: int | None, what: str = "image") -> None:
    """Refuse a resize target over the pixel budget, before anything is allocated for it.

    ``min_pixels`` / ``max_pixels`` from ``mm_processor_kwargs`` (a request's, under
    ``--trust-request-mm-kwargs``, or the server's ``--mm-processor-kwargs``) move the
    ``smart_resize`` target: without this bound a 640×480 image asked to be resized to 10¹² pixels
    would have the server allocate terabytes. The budget is ``--max-image-pixels``, the one that
    already bounds the decoded source (a safety this server adds; vLLM 0.33 has none).

    Raises:
        InvalidRequest: ``height·width`` over ``budget`` (``None``: no bound).
    """
    if budget is not None and height * width > budget:
        raise InvalidRequest(
            f"The {what} would be resized to {width}x{height} ({width * height} pixels) by the "
            f"min_pixels / max_pixels of mm_processor_kwargs, over the maximum of {budget} pixels. "
            "Set --max-image-pixels to increase this limit.",
            param="mm_processor_kwargs",
        )


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """``(h', w')``: both multiples of ``factor``, ``h'·w'`` within ``[min_pixels, max_pixels]``,
    aspect ratio kept as closely as possible (HF ``smart_resize``; reference §5).

    Raises:
        InvalidRequest: aspect ratio above 200 (HF's limit).
    """
    if max(height, width) / min(height, width) > 200:
        raise InvalidRequest(
            f"absolute aspect ratio must be smaller than 200, got {max(height, width) / min(height, width)}"
        )
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


EXTERNAL_PROGRAM_FORMATS = frozenset({"EPS"})
"""Pillow formats whose decoder runs an external program on the client's bytes (EPS: Ghostscript,
``gs``, wherever it is installed): never opened. Without the program Pillow cannot read them
either, so vLLM 0.33 (without ``gs``) answers them ``cannot identify image file``, as this does."""


@functools.cache
def open_formats() -> tuple[str, ...]:
    """The formats an image is opened as: every format Pillow can open except
    :data:`EXTERNAL_PROGRAM_FORMATS` (the common ones first, in Pillow's order)."""
    Image.init()
    return tuple(f for f in Image.OPEN if f not in EXTERNAL_PROGRAM_FORMATS)


def open_image(data: bytes) -> Image.Image:
    """``Image.open`` of ``data`` limited to :func:`open_formats` (lazy: only the header read).

    Raises:
        PIL.UnidentifiedImageError: no allowed format reads it.
    """
    return Image.open(io.BytesIO(data), formats=open_formats())


def header_pixels(data: bytes) -> int:
    """``width × height`` from an image's header (no pixel decoded); 0 when unreadable (the decode
    then gives the error)."""
    try:
        with open_image(data) as img:
            w, h = img.size
    except Exception:
        return 0
    return int(w * h)


def decode_image(
    data: bytes, max_pixels: int, background: tuple[int, int, int] = RGBA_BACKGROUND
) -> tuple[Image.Image, bool]:
    """Decode ``data`` to an RGB image; ``True`` when the mode was converted (hash factor).

    The header is read first and an image of more than ``max_pixels`` pixels is refused before
    any pixel is decoded (decompression bombs). The decoded image is turned as its EXIF/XMP
    Orientation says (:func:`upright`, vLLM's ``normalize_image``); then RGBA/LA/PA and any
    image with a ``transparency`` entry (P, or an RGB/L PNG's tRNS colour) are composited onto
    ``background`` (vLLM ``convert_image_mode``), other modes converted with Pillow.

    Raises:
        InvalidRequest: not an image / truncated (``Failed to load image: ...``, upstream text,
            object addresses dropped), or over the pixel budget (vLLM's ``Image dimensions WxH
            (N pixels) exceed the maximum of M pixels`` text), read from the header.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img: Image.Image = open_image(data)
            w, h = img.size
            if w * h > max_pixels:
                raise too_many_pixels(w, h, max_pixels)
            img.load()
    except InvalidRequest:
        raise
    except Image.DecompressionBombError:  # Pillow's own limit, if configure_pillow was not run
        raise InvalidRequest(
            f"The image has more than {max_pixels} pixels. Set --max-image-pixels to increase this limit."
        ) from None
    except Exception as exc:
        raise load_error(exc) from None
    img = upright(img)
    if img.mode in ("RGBA", "LA", "PA") or "transparency" in img.info:
        # vLLM's _has_transparency, checked before the mode: any mode with a tRNS entry too (an
        # RGB or L PNG's transparent colour), not only P
        rgba = img if img.mode == "RGBA" else img.convert("RGBA")
        out = Image.new("RGB", rgba.size, background)
        out.paste(rgba, mask=rgba.getchannel("A"))
        return out, True
    if img.mode == "RGB":
        return img, False
    return img.convert("RGB"), True


ORIENTATION_INFO = ("exif", "Raw profile type exif", "XML:com.adobe.xmp", "xmp")
"""``Image.info`` keys that Pillow's ``getexif`` reads an orientation from (besides a TIFF's own
tags); an image with none of them and no ``tag_v2`` has no orientation."""


def upright(img: Image.Image) -> Image.Image:
    """A loaded image turned as its EXIF (or XMP) Orientation says, vLLM 0.33's
    ``normalize_image`` (``ImageOps.exif_transpose`` with every exception suppressed, before the
    RGB conversion; the mode conversion, and so the hash's ``io_config``, is decided on the turned
    image). Orientations 2-8 are transposed by Pillow itself; an image without an orientation
    tag, or with 1, is returned as is (vLLM's ``exif_transpose`` gives a copy of it: the same
    pixels), and one with no EXIF/XMP data at all is not even asked (the common case costs
    nothing)."""
    if not (hasattr(img, "tag_v2") or any(key in img.info for key in ORIENTATION_INFO)):
        return img
    with contextlib.suppress(Exception):
        if img.getexif().get(0x0112, 1) in (2, 3, 4, 5, 6, 7, 8):
            return ImageOps.exif_transpose(img)
    return img


def patchify(frames: np.ndarray, arch: VisionArch) -> tuple[np.ndarray, tuple[int, int, int]]:
    """``frames`` ``[T, H, W, 3]`` uint8 (T a multiple of ``temporal_patch_size``) → patches
    ``[t·h·w, 3·T_p·P·P]`` uint8 and the grid ``(t, h, w)`` in patches, HF's layout
    (merge windows contiguous; channel, temporal, row, column within a patch)."""
    x, (gt, gh, gw) = _patch_order(frames, arch)
    return np.ascontiguousarray(x).reshape(gt * gh * gw, -1), (gt, gh, gw)


def _patch_order(frames: np.ndarray, arch: VisionArch) -> tuple[np.ndarray, tuple[int, int, int]]:
    """``frames`` as a view in patch order ``[t, h/m, w/m, m, m, c, T_p, P, P]`` and the grid."""
    p, m, tp = arch.patch_size, arch.merge_size, arch.temporal_patch_size
    t, height, width, c = frames.shape
    gt, gh, gw = t // tp, height // p, width // p
    x = frames.reshape(gt, tp, gh // m, m, p, gw // m, m, p, c)
    # → gt, gh/m, gw/m, m, m, c, tp, p, p
    return x.transpose(0, 2, 5, 3, 6, 8, 1, 4, 7), (gt, gh, gw)


def patchify_planes(planes: np.ndarray, arch: VisionArch) -> tuple[serde.Pending, tuple[int, int, int]]:
    """:func:`patchify` of frames given as colour planes ``[T, 3, H, W]`` uint8 (C-contiguous, T
    a multiple of ``temporal_patch_size``), as a :class:`~.serde.Pending` tensor: the patches are
    reordered straight into the encoded item (one copy), ``P``-byte cells at a time (a patch
    row of one plane is contiguous in the source and in the patch), where the interleaved
    frames' layout moved single bytes."""
    p, m, tp = arch.patch_size, arch.merge_size, arch.temporal_patch_size
    t, _, height, width = planes.shape
    gt, gh, gw = t // tp, height // p, width // p
    cell = np.dtype((np.void, p))
    src = planes.view(cell).reshape(gt, tp, 3, gh // m, m, p, gw // m, m)
    # → gt, gh/m, gw/m, m (row in window), m (column), 3, tp, P rows: HF's order
    src = src.transpose(0, 3, 6, 4, 7, 2, 1, 5)

    def write(out: np.ndarray, start: int) -> None:
        out.view(cell).reshape(src.shape)[...] = src

    return serde.Pending((gt * gh * gw, 3 * tp * p * p), write), (gt, gh, gw)


def resize(img: Image.Image, height: int, width: int) -> np.ndarray:
    """Bicubic (antialiased) resize to ``height × width`` as ``[H, W, 3]`` uint8."""
    if img.size != (width, height):
        img = img.resize((width, height), Image.Resampling.BICUBIC)
    return np.asarray(img, dtype=np.uint8)


def resize_planes(img: Image.Image, height: int, width: int) -> list[np.ndarray]:
    """:func:`resize`, as the three colour planes ``[H, W]`` uint8 (R, G, B).

    Pillow resizes the RGB image in one pass over its 4-byte pixels; ``split`` then hands out
    the planes, which the patch layout wants (channel-major within a patch), without the
    interleaved ``[H, W, 3]`` copy; each plane is a view of the band's memory (:func:`_plane`),
    where ``np.asarray`` would copy it twice through fresh ``bytes``. With the compiled kernels
    (:mod:`.resample`) an RGB image whose width is kept is read in place instead: split into
    planes in one pass (no resize) or resized along the height and split in the same pass."""
    compiled = compiled_planes(img, height, width)
    if compiled is not None:
        return list(compiled(0, height))
    if img.size != (width, height):
        img = img.resize((width, height), Image.Resampling.BICUBIC)
    return [_plane(band) for band in img.split()]


def compiled_planes(img: Image.Image, height: int, width: int) -> Callable[[int, int], np.ndarray] | None:
    """:func:`resize_planes` a band of rows at a time, for an RGB image whose width is kept, with
    the compiled kernels (:mod:`.resample`, reading Pillow's RGBX memory in place): the
    function ``planes(top, n)`` → the colour planes ``[3, n, width]`` uint8 of the output rows
    ``top`` to ``top + n`` (resized along the height as Pillow's BICUBIC, or split alone when
    the height is kept too: every output row depends only on its own taps, so a band holds the
    bytes of the whole image's rows). The planes are written into one buffer that each call
    reuses (valid until the next call), so a large image's planes never exist whole: a band
    stays in cache on its way into the patches, and no fresh memory is mapped for 3·H·W bytes
    (a 4000×3008 image: 36 MB). ``None`` otherwise (Pillow resizes: :func:`resize_planes`)."""
    if img.size[0] != width or img.mode != "RGB" or not resample.ready():
        return None
    pixels = _arrow_rgbx(img)
    if pixels is None:
        return None
    scratch = [np.empty(0, dtype=np.uint8)]

    def planes(top: int, n: int) -> np.ndarray:
        if len(scratch[0]) < 3 * n * width:
            scratch[0] = np.empty(3 * n * width, dtype=np.uint8)
        out = scratch[0][:3 * n * width].reshape(3, n, width)
        if img.size[1] == height:  # no resize: the compiled split
            return resample.split_planes(pixels[top:top + n], out)
        return resample.vertical_planes(pixels, height, out, top)  # Pillow's vertical-only pass

    return planes


def _plane(band: Image.Image) -> np.ndarray:
    """An ``L`` image's pixels as a ``[H, W]`` uint8 array equal to ``np.asarray(band)``: a
    view of Pillow's own memory through its Arrow export when it offers one (no copy), else the
    band pasted into a Pillow image mapped onto a new numpy array (one copy)."""
    w, h = band.size
    view = _arrow_view(band, w * h)
    return view.reshape(h, w) if view is not None else _pasted(band)


def _pasted(band: Image.Image) -> np.ndarray:
    """An ``L`` image's pixels copied once into a new ``[H, W]`` uint8 array."""
    w, h = band.size
    out = np.empty((h, w), dtype=np.uint8)
    if out.size == 0:
        return out
    mapped = Image.frombuffer("L", (w, h), out, "raw", "L", 0, 1)  # shares ``out``'s memory
    mapped.readonly = False  # written only here, by the paste, while ``out`` is ours alone
    mapped.paste(band)
    return out


class _ArrowArray(ctypes.Structure):
    """``struct ArrowArray`` of the Arrow C data interface (a stable ABI)."""

    _fields_ = [("length", ctypes.c_int64), ("null_count", ctypes.c_int64), ("offset", ctypes.c_int64),
                ("n_buffers", ctypes.c_int64), ("n_children", ctypes.c_int64),
                ("buffers", ctypes.POINTER(ctypes.c_void_p)), ("children", ctypes.c_void_p),
                ("dictionary", ctypes.c_void_p), ("release", ctypes.c_void_p),
                ("private_data", ctypes.c_void_p)]


class _ArrowSchema(ctypes.Structure):
    """``struct ArrowSchema`` of the Arrow C data interface."""

    _fields_ = [("format", ctypes.c_char_p), ("name", ctypes.c_char_p), ("metadata", ctypes.c_void_p),
                ("flags", ctypes.c_int64), ("n_children", ctypes.c_int64), ("children", ctypes.c_void_p),
                ("dictionary", ctypes.c_void_p), ("release", ctypes.c_void_p),
                ("private_data", ctypes.c_void_p)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _arrow_bytes(img: Image.Image, mode: str, n: int) -> np.ndarray | None:
    """The ``n`` pixel bytes of an ``mode`` image (``L``: a plain uint8 Arrow array; ``RGB``: a
    fixed-size list of 4 uint8 per pixel, R G B and padding) as a read-only uint8 array over
    Pillow's memory (``Image.__arrow_c_array__``, Pillow ≥ 11.2), kept alive by the export's
    capsules; ``None`` when Pillow does not export it that way (e.g. rows in several blocks)."""
    export = getattr(img, "__arrow_c_array__", None)
    if export is None or img.mode != mode or n == 0:
        return None
    try:
        schema_capsule, array_capsule = export()
    except Exception:  # noqa: BLE001 - e.g. an image Pillow holds in several blocks
        return None
    schema = _ArrowSchema.from_address(_capsule_pointer(schema_capsule, b"arrow_schema"))
    array = _ArrowArray.from_address(_capsule_pointer(array_capsule, b"arrow_array"))
    if mode == "RGB":  # the bytes are the one child array of the fixed-size lists
        if (schema.format != b"+w:4" or schema.n_children != 1 or array.length * 4 != n
                or array.offset != 0 or array.n_children != 1 or array.null_count != 0):
            return None
        schema = ctypes.cast(schema.children, ctypes.POINTER(ctypes.POINTER(_ArrowSchema)))[0].contents
        array = ctypes.cast(array.children, ctypes.POINTER(ctypes.POINTER(_ArrowArray)))[0].contents
    if (schema.format != b"C" or schema.n_children != 0 or array.length != n or array.offset != 0
            or array.n_buffers != 2 or array.null_count != 0 or not array.buffers[1]):
        return None
    memory = (ctypes.c_uint8 * n).from_address(array.buffers[1])
    memory._export = (schema_capsule, array_capsule)  # type: ignore[attr-defined]  # releases with the view
    view = np.frombuffer(memory, dtype=np.uint8)  # type: ignore[call-overload]
    view.flags.writeable = False
    return view


def _arrow_view(band: Image.Image, n: int) -> np.ndarray | None:
    """The ``n`` pixel bytes of an ``L`` image as a read-only uint8 array over Pillow's memory
    (:func:`_arrow_bytes`)."""
    return _arrow_bytes(band, "L", n)


def _arrow_rgbx(img: Image.Image) -> np.ndarray | None:
    """An ``RGB`` image's memory as a read-only ``[H, W, 4]`` uint8 array (R, G, B, padding),
    zero-copy (:func:`_arrow_bytes`); ``None`` when Pillow does not export it that way."""
    w, h = img.size
    view = _arrow_bytes(img, "RGB", 4 * w * h)
    return None if view is None else view.reshape(h, w, 4)


def patch_shape(height: int, width: int, arch: VisionArch) -> tuple[int, int]:
    """Shape ``[h·w, 3·T_p·P·P]`` of a still image's patches at ``height × width`` pixels."""
    p = arch.patch_size
    return (height // p) * (width // p), 3 * arch.temporal_patch_size * p * p


def patchify_still(planes: list[np.ndarray], arch: VisionArch, out: np.ndarray) -> tuple[int, int, int]:
    """:func:`patchify` of one image repeated ``temporal_patch_size`` times (HF's still-image
    layout), written into ``out`` (shape :func:`patch_shape`, uint8, C-contiguous) from the
    colour ``planes`` ``[H, W]``; returns the grid ``(1, h, w)``.

    A patch row of ``P`` pixels of one plane is contiguous in the source and in the patch, so the
    reorder moves ``P``-byte cells (numpy void items) rather than single bytes."""
    p, m, tp = arch.patch_size, arch.merge_size, arch.temporal_patch_size
    height, width = planes[0].shape
    gh, gw = height // p, width // p
    cell = np.dtype((np.void, p))
    dst = out.view(cell).reshape(gh // m, gw // m, m, m, 3, tp, p)
    for c, plane in enumerate(planes):
        # [gh/m, m, P rows, gw/m, m] cells → merge windows, then rows within the patch
        src = np.ascontiguousarray(plane).view(cell).reshape(gh // m, m, p, gw // m, m)
        src = src.transpose(0, 3, 1, 4, 2)
        for k in range(tp):
            dst[:, :, :, :, c, k] = src
    return 1, gh, gw


def process_image(
    img: Image.Image, arch: VisionArch, min_pixels: int, max_pixels: int, budget: int | None = None
) -> tuple[serde.Pending, tuple[int, int, int]]:
    """An RGB image → ``(pixel_values [h·w, 3·2·P·P] uint8, image_grid_thw (1, h, w))``;
    the image is repeated ``temporal_patch_size`` times, as HF does. The pixel values are a
    :class:`~.serde.Pending` tensor: resized now, reordered straight into the encoded item, a
    row of merge windows at a time.

    Raises:
        InvalidRequest: the resize target is over ``budget`` pixels (:func:`check_resized`).
    """
    w, h = img.size
    rh, rw = smart_resize(h, w, arch.factor, min_pixels, max_pixels)
    check_resized(rh, rw, budget)
    compiled = compiled_planes(img, rh, rw)  # a band of planes at a time, as they are written
    planes = resize_planes(img, rh, rw) if compiled is None else []
    p, m = arch.patch_size, arch.merge_size
    grid = (1, rh // p, rw // p)
    band_rows = (rw // p) * m  # patches of one row of merge windows (m·P pixel rows)

    def write(out: np.ndarray, start: int) -> None:
        top = start // band_rows * m * p
        rows = out.shape[0] // band_rows * m * p
        band = list(compiled(top, rows)) if compiled is not None else [plane[top:top + rows] for plane in planes]
        patchify_still(band, arch, out)

    return serde.Pending(patch_shape(rh, rw, arch), write, band_rows), grid
