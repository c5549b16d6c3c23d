"""Memory of one render-service replica under a stream of large images (README "Limits and
sizes"): RSS of the server process, sampled every 20 ms, while client threads send unique
4000×3000 JPEGs (a nonce after the file's end, so none is a cache hit) to a Qwen3-VL server
with one worker and the default processed-media cache (512 MiB).

    PYTHONPATH=. python -m benchmarks.multimodal_memory [--clients 20] [--rounds 3]

Prints the RSS at rest, the peak and the settled RSS after each round (``clients`` requests at
once per round), and how many answers were not 200 (a 503 is the pool's ``--queue-timeout``,
by design). Not part of ``benchmarks.run`` (it takes a minute and a few GB).
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

import httpx

from .http_servers import SERVED_NAME, Server, _rss_mb, _tree
from .multimodal import _body

SHARED = Path(__file__).resolve().parents[2] / "shared"
MODEL = SHARED / "models" / "Qwen--Qwen3-VL-2B-Instruct"
IMAGE = SHARED / "data" / "media" / "rgb_large_4000x3000.jpg"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    data = IMAGE.read_bytes()
    server = Server(str(MODEL), 1, [])
    try:
        server.settle()
        pid = _tree(server.proc.pid)[-1]
        samples: list[float] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                samples.append(_rss_mb(pid, "VmRSS"))
                time.sleep(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        time.sleep(0.5)
        print(f"at rest: {max(samples):.0f} MB")
        statuses: list[int] = []

        def client(nonce: str) -> None:
            with httpx.Client(base_url=server.url, timeout=600) as c:
                body = _body(data, "image", SERVED_NAME, nonce)
                with c.stream("POST", "/v1/chat/completions/render", json=body) as r:
                    for _ in r.iter_bytes(1 << 20):
                        pass
                    statuses.append(r.status_code)

        for rnd in range(args.rounds):
            start = len(samples)
            t0 = time.perf_counter()
            threads = [threading.Thread(target=client, args=(f"r{rnd}c{i}",)) for i in range(args.clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - t0
            time.sleep(1.0)
            peak = max(samples[start:])
            print(f"round {rnd + 1}: {args.clients} requests at once, {wall:.0f} s; "
                  f"peak {peak:.0f} MB, settled {samples[-1]:.0f} MB")
        stop.set()
        bad = [s for s in statuses if s != 200]
        print(f"answers: {len(statuses)}, not 200: {len(bad)} {sorted(set(bad))}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
