"""Record vLLM 0.33's render answers as golden files for ``tests/test_render_goldens.py``.

Run by hand (needs vLLM in its own venv; never run by the tests)::

    python tools/record_render_goldens.py --vllm ~/vllm/bin/vllm --port 8130 [CONFIG ...]

For each configuration of ``tools/render_golden_cases.py`` it starts ``vllm launch render`` on the
model folder with the configuration's flags (harmony date pinned with ``VLLM_SYSTEM_START_DATE``),
sends every case with ``X-Request-Id: golden``, and writes ``tests/goldens/render_<config>.json``:
``[{"name", "path", "body", "status", "response"}, ...]``. One server at a time; it is stopped
after its cases.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from differential.servers import wait_ready  # noqa: E402
from render_golden_cases import CONFIGS, START_DATE, cases  # noqa: E402


def record(config: str, vllm: str, port: int, shared: Path, log: Path) -> Path:
    """Start vLLM for ``config``, send its cases, write and return the golden file."""
    folder = Path(os.path.relpath(shared / "models" / CONFIGS[config]["folder"], REPO))
    env = {
        **os.environ,
        "VLLM_TARGET_DEVICE": "cpu",
        "HF_HUB_OFFLINE": "1",
        "VLLM_SYSTEM_START_DATE": START_DATE,
    }
    cmd = [vllm, "launch", "render", str(folder), "--port", str(port), *CONFIGS[config]["flags"]]
    with log.open("ab") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc, 600)
        model = str(folder)  # relative to the checkout, so the goldens name no machine path
        rows = []
        for name, path, body in cases(config):
            r = httpx.post(
                url + path, json={"model": model, **body}, headers={"X-Request-Id": "golden"}, timeout=120
            )
            rows.append(
                {"name": name, "path": path, "body": body, "status": r.status_code, "response": r.json()}
            )
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    target = REPO / "tests" / "goldens" / f"render_{config}.json"
    target.write_text(json.dumps(rows, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    return target


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("configs", nargs="*", default=list(CONFIGS))
    ap.add_argument("--vllm", default="vllm", help="the vllm executable (vLLM 0.33)")
    ap.add_argument("--port", type=int, default=8130)
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    ap.add_argument("--log", type=Path, default=Path("vllm-render-goldens.log"))
    args = ap.parse_args()
    for config in args.configs:
        print(record(config, args.vllm, args.port, args.shared.resolve(), args.log), flush=True)


if __name__ == "__main__":
    main()
