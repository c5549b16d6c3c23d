"""Vision-language architectures this tier can preprocess for, keyed by config.json ``model_type``.

A family is one :class:`VisionArch` value: its patch geometry, placeholder tokens, field names
and video sampling rule; the pixel budgets come from the model folder's
``preprocessor_config.json`` / ``video_preprocessor_config.json``. Adding a family = adding an
entry to :data:`ARCHITECTURES` (and, when its video layout differs, a video mode).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class VisionArch:
    """One family's preprocessing constants (HF processor defaults, vLLM 0.33 behaviour).

    Attributes:
        name: registry key (config.json ``model_type``).
        processor_name: the HF processor class name (used in upstream error texts).
        patch_size, merge_size, temporal_patch_size: ViT patching; the resize factor is
            ``patch_size * merge_size``.
        image_min_pixels, image_max_pixels: ``smart_resize`` bounds for images.
        video_min_pixels, video_max_pixels: the same for video frames.
        image_token, video_token, vision_start, vision_end: token strings of the template.
        video_mode: ``"timestamps"`` (Qwen3-VL: per temporal group ``<t seconds>`` + start + pads
            + end, fields ``video_grid_thw``, ``timestamps``) or ``"seconds_per_grid"``
            (Qwen2.5-VL: pads only, fields ``video_grid_thw``, ``second_per_grid_ts``).
        video_fps, video_min_frames, video_max_frames: frame sampling targets.
        modalities: modalities the model accepts (others have a limit of 0).
    """

    name: str
    processor_name: str
    patch_size: int
    merge_size: int = 2
    temporal_patch_size: int = 2
    image_min_pixels: int = 56 * 56
    image_max_pixels: int = 28 * 28 * 1280
    video_min_pixels: int = 56 * 56
    video_max_pixels: int = 28 * 28 * 1280
    image_token: str = "<|image_pad|>"
    video_token: str = "<|video_pad|>"
    vision_start: str = "<|vision_start|>"
    vision_end: str = "<|vision_end|>"
    video_mode: str = "seconds_per_grid"
    video_fps: float = 2.0
    video_min_frames: int = 4
    video_max_frames: int = 768
    modalities: tuple[str, ...] = ("image", "video")
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def factor(self) -> int:
        """The resize granularity in pixels (``patch_size * merge_size``)."""
        return self.patch_size * self.merge_size


ARCHITECTURES: dict[str, VisionArch] = {
    "qwen3_vl": VisionArch("qwen3_vl", "Qwen3VLProcessor", patch_size=16, video_mode="timestamps"),
    "qwen2_5_vl": VisionArch("qwen2_5_vl", "Qwen2_5_VLProcessor", patch_size=14),
    "qwen2_vl": VisionArch("qwen2_vl", "Qwen2VLProcessor", patch_size=14),
}


def _read(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _bounds(cfg: dict[str, Any], lo: int, hi: int) -> tuple[int, int]:
    raw = cfg.get("size")
    size: dict[str, Any] = raw if isinstance(raw, dict) else {}
    lo = int(cfg.get("min_pixels") or size.get("shortest_edge") or lo)
    hi = int(cfg.get("max_pixels") or size.get("longest_edge") or hi)
    return lo, hi


def arch_for(config: dict[str, Any], root: str) -> VisionArch | None:
    """The family of a model (config.json contents, folder), pixel bounds read from its
    preprocessor configs; ``None`` for a text-only model."""
    base = ARCHITECTURES.get(str(config.get("model_type", "")))
    if base is None:
        return None
    folder = Path(root)
    image_cfg = _read(folder / "preprocessor_config.json")
    video_cfg = _read(folder / "video_preprocessor_config.json") or image_cfg
    img_lo, img_hi = _bounds(image_cfg, base.image_min_pixels, base.image_max_pixels)
    vid_lo, vid_hi = _bounds(video_cfg, img_lo, img_hi)
    return replace(
        base,
        patch_size=int(image_cfg.get("patch_size", base.patch_size)),
        merge_size=int(image_cfg.get("merge_size", base.merge_size)),
        temporal_patch_size=int(image_cfg.get("temporal_patch_size", base.temporal_patch_size)),
        image_min_pixels=img_lo,
        image_max_pixels=img_hi,
        video_min_pixels=vid_lo,
        video_max_pixels=vid_hi,
        video_fps=float(video_cfg.get("fps", base.video_fps)),
        video_min_frames=int(video_cfg.get("min_frames", base.video_min_frames)),
        video_max_frames=int(video_cfg.get("max_frames", base.video_max_frames)),
    )
