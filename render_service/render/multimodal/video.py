"""Video decode (PyAV, optional extra ``video``), frame sampling and patching as vLLM 0.33's
Qwen-VL video backends and HF video processors do (reference multimodal.md §4, §5).

Sampling (vLLM ``Qwen3VLVideoBackend`` / ``Qwen2VLVideoBackend``): Qwen3-VL takes
``n = clamp(int(total / fps_src * fps), min_frames, min(max_frames, total))`` indices
``round(linspace(0, total-1, n))``; Qwen2.5-VL takes ``n = total / fps_src * fps`` clamped to
``[min_frames, max_frames]`` (both rounded down to the temporal patch) and indices
``int(arange(0, total, total / n))`` in float32.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from ...errors import InvalidRequest
from . import resample, serde
from .image import check_resized, load_error, patchify_planes, resize, smart_resize, too_many_pixels
from .registry import VisionArch


@dataclass(frozen=True, slots=True)
class DecodedVideo:
    """Sampled RGB frames ``[n, H, W, 3]`` uint8 and the source facts."""

    frames: np.ndarray
    total_frames: int
    fps: float
    indices: list[int]

    @property
    def duration(self) -> float:
        """Seconds, ``total_frames / fps`` (as vLLM's metadata)."""
        return self.total_frames / self.fps if self.fps > 0 else 0.0

    @property
    def sampled_fps(self) -> float:
        """Frames per second of the sampled frames: ``len(indices) / total_frames · fps``, or the
        source fps (24 when unknown) when a fact is missing (transformers' ``VideoMetadata.sampled_fps``,
        which Qwen2.5-VL's ``second_per_grid_ts`` divides the temporal patch by)."""
        if self.total_frames <= 0 or self.fps <= 0:
            return self.fps or 24.0
        return len(self.indices) / self.total_frames * self.fps


def sample_indices(arch: VisionArch, total: int, fps_src: float, fps: float) -> list[int]:
    """Indices of the frames the model sees (module docstring)."""
    if arch.video_mode == "timestamps":
        src = fps_src if fps_src > 0 else 24.0
        n = int(total / src * min(fps, 30))
        n = min(max(n, arch.video_min_frames), min(arch.video_max_frames, 768), total)
        return [int(i) for i in np.linspace(0, total - 1, n).round().astype(int)]
    if fps_src <= 0:
        raise InvalidRequest(
            "Qwen2-VL video sampling needs a known source fps, but the container "
            "reported 0 (variable or unknown frame rate)."
        )
    tp = arch.temporal_patch_size
    cap = math.floor(min(arch.video_max_frames, 768, total) / tp) * tp
    wanted = total / fps_src * min(fps, 30)
    n = math.floor(min(max(wanted, arch.video_min_frames), cap, total) / tp) * tp
    if n <= 0:
        raise InvalidRequest("the video has too few frames")
    step = np.float32(total / n)
    idx = np.arange(0, total, step, dtype=np.float32).astype(np.int32)
    return [min(int(i), total - 1) for i in idx]


def preload() -> None:
    """Import PyAV (~80 ms the first time) if it is installed, so that the first video request
    does not pay for it; a vision server calls it in the background at start-up."""
    try:
        import av  # noqa: F401
    except ImportError:
        pass


DECODE_BYTES_LIMIT = int(os.environ.get("VLLM_MAX_MEDIA_REQUEST_DECODE_BYTES", "715827880"))
"""Bytes of decoded media one request may hold (vLLM 0.33's ``VLLM_MAX_MEDIA_REQUEST_DECODE_BYTES``,
read from the same variable; 0 or less: no limit), summed over the request's items: RGB bytes of
each image (from its header) and of each video's sampled frames (:class:`DecodeBudget`)."""


@dataclass(slots=True)
class DecodeBudget:
    """The decoded media bytes one request has used so far (:data:`DECODE_BYTES_LIMIT`)."""

    used: int = 0

    def spend(self, nbytes: int) -> None:
        """Count ``nbytes`` more decoded bytes, checked before they are decoded.

        Raises:
            InvalidRequest: the request's total over the limit (vLLM 0.33's text).
        """
        total = self.used + nbytes
        if 0 < DECODE_BYTES_LIMIT < total:
            raise InvalidRequest(
                f"Request decoded media exceeds VLLM_MAX_MEDIA_REQUEST_DECODE_BYTES={DECODE_BYTES_LIMIT} "
                f"({total} bytes)."
            )
        self.used = total


def check_decode_bytes(n_frames: int, height: int, width: int, budget: DecodeBudget | None = None) -> None:
    """Spend ``n_frames`` RGB frames of ``height × width`` from ``budget`` (a fresh one when
    ``None``: this video alone).

    Raises:
        InvalidRequest: the request's decoded bytes over :data:`DECODE_BYTES_LIMIT` (vLLM 0.33's text).
    """
    (budget if budget is not None else DecodeBudget()).spend(n_frames * height * width * 3)


def _video_stream(container: Any) -> Any:
    stream = next((s for s in container.streams if s.type == "video"), None)
    if stream is None:
        raise InvalidRequest("Failed to load video: no video stream")
    return stream


def _decode_pass(container: Any, stream: Any, wanted: set[int], to_rgb: Callable[[Any], np.ndarray],
                 check: Callable[[int, Any], None]) -> tuple[dict[int, np.ndarray], int]:
    """Decode every frame of ``stream``, keeping only the ``wanted`` indices (as RGB): each other
    frame is freed as soon as the next is decoded. ``check(index, frame)`` sees every decoded
    frame before it is kept (and may raise). Returns ``(kept, frames decoded)``."""
    kept: dict[int, np.ndarray] = {}
    count = 0
    for frame in container.decode(stream):
        check(count, frame)
        if count in wanted:
            kept[count] = to_rgb(frame)
        count += 1
    return kept, count


def decode_video(data: bytes, arch: VisionArch, max_pixels: int, io_kwargs: dict[str, Any],
                 budget: DecodeBudget | None = None) -> DecodedVideo:
    """Decode ``data`` (any container FFmpeg reads) and keep the sampled frames.

    The sampling needs the number of frames: it is taken from the container (``stream.frames``),
    so one pass decodes every frame and keeps only the sampled ones as RGB; when the container
    does not say, or the frames decoded are not the number it said, a first pass counts them and
    a second keeps the sampled ones (the result is always that of the decoded count). So memory
    holds the sampled frames only, not the whole video (a 137 KB minute of 1080p at 30 fps was
    9.9 GB when every decoded frame was kept).

    ``io_kwargs``: ``--media-io-kwargs`` / request ``media_io_kwargs["video"]`` (``fps``;
    ``num_frames`` only changes the hash for these families, as upstream). ``budget``: the
    request's decoded bytes so far (:class:`DecodeBudget`; ``None``: this video alone).

    Raises:
        InvalidRequest: not a video ("Could not open video stream", vLLM's text), no video
            stream, a frame over the pixel budget, sampled frames that would take the request over
            :data:`DECODE_BYTES_LIMIT` (vLLM's text), or PyAV not installed (``pip install 'render-service[video]'``).
    """
    try:
        import av
    except ImportError:
        raise InvalidRequest("video input needs PyAV: pip install 'render-service[video]'") from None
    try:
        opened = av.open(io.BytesIO(data), mode="r")
    except Exception:  # FFmpeg cannot open it: vLLM 0.33's (OpenCV decoder's) message
        raise InvalidRequest("Could not open video stream") from None
    # one reformatter for all frames: its scaler context is made once, not per frame
    # (``to_ndarray(format=...)`` builds one per frame; the same pixels), and on the calling
    # thread (``threads=1``): PyAV's default 0 lets swscale start its own slice threads for each
    # context, which cost more than a small frame's conversion (process CPU of the 4 sampled
    # 320x240 frames ~0.6-0.8 -> ~0.35-0.4 ms; the same pixels)
    reformat = av.video.reformatter.VideoReformatter().reformat

    def to_rgb(frame: Any) -> np.ndarray:
        return reformat(frame, format="rgb24", threads=1).to_ndarray()  # type: ignore[no-any-return]

    fps = float(io_kwargs.get("fps", arch.video_fps))
    size: tuple[int, int] | None = None  # every frame's (width, height): the stream's, else the first's
    indices: list[int] = []  # the frames a pass keeps
    base = budget.used if budget is not None else 0
    trial = DecodeBudget(base)  # the request's decoded bytes with this video's kept frames

    def adopt(width: int, height: int) -> None:
        """The frame size of the video, checked against the pixel limit and, with the frames kept,
        the request's decode budget."""
        nonlocal size
        if width * height > max_pixels:
            raise too_many_pixels(width, height, max_pixels, "Video frame")
        trial.used = base
        check_decode_bytes(len(indices), height, width, trial)
        size = (width, height)

    def check(index: int, frame: Any) -> None:
        # A stream may change resolution mid-way (a 238 KB MPEG-TS whose header says 64x64 went
        # on with 8000x8000 frames: 7 GB before np.stack refused the mixed shapes): each frame
        # must have the one size the pixel and byte limits were checked for.
        got = (int(frame.width), int(frame.height))
        if size is None:
            adopt(*got)
        elif got != size:
            raise InvalidRequest(f"Failed to load video: frame {index} is {got[0]}x{got[1]}, "
                                 f"the stream's frames are {size[0]}x{size[1]}")

    try:
        with opened as container:
            stream: Any = _video_stream(container)
            width, height = stream.width or 0, stream.height or 0
            if width * height > max_pixels:  # before the frame count is read, as always
                raise too_many_pixels(width, height, max_pixels, "Video frame")
            fps_src = float(stream.average_rate) if stream.average_rate else 0.0
            said = int(stream.frames or 0)
            try:
                indices = sample_indices(arch, said, fps_src, fps) if said > 0 else []
            except InvalidRequest:  # decided on the decoded count below, as it always was
                said, indices = -1, []
            if width and height:  # else the first decoded frame's size is taken (check)
                adopt(width, height)
            kept, total = _decode_pass(container, stream, set(indices), to_rgb, check)
        if total == 0 or size is None:
            raise InvalidRequest("Failed to load video: no frames")
        if total != said:  # the container did not say, or said otherwise: sample the real count
            indices = sample_indices(arch, total, fps_src, fps)
            adopt(*size)
            with av.open(io.BytesIO(data), mode="r") as again:
                kept, _ = _decode_pass(again, _video_stream(again), set(indices), to_rgb, check)
        rgb = np.stack([kept[i] for i in indices])
        if budget is not None:
            budget.used = trial.used
    except InvalidRequest:
        raise
    except Exception as exc:
        raise load_error(exc, "video") from None
    return DecodedVideo(rgb, total, fps_src, indices)


def hash_metadata(video: DecodedVideo) -> dict[str, Any]:
    """The metadata vLLM hashes with a video (``create_hf_metadata``; backend named as vLLM's
    default so the same file gives the same hash)."""
    return {
        "total_num_frames": video.total_frames,
        "fps": video.fps,
        "duration": video.duration,
        "video_backend": "opencv",
        "frames_indices": video.indices,
        "do_sample_frames": len(video.indices) == video.total_frames,
    }


def process_video(
    video: DecodedVideo, arch: VisionArch, min_pixels: int, max_pixels: int, budget: int | None = None
) -> tuple[serde.Pending, tuple[int, int, int], list[float]]:
    """Frames → ``(pixel_values_videos [t·h·w, 3·2·P·P] uint8 (a :class:`~.serde.Pending` tensor,
    reordered straight into the encoded item), video_grid_thw, timestamps)``;
    ``timestamps`` are the mean source time of each temporal group (Qwen3-VL's ``<t seconds>``).

    Raises:
        InvalidRequest: Qwen3-VL: fewer frames than the temporal patch (a one-frame "video",
            e.g. a PNG sent as ``video_url``), an aspect ratio over 200; a frame's resize
            target over ``budget`` pixels (:func:`~.image.check_resized`).
    """
    n, h, w, _ = video.frames.shape
    tp = arch.temporal_patch_size
    if arch.video_mode == "timestamps":
        if n < tp:  # HF's Qwen3-VL video ``smart_resize`` refuses it; vLLM 0.33 answers a 400
            raise InvalidRequest(
                f"Failed to apply the video processor: a video needs at least {tp} frames, this one "
                f"has {n} (t:{n} must be larger than temporal_factor:{tp}); a still image is an "
                "image_url part"
            )
        t_bar = math.ceil(n / tp) * tp
        rh, rw = _video_resize(n, t_bar, h, w, arch.factor, min_pixels, max_pixels)
    else:
        rh, rw = smart_resize(h, w, arch.factor, min_pixels, max_pixels)
    check_resized(rh, rw, budget, "video frame")
    planes = np.empty((n + (-n % tp), 3, rh, rw), dtype=np.uint8)  # [T, 3, H, W], T padded
    for i, f in enumerate(video.frames):
        if w == rw and resample.ready():  # compiled: Pillow's vertical-only pass (or none) + split
            if h != rh:
                resample.vertical_planes(f, rh, planes[i])
            else:
                resample.split_planes(f, planes[i])
        else:
            planes[i] = np.moveaxis(resize(Image.fromarray(f), rh, rw), -1, 0)
    planes[n:] = planes[n - 1]  # the last frame repeated up to a whole temporal patch
    pixels, grid = patchify_planes(planes, arch)
    times = [i / video.fps for i in video.indices] if video.fps > 0 else [0.0] * n
    times += [times[-1]] * (-len(times) % tp)
    stamps = [(times[i] + times[i + 1]) / 2 for i in range(0, len(times), tp)]
    return pixels, grid, stamps


def _video_resize(
    n: int, t_bar: int, h: int, w: int, factor: int, min_pixels: int, max_pixels: int
) -> tuple[int, int]:
    """Qwen3-VL's video ``smart_resize``: the pixel bounds apply to ``t_bar·h·w``, and a frame
    with a side under ``factor`` is first scaled up (both sides by the same ratio, truncated to
    int) until that side is ``factor`` (HF ``video_processing_qwen3_vl.smart_resize``; the image
    path and Qwen2.5-VL's video processor have no such step).

    Raises:
        InvalidRequest: an aspect ratio over 200 (HF's ``smart_resize`` check; vLLM 0.33: 400).
    """
    if h < factor or w < factor:
        scale = max(factor / h, factor / w)
        h, w = int(h * scale), int(w * scale)
    if max(h, w) / min(h, w) > 200:
        raise InvalidRequest(
            f"Failed to apply the video processor: absolute aspect ratio must be smaller than 200, "
            f"got {max(h, w) / min(h, w)}"
        )
    h_bar = round(h / factor) * factor
    w_bar = round(w / factor) * factor
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt((n * h * w) / max_pixels)
        h_bar = max(factor, math.floor(h / beta / factor) * factor)
        w_bar = max(factor, math.floor(w / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (n * h * w))
        h_bar = math.ceil(h * beta / factor) * factor
        w_bar = math.ceil(w * beta / factor) * factor
    return h_bar, w_bar
