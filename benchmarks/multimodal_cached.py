"""Server CPU of a cached multimodal turn (README "Multimodal render"), per thread: one Qwen3-VL
server (one worker), the same image request sent ``-n`` times one after another over one
keep-alive connection (``http.client``, the lightest client), ``--reps`` times; CPU is
``utime + stime`` of the server's threads from ``/proc`` (10 ms ticks: keep ``n × reps`` in the
hundreds), per request.

    PYTHONPATH=. python -m benchmarks.multimodal_cached [--media rgb_640x480.jpg] [-n 300] [--reps 3]
        [--payload tensors|none] [--text-only] [--cold] [--mm-cache-bytes N]

Prints each repetition and the median, then the CPU per request of each server thread over one
more round (the event loop is the process's first thread; a render on the worker pool shows as a
second one). ``--payload none`` leaves the tensors out of the answer, ``--text-only`` sends the
text part alone (the route's fixed cost), ``--cold`` makes each image unique (a nonce after the
file's end), ``--mm-cache-bytes`` is passed to the server (a small cache fills after a few cold
items; from then on a cold item's payload reuses an evicted one's memory instead of fresh pages,
as in a long-running server whose cache is full). Run it from two checkouts one after the other
to compare them (each starts the server of its own checkout). Not part of ``benchmarks.run``.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import itertools
import statistics
from pathlib import Path
from typing import Any

import orjson

from . import light
from .http_servers import SERVED_NAME, Server, _tree
from .multimodal import _body

SHARED = Path(__file__).resolve().parents[2] / "shared"
MODEL = SHARED / "models" / "Qwen--Qwen3-VL-2B-Instruct"


def _thread_ticks(pid: int) -> dict[str, int]:
    """``utime + stime`` ticks of each thread of ``pid``."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[task.name] = int(fields[11]) + int(fields[12])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--media", default="rgb_640x480.jpg")
    ap.add_argument("-n", type=int, default=300)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--payload", choices=("tensors", "none"), default="tensors")
    ap.add_argument("--text-only", action="store_true")
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--mm-cache-bytes", type=int, default=None)
    args = ap.parse_args()
    kind = "video" if args.media.endswith((".mp4", ".avi")) else "image"
    data = (SHARED / "data" / "media" / args.media).read_bytes()
    nonces = itertools.count()

    def body() -> bytes:
        b: dict[str, Any] = _body(data, kind, SERVED_NAME, f"n{next(nonces)}" if args.cold else None)
        if args.payload == "none":
            b["mm_payload"] = "none"
        if args.text_only:
            b["messages"][0]["content"] = b["messages"][0]["content"][1:]
        return orjson.dumps(b)

    fixed = body()
    extra = [] if args.mm_cache_bytes is None else ["--mm-cache-bytes", str(args.mm_cache_bytes)]
    server = Server(str(MODEL), 1, extra)
    try:
        server.settle()
        conn = http.client.HTTPConnection("127.0.0.1", server.port)

        def post() -> int:
            conn.request("POST", "/v1/chat/completions/render", body() if args.cold else fixed,
                         {"content-type": "application/json"})
            answer = conn.getresponse()
            size = len(answer.read())
            if answer.status != 200:
                raise SystemExit(f"answer {answer.status}")
            return size

        size = post()
        for _ in range(20):
            post()
        pids = _tree(server.proc.pid)
        per_request = []
        for _ in range(args.reps):
            before = light.proc_cpu_s(pids)
            for _ in range(args.n):
                post()
            per_request.append((light.proc_cpu_s(pids) - before) * 1e3 / args.n)
        print(f"{args.media} payload={args.payload} text_only={args.text_only} cold={args.cold} "
              f"answer {size:,} B: server CPU ms per request "
              + " ".join(f"{x:.3f}" for x in per_request) + f", median {statistics.median(per_request):.3f}")
        before_t = _thread_ticks(server.proc.pid)
        for _ in range(args.n):
            post()
        after_t = _thread_ticks(server.proc.pid)
        for tid, ticks in after_t.items():
            used = ticks - before_t.get(tid, 0)
            if used:
                print(f"  thread {tid}{' (event loop)' if tid == str(server.proc.pid) else ''}: "
                      f"{used * 10 / args.n:.3f} ms per request")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
