"""Qwen3-VL video edge cases against vLLM 0.33, recorded from the peer by
``tools/record_video_edge_goldens.py`` (clips in ``tests/data/video_edges/``, made with PyAV by
the same tool; values in ``tests/goldens/multimodal/video_edges.json``).

* A short side under the resize factor (32 px): HF's Qwen3-VL video ``smart_resize`` first scales
  both sides up by the same ratio until that side is 32 (1000x16 -> grid [2, 2, 124], 140
  placeholder tokens; we had [2, 2, 16] / 32). 40x40 and 50x20 never differed.
* A 30 fps clip whose 4 sampled frames (12,288 bytes) are smaller than its file: vLLM hashes the
  frames, each byte string framed by its size in bytes; we framed the frames' memoryview by its
  ``len`` (the frame count), so only ``mm_hashes`` differed.

The pixel values themselves are not compared: resized frames differ by 1-2 levels (Pillow against
torchvision, README "Multimodal render")."""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

import pytest
from conftest import REPO, model_dir, shared_bundle

from render_service.render.multimodal import process_parts
from render_service.render.multimodal.prompt import MediaPart
from render_service.render.multimodal.serde import decode_item
from render_service.settings import Settings

DATA = REPO / "tests" / "data" / "video_edges"
GOLDEN = json.loads((REPO / "tests" / "goldens" / "multimodal" / "video_edges.json").read_text())


def tokens(rle: list[list[int]]) -> list[int]:
    return [t for t, n in rle for _ in range(n)]


@pytest.mark.parametrize("name", sorted(GOLDEN["cases"]))
def test_video_edge_equals_vllm(name: str) -> None:
    """Hash, placeholder tokens, ``video_grid_thw`` and the metadata item (timestamps) of one
    clip as the vLLM 0.33 peer rendered it. The peer's model path (``model_id``) enters the hash,
    so the bundle is given that spelling; the folder is the same model."""
    pytest.importorskip("av")
    settings = Settings(model=model_dir("Qwen--Qwen3-VL-2B-Instruct"), mm_cache_bytes=0)
    bundle = dataclasses.replace(shared_bundle(settings), root=GOLDEN["model_id"])
    expected: dict[str, Any] = GOLDEN["cases"][name]
    feats = expected["features"]
    url = "data:video/mp4;base64," + base64.b64encode((DATA / name).read_bytes()).decode()
    item = process_parts(bundle, settings, [MediaPart("video", url, None, "x")], {}).items[0]
    assert item.mm_hash == feats["mm_hashes"]["video"][0]
    place = feats["mm_placeholders"]["video"][0]
    start = place["offset"]
    assert list(item.replacement) == tokens(expected["tokens_rle"])[start : start + place["length"]]
    grid = decode_item(str(item.kwargs_b64))
    want_grid = feats["kwargs_data"]["video"][0]["fields"]["video_grid_thw"]["data"]["hex"]
    assert grid["video_grid_thw"].data.tobytes().hex() == want_grid
    assert item.metadata_b64 == feats["mm_metadata_b64"]["video"][0]
