"""Images with an EXIF (or XMP) Orientation tag are turned upright as vLLM 0.33 turns them
(``normalize_image``: ``ImageOps.exif_transpose`` before the RGB conversion).

The right values come from the vLLM 0.33 render server (Qwen3-VL-2B-Instruct), recorded with
``tools/record_exif_goldens.py`` into ``tests/goldens/multimodal/exif.json``: per image (JPEG with
no EXIF and Orientation 1-8 at 200×120, resized, and 256×128, kept; PNG and WebP with 2, 6, 8; an
RGBA PNG with 6; a JPEG with 6 in XMP only; RGB and L PNGs whose transparency is a tRNS colour,
which vLLM composites onto white as it does RGBA, so the hash carries its io_config) the peer's ``mm_hashes`` (the file bytes' hash for
every orientation), ``mm_metadata`` (the grid: 200×120 with 6 is ``[1, 22, 14]``),
the placeholder length and the sha256 of its ``kwargs_data`` item (checked where no resize is
needed: there the pixels are vLLM's byte for byte).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, model_dir, shared_bundle
from PIL import Image

from render_service.render.multimodal import image, process_parts
from render_service.render.multimodal.prompt import MediaPart
from render_service.settings import Settings

sys.path.insert(0, str(REPO / "tools"))
import record_exif_goldens as rx  # noqa: E402

GOLDEN = json.loads(rx.OUT.read_text())


@pytest.fixture(scope="module")
def rendered() -> tuple[bool, Any]:
    """``(hashes comparable, render(name) → Processed and hash)``: with the peer's model path
    when it exists here (the path enters the hash), else the shared folder's (hashes skipped)."""
    model = GOLDEN["model_id"]
    same_path = Path(model).is_dir()
    settings = Settings(model=model if same_path else model_dir("Qwen--Qwen3-VL-2B-Instruct"), mm_cache_bytes=0)
    bundle = shared_bundle(settings)

    def render(name: str) -> Any:
        url = f"data:{rx.mime_of(name)};base64," + GOLDEN["cases"][name]["file_b64"]
        result = process_parts(bundle, settings, [MediaPart("image", url, None, "x")], {})
        return result.items[0], result.hashes[0]

    return same_path, render


@pytest.mark.parametrize("name", sorted(GOLDEN["cases"]))
def test_oriented_image_equals_vllm(rendered: tuple[bool, Any], name: str) -> None:
    same_path, render = rendered
    want = GOLDEN["cases"][name]
    item, mm_hash = render(name)
    assert item.metadata_b64 == want["mm_metadata"]
    assert len(item.replacement) == want["placeholder_length"]
    if "_kept_" in name:
        assert hashlib.sha256(str(item.kwargs_b64).encode()).hexdigest() == want["kwargs_sha256"]
    if same_path:
        assert mm_hash == want["mm_hash"]


def test_orientation_6_swaps_the_grid() -> None:
    """The brief's case, read from the goldens: 200×120 with Orientation 6 is ``[1, 22, 14]``
    at vLLM (and ``[1, 14, 22]`` without a tag)."""
    from render_service.render.multimodal.serde import decode_item

    def grid(name: str) -> list[int]:
        return [int(v) for v in decode_item(GOLDEN["cases"][name]["mm_metadata"])["image_grid_thw"].data]

    assert grid("jpeg_resized_6") == [1, 22, 14]
    assert grid("jpeg_resized_none") == [1, 14, 22]


def test_upright_leaves_images_without_orientation_alone() -> None:
    """No EXIF/XMP (the common case): the decoded image itself, no copy and no EXIF parse;
    Orientation 1: the image itself too (vLLM's copy has the same pixels)."""
    plain = Image.open(io.BytesIO(rx.make_image("JPEG", (64, 32), None)))
    plain.load()
    assert image.upright(plain) is plain
    one = Image.open(io.BytesIO(rx.make_image("JPEG", (64, 32), 1)))
    one.load()
    assert image.upright(one) is one
    six = Image.open(io.BytesIO(rx.make_image("JPEG", (64, 32), 6)))
    six.load()
    assert image.upright(six).size == (32, 64)


def test_golden_files_are_what_the_tool_makes() -> None:
    """The stored bytes are the recorder's images (so a re-recording compares like with like)."""
    made = rx.cases()
    for name, case in GOLDEN["cases"].items():
        assert base64.b64decode(case["file_b64"]) == made[name], name
