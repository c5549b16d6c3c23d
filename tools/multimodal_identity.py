"""Byte identity of multimodal answers across a code change: record, then compare.

For each vision folder, a server of this checkout is started (``python -m render_service serve``)
and every file of the media folder is rendered over HTTP in a few request shapes, each sent twice
(the second turn is served from the processed-media cache): as a data URL (also with
``mm_payload: "none"``, and two items in one prompt), and through ``/tokenize``. The sha256 of
every answer (status and body) is written to a JSON file; with ``--compare`` the new answers
must equal a file recorded before the change.

    PYTHONPATH=. python tools/multimodal_identity.py --shared ../shared --out before.json
    (change the code)
    PYTHONPATH=. python tools/multimodal_identity.py --shared ../shared --out after.json --compare before.json
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

FOLDERS = ("Qwen--Qwen3-VL-2B-Instruct", "Qwen--Qwen2.5-VL-7B-Instruct")
MIME = {".png": "image/png", ".jpg": "image/jpeg", ".mp4": "video/mp4", ".avi": "video/x-msvideo"}


def _part(path: Path) -> dict[str, Any]:
    kind = "video" if path.suffix in (".mp4", ".avi") else "image"
    url = f"data:{MIME[path.suffix]};base64," + base64.b64encode(path.read_bytes()).decode()
    return {"type": f"{kind}_url", f"{kind}_url": {"url": url}}


def _bodies(media: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    files = sorted(p for p in media.iterdir() if p.suffix in MIME)
    for path in files:
        msgs = [{"role": "user", "content": [_part(path), {"type": "text", "text": "Describe."}]}]
        out[f"{path.name}/chat"] = ("/v1/chat/completions/render", {"model": "m", "messages": msgs})
        out[f"{path.name}/none"] = ("/v1/chat/completions/render",
                                    {"model": "m", "messages": msgs, "mm_payload": "none"})
        out[f"{path.name}/tokenize"] = ("/tokenize", {"model": "m", "messages": msgs})
    small = [p for p in files if p.name in ("rgb_640x480.png", "rgb_28x28.png")]
    two = [{"role": "user", "content": [*(_part(p) for p in small), {"type": "text", "text": "Both?"}]},
           {"role": "assistant", "content": "Two pictures."},
           {"role": "user", "content": [_part(small[0]), {"type": "text", "text": "Again."}]}]
    out["two-images/chat"] = ("/v1/chat/completions/render", {"model": "m", "messages": two})
    return out


def _run(folder: Path, port: int, bodies: dict[str, tuple[str, dict[str, Any]]], settle: float) -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error")
    cmd = [sys.executable, "-m", "render_service", "serve", str(folder), "--port", str(port),
           "--served-model-name", "m", "--log-level", "warning"]
    proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 180
        while True:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError("server did not start")
            time.sleep(0.2)
        time.sleep(settle)  # the resize / split kernels compile in the background (Pillow until then)
        out = {}
        with httpx.Client(base_url=url, timeout=300) as client:
            for turn in (1, 2):
                for name, (path, body) in bodies.items():
                    r = client.post(path, json=body, headers={"X-Request-Id": "identity-check"})
                    digest = hashlib.sha256(r.content).hexdigest()
                    out[f"{folder.name}/{name}/turn{turn}"] = f"{r.status_code} {digest}"
        return out
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", required=True, help="the shared data folder (models/, data/media/)")
    ap.add_argument("--port", type=int, default=8123)
    ap.add_argument("--out", required=True)
    ap.add_argument("--compare", help="a file recorded before the change: every answer must equal it")
    ap.add_argument("--settle", type=float, default=15.0,
                    help="seconds to wait after start-up, so the compiled kernels serve (default 15)")
    args = ap.parse_args()
    shared = Path(args.shared)
    bodies = _bodies(shared / "data" / "media")
    got: dict[str, str] = {}
    for name in FOLDERS:
        got |= _run(shared / "models" / name, args.port, bodies, args.settle)
    Path(args.out).write_text(json.dumps(got, indent=1, sort_keys=True))
    print(f"{len(got)} answers, {sum(v.startswith('200') for v in got.values())} with status 200")
    if args.compare:
        want = json.loads(Path(args.compare).read_text())
        bad = sorted(k for k in want.keys() | got.keys() if want.get(k) != got.get(k))
        for k in bad:
            print(f"DIFFERENT {k}: before {want.get(k)} now {got.get(k)}")
        print("identical" if not bad else f"{len(bad)} of {len(want)} differ")
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
