"""``tools/multimodal_pixel_diff.py`` (README "Multimodal render"): its view of this project's item
is base64 text that ``decode_item`` reads (it once passed the rendered ``B64Payload`` itself and
crashed with ``not a msgpack item``). The right value is vLLM 0.33's: rgb_640x480.png is
byte-identical to the peer's item, whose base64 sha256 ``tools/record_multimodal_goldens.py``
recorded in ``tests/goldens/multimodal/Qwen--Qwen3-VL-2B-Instruct.json``.
"""

from __future__ import annotations

import hashlib
import json
import sys

from conftest import REPO, model_dir, shared_bundle

from render_service.render.multimodal.serde import decode_item
from render_service.settings import Settings

sys.path.insert(0, str(REPO / "tools"))
import multimodal_pixel_diff as tool  # noqa: E402
import record_multimodal_goldens as rec  # noqa: E402


def test_ours_item_is_decodable_text_equal_to_vllm() -> None:
    settings = Settings(model=model_dir("Qwen--Qwen3-VL-2B-Instruct"), mm_cache_bytes=0)
    b64 = tool.ours_item(shared_bundle(settings), settings, "image", rec.image_part("rgb_640x480.png"))
    assert isinstance(b64, str)
    assert decode_item(b64)["pixel_values"].data.shape == (1200, 1536)
    golden = json.loads((rec.OUT / "Qwen--Qwen3-VL-2B-Instruct.json").read_text())
    want = golden["cases"]["img_rgb_640x480.png"]["features"]["kwargs_data"]["image"][0]
    assert hashlib.sha256(b64.encode()).hexdigest() == want["b64_sha256"]
