"""Bounded loopback load test of the gateway: many concurrent OpenAI streams for a fixed time.

``python -m benchmarks.gateway_load [--duration 60] [--concurrency 200]`` starts a scripted
prefill engine, a scripted decode engine (``python -m render_service.testing.engine``) and a
gateway (``python -m render_service serve MODEL --engine-url ... --prefill-url ...``) on free
127.0.0.1 ports, runs ``--concurrency`` client tasks that each open streaming
``/v1/chat/completions`` one after the other for ``--duration`` seconds (at most 600), and prints
one JSON report:

* streams completed, chunks received, errors (non-200, error events, broken streams: goal 0);
* every ``--disconnect-every``-th stream is dropped by its client after the first chunk; the
  report gives how long until the engine got the gateway's abort for it or stopped streaming it
  (``disconnect_freed_ms``, polled every 5 ms) and the gateway's ``streams_open`` gauge at the end
  (goal 0: no state left behind);
* the gateway's RSS sampled every second (``rss_mb``: first and last 10 % of the run, growth).

Only loopback addresses are used. :func:`drive` is the client part alone (the tests run a short
version of it against their own servers).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from .http_servers import _free_port, fresh_client

REPO = Path(__file__).resolve().parents[1]
MAX_DURATION = 600.0
MESSAGES = [{"role": "user", "content": "Hello there!"}]


@dataclass
class Report:
    """What :func:`drive` saw."""

    streams: int = 0
    chunks: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    disconnects: int = 0
    disconnect_freed_ms: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        freed = sorted(self.disconnect_freed_ms)
        rss = self.rss_mb
        tenth = max(1, len(rss) // 10)
        return {
            "streams": self.streams,
            "chunks": self.chunks,
            "errors": sum(self.errors.values()),
            "error_kinds": dict(self.errors),
            "disconnects": self.disconnects,
            "disconnect_freed_ms_p50": freed[len(freed) // 2] if freed else None,
            "disconnect_freed_ms_max": freed[-1] if freed else None,
            "rss_mb_first": round(sum(rss[:tenth]) / tenth, 1) if rss else None,
            "rss_mb_last": round(sum(rss[-tenth:]) / tenth, 1) if rss else None,
        }


def _loopback(url: str) -> None:
    host = httpx.URL(url).host
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit(f"refusing a non-loopback target: {url}")


async def _one_stream(client: httpx.AsyncClient, rep: Report, n: int, disconnect: bool,
                      probe: httpx.AsyncClient, messages: list[dict[str, Any]]) -> None:
    rid = f"load-{os.getpid()}-{n}"
    body = {"messages": messages, "stream": True, "max_tokens": 64}
    try:
        async with client.stream("POST", "/v1/chat/completions", json=body,
                                 headers={"X-Request-Id": rid}) as r:
            if r.status_code != 200:
                rep.errors[f"status_{r.status_code}"] += 1
                return
            done = False
            async for line in r.aiter_lines():
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    done = True
                    break
                if line.startswith('data: {"error"'):
                    rep.errors["error_event"] += 1
                    return
                rep.chunks += 1
                if disconnect:
                    break
            if disconnect:
                rep.disconnects += 1
            elif not done:
                rep.errors["no_done"] += 1
                return
        if disconnect:  # the response is closed: how soon does the engine stop streaming it?
            start = time.perf_counter()
            engine_id = f"generate-tokens-chatcmpl-{rid}"
            while True:
                stats = (await probe.get("/scripted/stats", params={"id": engine_id})).json()
                if stats["id_aborted"] or not stats["id_active"]:
                    break
                if time.perf_counter() - start > 10:
                    rep.errors["disconnect_not_freed"] += 1
                    return
                await asyncio.sleep(0.005)
            rep.disconnect_freed_ms.append(round((time.perf_counter() - start) * 1000, 1))
            return
        rep.streams += 1
    except httpx.HTTPError as exc:
        rep.errors[type(exc).__name__] += 1


async def drive(gateway_url: str, engine_url: str, *, duration: float, concurrency: int,
                disconnect_every: int = 10, server_pid: int | None = None,
                messages: list[dict[str, Any]] | None = None) -> Report:
    """Run ``concurrency`` streaming clients against ``gateway_url`` for ``duration`` seconds.

    ``engine_url`` is the scripted decode engine (its ``/scripted/stats`` tells when a dropped
    stream was freed). ``server_pid``: sample that process's RSS every second.
    """
    for url in (gateway_url, engine_url):
        _loopback(url)
    duration = min(duration, MAX_DURATION)
    rep = Report()
    deadline = time.monotonic() + duration
    counter = iter(range(10**9))
    limits = httpx.Limits(max_connections=concurrency + 8, max_keepalive_connections=concurrency + 8)
    async with httpx.AsyncClient(base_url=gateway_url, limits=limits, timeout=60) as client, \
            httpx.AsyncClient(base_url=engine_url, timeout=30) as probe:

        async def worker() -> None:
            while time.monotonic() < deadline:
                n = next(counter)
                disconnect = disconnect_every > 0 and n % disconnect_every == disconnect_every - 1
                await _one_stream(client, rep, n, disconnect, probe, messages or MESSAGES)

        async def sample() -> None:
            proc = psutil.Process(server_pid) if server_pid else None
            while proc is not None and time.monotonic() < deadline:
                rep.rss_mb.append(sum(p.memory_info().rss for p in [proc, *proc.children(True)]) / 2**20)
                await asyncio.sleep(1.0)

        await asyncio.gather(sample(), *(worker() for _ in range(concurrency)))
    return rep


def streams_open(gateway_url: str) -> float:
    """The gateway's ``render_service_gateway_streams_open`` gauge."""
    for line in httpx.get(gateway_url + "/metrics").text.splitlines():
        if line.startswith("render_service_gateway_streams_open"):
            return float(line.split()[-1])
    return float("nan")


def _start(cmd: list[str], url: str, ready: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    with fresh_client(1) as client:
        while time.monotonic() < deadline:
            try:
                if client.get(url + ready).status_code == 200:
                    return proc
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                raise SystemExit(f"{cmd[:4]} exited with {proc.returncode}")
            time.sleep(0.1)
    raise SystemExit(f"{cmd[:4]} did not start")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gateway_load", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=60.0, help="seconds (at most 600)")
    p.add_argument("--concurrency", type=int, default=200, help="concurrent client streams")
    p.add_argument("--disconnect-every", type=int, default=10, help="every N-th stream drops (0: none)")
    p.add_argument("--delay", type=float, default=0.05, help="engine seconds per SSE event")
    p.add_argument("--chunk-size", type=int, default=1, help="engine token ids per SSE event")
    p.add_argument("--model", default=None, help="gateway model folder (default: the embedded Qwen3-0.6B)")
    args = p.parse_args(argv)
    engine = [sys.executable, "-m", "render_service.testing.engine", "--chunk-size", str(args.chunk_size),
              "--delay", str(args.delay)]
    if args.model:
        engine += ["--model", args.model]
    ports = [_free_port() for _ in range(3)]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    procs = []
    try:
        for port, url, role in ((ports[0], urls[0], "prefill"), (ports[1], urls[1], "decode")):
            procs.append(_start(engine + ["--port", str(port), "--role", role], url, "/scripted/stats"))
        gateway = [sys.executable, "-m", "render_service", "serve", *([args.model] if args.model else []),
                   "--port", str(ports[2]), "--engine-url", urls[1], "--prefill-url", urls[0],
                   "--reasoning-parser", "qwen3", "--log-level", "warning"]
        procs.append(_start(gateway, urls[2], "/ready"))
        cpu0 = psutil.Process(procs[2].pid).cpu_times()
        rep = asyncio.run(drive(urls[2], urls[1], duration=args.duration, concurrency=args.concurrency,
                                disconnect_every=args.disconnect_every, server_pid=procs[2].pid))
        cpu1 = psutil.Process(procs[2].pid).cpu_times()
        time.sleep(0.5)
        out = rep.summary()
        out["gateway_streams_open_after"] = streams_open(urls[2])
        out["engine_active_after"] = httpx.get(urls[1] + "/scripted/stats").json()["active"]
        cpu = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
        out["gateway_cpu_us_per_chunk"] = round(cpu / max(1, rep.chunks) * 1e6, 1)
        out |= {"duration_s": args.duration, "concurrency": args.concurrency, "engine_delay_s": args.delay}
        print(json.dumps(out, indent=1))
        return 0 if out["errors"] == 0 else 1
    finally:
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, signal.SIGKILL)


if __name__ == "__main__":
    raise SystemExit(main())
