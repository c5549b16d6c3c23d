"""Bounded mixed-traffic load test for render-service on the loopback interface.

Drives a mix of chat render, completions render, tokenize, batch derender and 3-chunk streaming
derender for ``--duration`` seconds (at most 600) or ``--max-requests`` requests, with
``--concurrency`` client tasks, and prints one JSON report: request rate, status counts, errors,
p50/p99 latency per endpoint, and the server's RSS over time (whole process tree).

Targets only 127.0.0.0/8, localhost or ::1. Either point it at a running server (``--url`` and
``--server-pid`` for RSS) or let it start one (``--spawn``, extra flags after ``--``)::

    python benchmarks/load_test.py --spawn --duration 30 --concurrency 16 -- --renderer-num-workers 2
    python benchmarks/load_test.py --url http://127.0.0.1:8000 --server-pid 1234 --duration 60

Chat requests come from ``--requests FILE`` (JSONL with ``messages``/``tools``, e.g.
``../shared/data/chat_requests.jsonl``) or a small built-in set.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this folder heads sys.path and its http.py would shadow the standard library's
# ``http`` (httpx imports it): drop it. ``python -m benchmarks.load_test`` needs no such care.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

import argparse
import asyncio
import ipaddress
import itertools
import json
import os
import random
import signal
import socket
import subprocess
import time
from collections import Counter, defaultdict
from urllib.parse import urlparse

import httpx
import psutil

MAX_DURATION = 600.0
MAX_CONCURRENCY = 256
BUILTIN_CHATS = [
    {"messages": [{"role": "user", "content": "Hello! What's the capital of France?"}]},
    {"messages": [{"role": "system", "content": "You are terse."},
                  {"role": "user", "content": "List three prime numbers."}]},
    {"messages": [{"role": "user", "content": "Summarise: " + "the quick brown fox " * 200}]},
]
TEXT = "Sure! Here is a short answer: Paris is the capital of France. Anything else?"
#: Derendered output: reasoning then content (exercises ``--reasoning-parser`` when set).
OUTPUT = "<think>The user asks for the capital of France. It is Paris.</think>\n\n" + TEXT


def loopback_only(url: str) -> None:
    """Exit unless ``url`` targets the loopback interface."""
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise SystemExit(f"refusing to load-test {host!r}: loopback addresses only (127.0.0.0/8, ::1)")


def load_chats(path: str | None, limit: int = 500) -> list[dict]:
    """Chat bodies (``messages`` and ``tools`` only) from a JSONL file, or the built-in set."""
    if not path:
        return BUILTIN_CHATS
    chats = []
    with open(path, encoding="utf-8") as f:
        for line in itertools.islice(f, limit):
            row = json.loads(line)
            body = {"messages": row["messages"]}
            if row.get("tools"):
                body["tools"] = row["tools"]
            chats.append(body)
    return chats


class Stats:
    """Latencies (ms) and statuses per endpoint."""

    def __init__(self) -> None:
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.status: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()

    def record(self, name: str, status: int | str, ms: float, detail: str = "") -> None:
        self.latency[name].append(ms)
        self.status[f"{name} {status}"] += 1
        if status != 200:
            self.errors[f"{name} {status} {detail[:80]}"] += 1

    def report(self) -> dict:
        def pct(values: list[float], q: float) -> float:
            ordered = sorted(values)
            return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

        return {name: {"count": len(v), "p50_ms": pct(v, 0.5), "p99_ms": pct(v, 0.99)}
                for name, v in sorted(self.latency.items())}


async def call(client: httpx.AsyncClient, stats: Stats, name: str, path: str, body: dict) -> dict | None:
    """POST ``body``; record latency and status; the JSON answer on 200."""
    start = time.perf_counter()
    try:
        r = await client.post(path, json=body)
    except httpx.HTTPError as exc:
        stats.record(name, type(exc).__name__, (time.perf_counter() - start) * 1000)
        return None
    ms = (time.perf_counter() - start) * 1000
    detail = "" if r.status_code == 200 else r.text
    stats.record(name, r.status_code, ms, detail)
    return r.json() if r.status_code == 200 else None


async def scenario(client: httpx.AsyncClient, stats: Stats, chats: list[dict], ids: list[int],
                   rng: random.Random) -> int:
    """One unit of mixed traffic; returns the number of requests sent."""
    pick = rng.random()
    if pick < 0.4:
        await call(client, stats, "chat_render", "/v1/chat/completions/render", rng.choice(chats))
        return 1
    if pick < 0.55:
        await call(client, stats, "completion_render", "/v1/completions/render",
                   {"prompt": TEXT, "max_tokens": 16})
        return 1
    if pick < 0.7:
        await call(client, stats, "tokenize", "/tokenize", {"prompt": TEXT})
        return 1
    if pick < 0.85:
        body = {"generate_response": {"request_id": "chatcmpl-load", "choices": [
            {"index": 0, "token_ids": ids, "finish_reason": "stop"}]}, "chat_request": {}}
        await call(client, stats, "chat_derender", "/v1/chat/completions/derender", body)
        return 1
    return await stream(client, stats, ids)


async def stream(client: httpx.AsyncClient, stats: Stats, ids: list[int]) -> int:
    """A 3-chunk streaming derender carrying the real stream_state from chunk to chunk (the
    first call sends ``chat_request``, later ones only the state); stops at the first failure."""
    state, sent = None, 0
    step = max(1, len(ids) // 3)
    for i in range(0, len(ids), step):
        last = i + step >= len(ids)
        body = {"stream": True, "stream_state": state, "prompt_token_ids": [1, 2, 3],
                "generate_chunk": {"request_id": "chatcmpl-load", "choices": [
                    {"index": 0, "token_ids": ids[i:i + step], "finish_reason": "stop" if last else None}]}}
        if state is None:
            body["chat_request"] = {}  # first call only: later calls carry the state
        answer = await call(client, stats, "chat_derender_stream", "/v1/chat/completions/derender", body)
        sent += 1
        if answer is None:
            break
        state = answer.get("stream_state")
    return sent


def tree_rss_mb(pid: int | None) -> float | None:
    """RSS of ``pid`` and its children in MiB, or None."""
    if not pid:
        return None
    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return None
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return round(total / 2**20, 1)


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by ``pid`` and its children."""
    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for p in procs:
        try:
            times = p.cpu_times()
            total += times.user + times.system
        except psutil.Error:
            pass
    return total


def settle(pid: int, timeout: float = 120.0) -> None:
    """Wait until the server's processes stop using CPU: ``/ready`` answers before the
    background set-up (the fast encoder build in each worker) is done, and that one-time build
    (~80 MB) landing inside the run would read as RSS growth under load."""
    deadline = time.monotonic() + timeout
    last = tree_cpu_s(pid)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = tree_cpu_s(pid)
        if now - last < 0.05:
            return
        last = now


async def run(args: argparse.Namespace, pid: int | None) -> dict:
    """Drive traffic until the duration or request budget runs out; the report dict."""
    stats, rng = Stats(), random.Random(args.seed)
    chats = load_chats(args.requests)
    limits = httpx.Limits(max_connections=args.concurrency)
    async with httpx.AsyncClient(base_url=args.url, timeout=args.timeout, limits=limits) as client:
        tok = await client.post("/tokenize", json={"prompt": OUTPUT, "add_special_tokens": False})
        ids = tok.json().get("tokens", []) if tok.status_code == 200 else list(range(100, 130))
        deadline = time.monotonic() + args.duration
        budget = [args.max_requests]
        rss: list[tuple[float, float | None]] = []
        start = time.monotonic()

        async def worker(seed: int) -> None:
            local = random.Random(seed)
            while time.monotonic() < deadline and budget[0] > 0:
                budget[0] -= await scenario(client, stats, chats, ids, local)

        async def sampler() -> None:
            while time.monotonic() < deadline and budget[0] > 0:
                rss.append((round(time.monotonic() - start, 1), tree_rss_mb(pid)))
                await asyncio.sleep(1.0)

        await asyncio.gather(sampler(), *(worker(rng.randrange(2**32)) for _ in range(args.concurrency)))
        rss.append((round(time.monotonic() - start, 1), tree_rss_mb(pid)))
    elapsed = time.monotonic() - start
    total = sum(stats.status.values())
    errors = sum(stats.errors.values())
    return {"duration_s": round(elapsed, 2), "requests": total, "rate_rps": round(total / elapsed, 1),
            "errors": errors, "status": dict(stats.status), "error_kinds": dict(stats.errors.most_common(10)),
            "latency": stats.report(), "rss_mb": rss, "rss_start_mid_end_mb": rss_summary(rss),
            "concurrency": args.concurrency}


def rss_summary(rss: list[tuple[float, float | None]]) -> list[float | None]:
    """RSS (MiB) at the first, middle and last samples: flat memory shows as three close values."""
    if not rss:
        return []
    return [rss[0][1], rss[len(rss) // 2][1], rss[-1][1]]


def spawn(flags: list[str]) -> tuple[subprocess.Popen, str]:
    """Start `python -m render_service serve` on a free loopback port; wait until /ready and its
    background set-up is done (:func:`settle`)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    proc = subprocess.Popen([sys.executable, "-m", "render_service", "serve", "--host", "127.0.0.1",
                             "--port", str(port), "--log-level", "warning", *flags],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    # one client for the polls: httpx.get builds a client (an SSL context) per call, ~36 CPU-ms
    with httpx.Client(timeout=2, limits=httpx.Limits(max_keepalive_connections=0)) as client:
        while time.monotonic() < deadline:
            try:
                if client.get(url + "/ready").status_code == 200:
                    settle(proc.pid)
                    return proc, url
            except httpx.HTTPError:
                time.sleep(0.2)
    proc.kill()
    raise SystemExit("spawned server did not become ready")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--spawn", action="store_true", help="start a server; flags after -- go to it")
    parser.add_argument("--server-pid", type=int, default=None, help="pid whose process tree RSS is sampled")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--max-requests", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--requests", default=None, help="JSONL of chat requests")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("server_flags", nargs="*")
    args = parser.parse_args(argv)
    args.duration = min(max(args.duration, 0.1), MAX_DURATION)
    args.concurrency = min(max(args.concurrency, 1), MAX_CONCURRENCY)
    proc = None
    if args.spawn:
        proc, args.url = spawn(args.server_flags)
        args.server_pid = proc.pid
    loopback_only(args.url)
    try:
        report = asyncio.run(run(args, args.server_pid))
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            report_exit = proc.wait(30)
    if proc is not None:
        report["server_exit_code"] = report_exit
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
