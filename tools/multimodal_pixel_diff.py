"""Per-item pixel difference between a running vLLM 0.33 render server and this project's
image/video processing (README "Multimodal render": where the resize differs, by how much).

    PYTHONPATH=. python tools/multimodal_pixel_diff.py --url http://127.0.0.1:8150 \
        --model ../shared/models/Qwen--Qwen3-VL-2B-Instruct

Prints, per file of ../shared/data/media, the shape, whether the bytes are identical, the maximum
absolute difference in uint8 levels and the share of differing values.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import httpx
import numpy as np
import record_multimodal_goldens as rec

from render_service.models import ModelBundle, load_bundle
from render_service.render.multimodal import process_parts
from render_service.render.multimodal.prompt import MediaPart
from render_service.render.multimodal.serde import decode_item
from render_service.settings import Settings


def ours_item(bundle: ModelBundle, settings: Settings, kind: str, part: dict[str, Any]) -> str:
    """This project's ``kwargs_data`` item of one media ``part`` as base64 text. The rendered
    item's ``kwargs_b64`` is a :class:`~render_service.render.multimodal.serde.B64Payload` (the
    text in a uint8 buffer), which ``decode_item`` does not read: its text is."""
    media = MediaPart(kind, part[f"{kind}_url"]["url"], None, "x")
    return str(process_parts(bundle, settings, [media], {}).items[0].kwargs_b64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True)
    args = ap.parse_args()
    settings = Settings(model=args.model, mm_cache_bytes=0)
    bundle = load_bundle(settings)
    client = httpx.Client(base_url=args.url, timeout=300)
    for name in rec.IMAGES + rec.VIDEOS:
        kind = "video" if name in rec.VIDEOS else "image"
        part = rec.video_part(name) if kind == "video" else rec.image_part(name)
        theirs_b64 = client.post("/v1/chat/completions/render", json=rec.chat(part)).json()["features"][
            "kwargs_data"
        ][kind][0]
        ours_b64 = ours_item(bundle, settings, kind, part)
        field = "pixel_values" if kind == "image" else "pixel_values_videos"
        a = decode_item(ours_b64)[field].data.astype(np.int16)
        b = decode_item(theirs_b64)[field].data.astype(np.int16)
        same = ours_b64 == theirs_b64
        diff = int(np.abs(a - b).max()) if a.shape == b.shape else -1
        share = float((a != b).mean()) if a.shape == b.shape else 1.0
        print(
            json.dumps(
                {
                    "file": name,
                    "shape": list(b.shape),
                    "identical": same,
                    "max_diff": diff,
                    "differing": round(share, 5),
                }
            )
        )


if __name__ == "__main__":
    main()
