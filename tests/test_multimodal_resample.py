"""The compiled height-only resize (``render/multimodal/resample.py``, numba) gives Pillow's
``Image.resize(..., BICUBIC)`` bytes exactly: on every still image and video frame of
../shared/data/media (at the height both vision families' ``smart_resize`` picks, and at other
heights up and down), on random pixels, and through the render path's own dispatch
(``image.resize_planes`` over Pillow's memory of a decoded JPEG, ``video.process_video``)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from conftest import drop_pillow_blocks
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

pytest.importorskip("numba", reason="the optional extra 'fast' (numba) is not installed")

from render_service.render.multimodal import image, resample, video  # noqa: E402
from render_service.render.multimodal.registry import arch_for  # noqa: E402

MEDIA = Path(__file__).resolve().parents[2] / "shared" / "data" / "media"
MODELS = Path(__file__).resolve().parents[2] / "shared" / "models"
FAMILIES = ["Qwen--Qwen3-VL-2B-Instruct", "Qwen--Qwen2.5-VL-7B-Instruct"]
STILLS = sorted(p.name for p in MEDIA.glob("*.*") if p.suffix in (".png", ".jpg") and p.name != "corrupt.png")
VIDEOS = sorted(p.name for p in MEDIA.glob("video_*"))
if not (MEDIA.is_dir() and MODELS.is_dir()):  # shared_path's skip, for the whole module
    pytest.skip(f"needs ../shared: {MEDIA} not found", allow_module_level=True)


@pytest.fixture(scope="module", autouse=True)
def kernels() -> None:
    image.configure_pillow()
    assert resample.wait(timeout=300), "numba is installed but the kernels did not compile"


def _arch(folder: str):  # type: ignore[no-untyped-def]
    import json

    root = MODELS / folder
    arch = arch_for(json.loads((root / "config.json").read_text()), str(root))
    assert arch is not None
    return arch


def _pillow(pixels: np.ndarray, height: int) -> np.ndarray:
    w = pixels.shape[1]
    ref = np.asarray(Image.fromarray(pixels).resize((w, height), Image.Resampling.BICUBIC))
    drop_pillow_blocks()
    return ref


def _rgb(name: str) -> np.ndarray:
    img, _ = image.decode_image((MEDIA / name).read_bytes(), 10**9)
    rgb = np.asarray(img)
    del img
    drop_pillow_blocks()
    return rgb


@pytest.mark.parametrize("name", STILLS)
def test_every_still_image_equals_pillow(name: str) -> None:
    rgb = _rgb(name)
    h, w, _ = rgb.shape
    heights = {h + 1, 2 * h + 3, max(1, h // 3)}
    for folder in FAMILIES:
        arch = _arch(folder)
        rh, rw = image.smart_resize(h, w, arch.factor, arch.image_min_pixels, arch.image_max_pixels)
        heights.add(rh)
    if h * w > 2_000_000:  # the 4000x3000 photo: its own smart_resize height (3008) only
        heights = {image.smart_resize(h, w, 32, 65536, 16777216)[0]}
    for height in sorted(heights):
        ref = _pillow(rgb, height)
        assert np.array_equal(resample.vertical(rgb, height), ref), (name, height)
        planes = resample.vertical_planes(rgb, height)
        assert np.array_equal(np.moveaxis(planes, 0, -1), ref), (name, height)
        del ref, planes  # not held while the next height's are built


def test_render_dispatch_reads_pillow_memory_and_equals_pillow() -> None:
    """``resize_planes`` on a decoded 4000×3000 JPEG (width kept, 3000 → 3008 rows) takes the
    kernel over Pillow's own RGBX memory, and its planes equal Pillow's resize."""
    img, _ = image.decode_image((MEDIA / "rgb_large_4000x3000.jpg").read_bytes(), 10**9)
    assert image._arrow_rgbx(img) is not None  # one contiguous block (PILLOW_BLOCK_BYTES)
    planes = image.resize_planes(img, 3008, 4000)
    ref = img.resize((4000, 3008), Image.Resampling.BICUBIC)
    for c, band in enumerate(ref.split()):
        assert np.array_equal(planes[c], np.asarray(band)), c


def test_compiled_planes_in_bands_equal_the_whole_image() -> None:
    """``compiled_planes`` (what ``process_image`` patches a band at a time from) gives, for any
    band of output rows, those rows of Pillow's resize of the whole 4000×3000 JPEG (3000 → 3008
    rows), reusing one buffer; at the image's own height it gives ``Image.split``'s rows."""
    img, _ = image.decode_image((MEDIA / "rgb_large_4000x3000.jpg").read_bytes(), 10**9)
    ref = [np.asarray(b) for b in img.resize((4000, 3008), Image.Resampling.BICUBIC).split()]
    drop_pillow_blocks()
    planes = image.compiled_planes(img, 3008, 4000)
    assert planes is not None
    first = planes(0, 32)
    assert np.shares_memory(first, planes(32, 32))  # one buffer, reused while a band fits
    for top, n in [(0, 32), (32, 32), (1504, 64), (2976, 32), (7, 5), (0, 3008)]:
        band = planes(top, n)
        assert band.shape == (3, n, 4000) and band.flags.c_contiguous
        for c in range(3):
            assert np.array_equal(band[c], ref[c][top:top + n]), (top, n, c)
    del ref, planes, first, band  # the resized image's arrays, not held for the own-height part
    same = image.compiled_planes(img, 3000, 4000)
    assert same is not None
    split = [np.asarray(b) for b in img.split()]
    drop_pillow_blocks()
    for top, n in [(0, 32), (2968, 32), (11, 3)]:
        band = same(top, n)
        for c in range(3):
            assert np.array_equal(band[c], split[c][top:top + n]), (top, n, c)
    assert image.compiled_planes(img, 3008, 3968) is None  # a width change: Pillow resizes
    assert image.compiled_planes(img.convert("L"), 3008, 4000) is None


def test_large_image_patches_equal_patchify_of_pillow() -> None:
    """The 4000×3000 JPEG's encoded patches (planes a band at a time, ``encode_payload``'s banded
    path) equal ``image.patchify`` of Pillow's resize, compared a row of merge windows at a
    time (so that no second 72 MB copy is held)."""
    import pybase64

    from render_service.render.multimodal import serde

    arch = _arch(FAMILIES[0])
    img, _ = image.decode_image((MEDIA / "rgb_large_4000x3000.jpg").read_bytes(), 10**9)
    pixels, grid = image.process_image(img, arch, arch.image_min_pixels, arch.image_max_pixels)
    assert grid == (1, 188, 250) and pixels.band_rows > 0
    fields = {"pixel_values": serde.Field(pixels, "flat", False, [[[0, pixels.shape[0], None]]])}
    start = len(serde._segments(fields)[0][0])  # the msgpack head before the patch bytes
    raw = np.frombuffer(pybase64.b64decode(serde.encode_payload(fields).buf.data), dtype=np.uint8)
    patches = raw[start:start + pixels.nbytes].reshape(pixels.shape)
    ref = np.asarray(img.resize((4000, 3008), Image.Resampling.BICUBIC))
    rows = arch.merge_size * arch.patch_size
    for top in range(0, 3008, rows):
        band = ref[top:top + rows]
        expected, _ = image.patchify(np.stack([band, band]), arch)
        k = top // rows * pixels.band_rows
        assert np.array_equal(patches[k:k + pixels.band_rows], expected), top


@pytest.mark.parametrize("name", VIDEOS)
def test_video_frames_converted_on_one_thread_equal_pyav_default(name: str) -> None:
    """``decode_video`` converts the sampled frames to RGB with swscale on the calling thread
    (``threads=1``): the same pixels as PyAV's default (automatic slice threads)."""
    av = pytest.importorskip("av")
    arch = _arch(FAMILIES[0])
    data = (MEDIA / name).read_bytes()
    decoded = video.decode_video(data, arch, 10**9, {})
    with av.open(io.BytesIO(data)) as container:
        frames = list(container.decode(container.streams.video[0]))
    expected = np.stack([frames[i].to_ndarray(format="rgb24") for i in decoded.indices])
    assert np.array_equal(decoded.frames, expected)


@pytest.mark.parametrize("name", VIDEOS)
def test_video_frames_equal_pillow(name: str) -> None:
    pytest.importorskip("av")
    arch = _arch(FAMILIES[0])
    decoded = video.decode_video((MEDIA / name).read_bytes(), arch, 10**9, {})
    pixels, grid, _ = video.process_video(decoded, arch, arch.video_min_pixels, arch.video_max_pixels)
    n, h, w, _ = decoded.frames.shape
    rh = grid[1] * arch.patch_size
    assert rh != h and grid[2] * arch.patch_size == w  # the kernel's case: rows only
    frames = np.stack([_pillow(f, rh) for f in decoded.frames])
    expected, _ = image.patchify(frames, arch)
    got = np.empty(pixels.shape, dtype=np.uint8)  # the pending tensor, reordered straight into place
    pixels.write(got, 0)
    assert np.array_equal(got, expected)


@settings(max_examples=60, deadline=None)
@given(
    h=st.integers(1, 120),
    w=st.integers(1, 24),
    height=st.integers(1, 300),
    channels=st.sampled_from([3, 4]),
    seed=st.integers(0, 2**32 - 1),
    binary=st.booleans(),
)
def test_random_pixels_equal_pillow(
    h: int, w: int, height: int, channels: int, seed: int, binary: bool
) -> None:
    rng = np.random.default_rng(seed)
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    if binary:  # hard edges: the clamp to 0 and 255 is reached
        rgb = (rgb > 127).astype(np.uint8) * 255
    ref = _pillow(rgb, height)
    assert np.array_equal(resample.vertical(rgb, height), ref)
    src = rgb if channels == 3 else np.concatenate([rgb, np.full((h, w, 1), 255, np.uint8)], axis=2)
    assert np.array_equal(np.moveaxis(resample.vertical_planes(src, height), 0, -1), ref)


def test_small_jpeg_dispatch_splits_pillow_memory_as_pillow_does() -> None:
    """``resize_planes`` on a decoded 640×480 JPEG at its own size (no resize on Qwen3-VL) takes
    the compiled split over Pillow's RGBX memory, and its planes are ``Image.split``'s."""
    img, _ = image.decode_image((MEDIA / "rgb_640x480.jpg").read_bytes(), 10**9)
    assert image._arrow_rgbx(img) is not None
    planes = image.resize_planes(img, 480, 640)
    for c, band in enumerate(img.split()):
        assert np.array_equal(planes[c], np.asarray(band)), c


@settings(max_examples=40, deadline=None)
@given(h=st.integers(1, 60), w=st.integers(1, 40), channels=st.sampled_from([3, 4]), seed=st.integers(0, 2**32 - 1))
def test_split_planes_are_the_channels(h: int, w: int, channels: int, seed: int) -> None:
    """The compiled split gives the first three channels of RGB or RGBX pixels, also into a
    given array."""
    src = np.random.default_rng(seed).integers(0, 256, (h, w, channels), dtype=np.uint8)
    expected = np.moveaxis(src[..., :3], -1, 0)
    assert np.array_equal(resample.split_planes(src), expected)
    out = np.empty((3, h, w), dtype=np.uint8)
    assert resample.split_planes(src, out) is out and np.array_equal(out, expected)


@pytest.mark.parametrize("n", [4, 5])
def test_video_frames_at_their_size_equal_pillow(n: int) -> None:
    """Frames that need no resize (320×256 on Qwen3-VL: the compiled split only) and an odd
    frame count (the last frame repeated) give HF's patch layout of the frames."""
    arch = _arch(FAMILIES[0])
    frames = np.random.default_rng(n).integers(0, 256, (n, 256, 320, 3), dtype=np.uint8)
    decoded = video.DecodedVideo(frames, n, 2.0, list(range(n)))
    pixels, grid, _ = video.process_video(decoded, arch, arch.video_min_pixels, arch.video_max_pixels)
    assert grid[1:] == (16, 20)
    padded = np.concatenate([frames, frames[-1:]]) if n % 2 else frames
    expected, expected_grid = image.patchify(padded, arch)
    got = np.empty(pixels.shape, dtype=np.uint8)
    pixels.write(got, 0)
    assert grid == expected_grid and np.array_equal(got, expected)


def test_coefficients_sum_to_one_in_fixed_point() -> None:
    """Each output row's taps (Pillow's normalised, rounded weights) add up to 2**22 within the
    rounding of their count, and stay inside the input; the kernels use the same precision."""
    from render_service.render.multimodal import _resample_kernels

    assert _resample_kernels.PRECISION_BITS == resample.PRECISION_BITS == 22
    for n_in, n_out in [(3000, 3008), (240, 256), (900, 100), (1, 7)]:
        bounds, kk = resample.coefficients(n_in, n_out)
        assert np.all(np.abs(kk.sum(axis=1) - (1 << resample.PRECISION_BITS)) <= kk.shape[1])
        assert np.all(bounds[:, 0] >= 0) and np.all(bounds.sum(axis=1) <= n_in)


def test_png_through_the_dispatch_equals_pillow() -> None:
    """A decoded PNG (not a JPEG) is resized by the same dispatch with the same bytes."""
    img = Image.open(io.BytesIO((MEDIA / "rgb_tall_300x900.png").read_bytes())).convert("RGB")
    planes = image.resize_planes(img, 912, 300)
    ref = np.asarray(img.resize((300, 912), Image.Resampling.BICUBIC))
    assert np.array_equal(np.stack(planes, axis=-1), ref)


@pytest.mark.parametrize("name", VIDEOS)
def test_video_decode_equals_per_frame_to_ndarray(name: str) -> None:
    """``decode_video``'s shared reformatter gives the pixels of PyAV's per-frame
    ``to_ndarray(format="rgb24")``."""
    av = pytest.importorskip("av")
    data = (MEDIA / name).read_bytes()
    decoded = video.decode_video(data, _arch(FAMILIES[0]), 10**9, {})
    with av.open(io.BytesIO(data)) as container:
        frames = list(container.decode(container.streams.video[0]))
    expected = np.stack([frames[i].to_ndarray(format="rgb24") for i in decoded.indices])
    assert np.array_equal(decoded.frames, expected)
