"""Record vLLM 0.33's answers to malformed requests, and diff a running server against them.

Run by hand (needs vLLM in its own venv; the tests only read the file)::

    # record: start `vllm launch render` (or use one already running with --vllm-url)
    python tools/record_error_goldens.py --vllm ~/vllm/bin/vllm --port 18600
    python tools/record_error_goldens.py --vllm-url http://127.0.0.1:18601
    # diff our server against the recorded answers, grouped by kind
    python tools/record_error_goldens.py --ours http://127.0.0.1:18611 --no-record

The cases are ``tools/error_golden_cases.py`` (Qwen3-0.6B with the qwen3 / hermes flags). The file
written is ``tests/goldens/errors_qwen3.json``: ``[{"kind", "name", "path", "body" | "raw",
"status", "response"}, ...]`` in case order, bodies with their keys as sent.
``tests/test_error_goldens.py`` replays it against our server.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from differential.servers import wait_ready  # noqa: E402
from error_golden_cases import CASES, FLAGS, FOLDER, RAW  # noqa: E402

GOLDEN = REPO / "tests" / "goldens" / "errors_qwen3.json"


def send(client: httpx.Client, path: str, body: Any) -> tuple[int, Any]:
    """POST ``body`` (JSON, or the bytes of a :class:`RAW`) and return ``(status, parsed answer)``;
    a connection the server drops without answering (vLLM on some bodies) is status 0. Each case
    is sent on a fresh connection (after vLLM drops one, a kept-alive one would fail the next)."""
    headers = {"connection": "close"}
    try:
        if isinstance(body, RAW):
            r = client.post(path, content=bytes(body), headers={**headers, "content-type": "application/json"})
        else:
            r = client.post(path, json=body, headers=headers)
    except httpx.TransportError as exc:
        return 0, {"no_answer": type(exc).__name__}
    try:
        return r.status_code, r.json()
    except ValueError:
        return r.status_code, {"non_json": r.text}


def row_request(row: dict[str, Any]) -> Any:
    """The body of a golden row as :func:`send` takes it."""
    return RAW(row["raw"].encode()) if "raw" in row else row["body"]


def record(url: str) -> list[dict[str, Any]]:
    """Send every case to ``url`` and return the golden rows."""
    rows = []
    with httpx.Client(base_url=url, timeout=120) as client:
        for kind, name, path, body in CASES:
            status, answer = send(client, path, body)
            row: dict[str, Any] = {"kind": kind, "name": name, "path": path}
            row.update({"raw": bytes(body).decode()} if isinstance(body, RAW) else {"body": body})
            row.update(status=status, response=answer)
            rows.append(row)
    return rows


def _without_id(answer: Any) -> Any:
    """A render answer without its ``request_id`` (random on both servers)."""
    return {k: v for k, v in answer.items() if k != "request_id"} if isinstance(answer, dict) else answer


def differences(ours: tuple[int, Any], theirs: tuple[int, Any]) -> list[str]:
    """What differs between two ``(status, answer)`` pairs: status, then each error field (or the
    whole answer but its random ``request_id``)."""
    out = []
    if ours[0] != theirs[0]:
        out.append(f"status {ours[0]} vs {theirs[0]}")
    a, b = ours[1], theirs[1]
    if isinstance(a, dict) and isinstance(b, dict) and "error" in a and "error" in b:
        for key in ("type", "param", "message", "code"):
            if a["error"].get(key) != b["error"].get(key):
                out.append(f"{key}: ours {a['error'].get(key)!r}\n      vLLM {b['error'].get(key)!r}")
    elif _without_id(a) != _without_id(b):
        out.append(f"answer: ours {json.dumps(a)[:300]}\n      vLLM {json.dumps(b)[:300]}")
    return out


def diff(url: str, rows: list[dict[str, Any]]) -> int:
    """Replay ``rows`` against ``url``, print the differences by kind; return how many differ."""
    by_kind: dict[str, list[str]] = defaultdict(list)
    same: dict[str, int] = defaultdict(int)
    with httpx.Client(base_url=url, timeout=120) as client:
        for row in rows:
            found = differences(send(client, row["path"], row_request(row)), (row["status"], row["response"]))
            if found:
                by_kind[row["kind"]].append(f"  {row['name']} ({row['path']}):\n    " + "\n    ".join(found))
            else:
                same[row["kind"]] += 1
    for kind in sorted(set(same) | set(by_kind)):
        print(f"{kind}: {same[kind]} equal, {len(by_kind[kind])} different")
        for line in by_kind[kind]:
            print(line)
    total = sum(len(v) for v in by_kind.values())
    print(f"total: {len(rows) - total} equal, {total} different")
    return total


def start_vllm(vllm: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    """Start ``vllm launch render`` on the cases' model folder and flags; wait until ready."""
    folder = os.path.relpath(REPO.parent / "shared" / "models" / FOLDER, REPO)
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1"}
    with log.open("ab") as out:
        proc = subprocess.Popen([vllm, "launch", "render", folder, "--port", str(port), *FLAGS],
                                env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    wait_ready(f"http://127.0.0.1:{port}", proc, 600)
    return proc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vllm", default=None, help="the vllm executable (vLLM 0.33) to start")
    ap.add_argument("--port", type=int, default=18600, help="port for the vLLM this script starts")
    ap.add_argument("--vllm-url", default=None, help="a running vLLM render server (same flags)")
    ap.add_argument("--ours", default=None, help="a running render-service to diff against the goldens")
    ap.add_argument("--no-record", action="store_true", help="only diff, against the file as it is")
    ap.add_argument("--log", type=Path, default=Path("vllm-error-goldens.log"))
    args = ap.parse_args()
    if not args.no_record:
        proc = None
        url = args.vllm_url
        if url is None:
            proc = start_vllm(args.vllm or "vllm", args.port, args.log)
            url = f"http://127.0.0.1:{args.port}"
        try:
            rows = record(url)
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(30)
        GOLDEN.write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(GOLDEN, len(rows), "rows", flush=True)
    if args.ours:
        rows = json.loads(GOLDEN.read_text(encoding="utf-8"))
        sys.exit(1 if diff(args.ours, rows) else 0)


if __name__ == "__main__":
    main()
