"""Record Qwen3-VL video edge cases (a short side under the 32 px resize factor; 30 fps clips whose
sampled frames are smaller than the file, so vLLM hashes the frames instead of the bytes) from a
running vLLM 0.33 render server, for ``tests/test_multimodal_video_edges.py``.

The clips are small mpeg4 files made with PyAV (``--make`` rewrites them; their bytes depend on the
FFmpeg build, so they are committed under ``tests/data/video_edges/`` rather than made in the
test). Start the peer with the model path the golden should carry (it enters every media hash)::

    VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 ~/vllm/bin/vllm launch render \
        /tmp/shared/models/Qwen--Qwen3-VL-2B-Instruct --port 8300
    python tools/record_video_edge_goldens.py --url http://127.0.0.1:8300 \
        --model /tmp/shared/models/Qwen--Qwen3-VL-2B-Instruct [--make]
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import record_multimodal_goldens as rec  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "video_edges"
OUT = REPO / "tests" / "goldens" / "multimodal" / "video_edges.json"

#: name -> (width, height, frames, fps, noise): 4-frame gradients at 2 fps with a short side under
#: 32 px (and two that are not), and 30 fps noise whose 4 sampled frames (12,288 bytes) are smaller
#: than the file
CLIPS: dict[str, tuple[int, int, int, int, bool]] = {
    **{f"short_{w}x{h}.mp4": (w, h, 4, 2, False)
       for w, h in [(1000, 16), (160, 16), (100, 20), (64, 18), (34, 18), (18, 34), (40, 40), (50, 20)]},
    "noise_32x32_60f_30fps.mp4": (32, 32, 60, 30, True),
}


def make_clip(width: int, height: int, frames: int, fps: int, noise: bool) -> bytes:
    """An mpeg4 mp4 (yuv420p): a colour gradient changing per frame, or seeded noise."""
    import av

    rng = np.random.default_rng(0)
    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as container:
        stream: Any = container.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for i in range(frames):
            if noise:
                rgb = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
            else:
                rgb = np.zeros((height, width, 3), np.uint8)
                rgb[..., 0] = np.arange(width)[None, :] * 255 // max(width - 1, 1)
                rgb[..., 1] = np.arange(height)[:, None] * 255 // max(height - 1, 1)
                rgb[..., 2] = (i * 60) % 256
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return buf.getvalue()


def body(name: str) -> dict[str, Any]:
    """The render request of one clip (a data URL, then a text part)."""
    url = "data:video/mp4;base64," + base64.b64encode((DATA / name).read_bytes()).decode()
    return rec.chat({"type": "video_url", "video_url": {"url": url}})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True, help="model path exactly as given to the peer")
    ap.add_argument("--make", action="store_true", help="rewrite the clips first")
    args = ap.parse_args()
    if args.make:
        DATA.mkdir(parents=True, exist_ok=True)
        for name, spec in CLIPS.items():
            (DATA / name).write_bytes(make_clip(*spec))
    client = httpx.Client(base_url=args.url, timeout=120)
    cases = {}
    for name in CLIPS:
        resp = client.post("/v1/chat/completions/render", json=body(name))
        cases[name] = rec.describe("render", resp.status_code, resp.json(), "")
        print(name, resp.status_code, cases[name].get("features", {}).get("mm_placeholders"), file=sys.stderr)
    OUT.write_text(json.dumps({"model_id": args.model, "cases": cases}, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
