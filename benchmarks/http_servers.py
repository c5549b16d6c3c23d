"""HTTP sections: servers started as subprocesses (``python -m render_service serve ...``), throughput
against the number of worker processes, start-up time, RSS per process, and a peer comparison
(``PEER_URL``, e.g. a ``vllm launch render`` started by hand with the same model and parsers).

Throughput uses the light client of :mod:`benchmarks.light` and reports the server's CPU per
request from /proc beside the wall figures.
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from . import light
from .data import REPO, chat_9k, short_chats, with_nonce
from .stream import TOOLS, chat_request

SERVED_NAME = "bench-model"
TARGET_SCALING = (">=", 1.7)
TARGET_RSS_MB = ("<=", 300.0)
TARGET_STARTUP_S = ("<=", 3.0)
#: one-token chunks of the HTTP derender row (full run; ``--quick``: the quick figure)
HTTP_STREAM_TOKENS = 1000
HTTP_STREAM_QUICK_TOKENS = 300
PARSER_FLAGS = ["--reasoning-parser", "qwen3", "--tool-call-parser", "hermes", "--enable-auto-tool-choice"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fresh_client(timeout: float = 30.0) -> httpx.Client:
    """An httpx client that opens a new connection for each request and closes it after the answer.
    On the wire this is what module-level ``httpx.get`` / ``httpx.post`` do (one connection per call).
    The difference is the client's CPU: those calls build a new ``Client`` each time, and with it an
    SSL context that loads the CA bundle. That costs ~36 CPU-ms per call here, against ~1.5 ms per
    request on this client. A poll loop of ``httpx.get`` every 50 ms kept ~40 % of a core busy while
    it waited for a server. Close it after use (``with fresh_client() as c:``)."""
    return httpx.Client(timeout=timeout, limits=httpx.Limits(max_keepalive_connections=0))


def _tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (Linux /proc)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
    return out


def _rss_mb(pid: int, key: str = "VmHWM") -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Server:
    """A render-service server in its own process group on a free port; ``stop()`` ends that group."""

    def __init__(self, model: str, workers: int, extra: list[str]) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [
            sys.executable,
            "-m",
            "render_service",
            "serve",
            model,
            "--port",
            str(self.port),
            "--renderer-num-workers",
            str(workers),
            "--served-model-name",
            SERVED_NAME,
            "--log-level",
            "warning",
            *extra,
        ]
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error", PYTHONPATH=str(REPO))
        self.startup_cpu_s = 0.0  # CPU s of all its processes when /health first answered 200
        self.log = tempfile.TemporaryFile()  # a file, not a pipe: a full pipe would block the server
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            cmd, cwd=REPO, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=self.log
        )
        self.startup_s = self._wait(t0)

    def _wait(self, t0: float) -> float:
        deadline = t0 + 120
        with fresh_client(1) as client:
            while time.perf_counter() < deadline:
                if self.proc.poll() is not None:
                    self.log.seek(0)
                    raise RuntimeError(f"server exited: {self.log.read().decode(errors='replace')[-500:]}")
                try:
                    if client.get(self.url + "/health").status_code == 200:
                        self.startup_cpu_s = light.proc_cpu_s(_tree(self.proc.pid))
                        return time.perf_counter() - t0
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)
        raise RuntimeError("server did not become healthy in 120 s")

    def settle(self, timeout: float = 60.0) -> None:
        """Wait until the server's processes stop using CPU (background set-up such as the fast
        encoder build finished), so throughput runs measure requests only."""
        deadline = time.perf_counter() + timeout
        last = light.proc_cpu_s(_tree(self.proc.pid))
        while time.perf_counter() < deadline:
            time.sleep(0.5)
            now = light.proc_cpu_s(_tree(self.proc.pid))
            if now - last < 0.05:
                return
            last = now

    def rss_mb(self, key: str = "VmRSS") -> list[float]:
        """RSS (``VmRSS``; ``VmHWM`` = peak) of every process of the server, MB."""
        return [_rss_mb(p, key) for p in _tree(self.proc.pid)]

    def stop(self) -> None:
        """SIGTERM the server's own process group, SIGKILL after 10 s."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


def _bodies(ctx: Any, name: str) -> dict[str, list[dict[str, Any]]]:
    big = chat_9k(ctx.shared)
    shorts = short_chats(ctx.shared, ctx.n_short)
    return {"chat_9k": [dict(big, model=name)], "short chats": [dict(b, model=name) for b in shorts]}


def workers(res: Any, ctx: Any) -> None:
    """Per worker count: start-up, throughput for chat_9k and short chats with the light client
    (:mod:`benchmarks.light`), server CPU per request from /proc, RSS per process, and the
    N-worker / 1-worker throughput ratio; with 1 worker also streaming derender per chunk over HTTP."""
    rates: dict[tuple[str, int], float] = {}
    for n in ctx.workers:
        try:
            server = ctx.server(n)
        except RuntimeError as exc:
            res.skip("http", f"serve --renderer-num-workers {n}", str(exc)[:160])
            continue
        res.add(
            "http", f"start-up to /health, {n} worker(s)", server.startup_s, "s", TARGET_STARTUP_S,
            note=f"CPU of the server's processes by then {server.startup_cpu_s:.2f} s; "
            f"load avg {os.getloadavg()[0]:.1f}",
        )
        server.settle()
        for label, bodies in _bodies(ctx, SERVED_NAME).items():
            name = f"render {label} throughput, {n} worker(s), {ctx.concurrency} connections"
            run = light.throughput(
                server.url, "/v1/chat/completions/render", bodies, ctx.concurrency, ctx.duration,
                _tree(server.proc.pid), workers=n,
            )
            if run.error:
                res.skip("http", name, f"server answered {run.error}", unit="req/s")
                continue
            rates[(label, n)] = run.rate
            res.add(
                "http", name, run.rate, "req/s",
                note=f"median wall {run.latency_ms:.1f} ms; server CPU {run.server_cpu_ms:.2f} ms/req "
                f"({run.server_cpu_share:.2f} cores busy); client CPU {run.client_cpu_ms:.3f} ms/req; "
                f"load avg {os.getloadavg()[0]:.1f}",
            )
        if n == 1:
            _http_stream(res, ctx, server)
        rss, peak = server.rss_mb(), server.rss_mb("VmHWM")
        res.add(
            "http",
            f"RSS per process after the runs, {n} worker(s)",
            max(rss),
            "MB",
            TARGET_RSS_MB,
            note=f"{len(rss)} processes: "
            + ", ".join(f"{x:.0f}" for x in rss)
            + "; peak "
            + ", ".join(f"{x:.0f}" for x in peak),
        )
    for label in ("chat_9k", "short chats"):
        base = rates.get((label, ctx.workers[0]))
        for n in ctx.workers[1:]:
            if base and (label, n) in rates:
                res.add(
                    "http",
                    f"{label}: {n} workers / {ctx.workers[0]} worker throughput",
                    rates[(label, n)] / base,
                    "x",
                    TARGET_SCALING if n == 2 else None,
                )


def _http_stream(res: Any, ctx: Any, server: Server) -> None:
    """Streaming derender over HTTP, 1 token per chunk, one connection: median wall per chunk and
    the server's CPU per chunk (the in-process rows measure ``derender_chat`` alone)."""
    from .data import template_text
    from .stream import chunk_body, output_ids

    request = chat_request()
    prompt_ids = ctx.encode(template_text(ctx.bundle.tokenizer, request))
    # --quick: 300 chunks (the in-process stream section's last quick position) instead of 1,000:
    # a median over 300 one-token chunks is still a true figure; the full run is unchanged
    ids = output_ids(ctx.encode, HTTP_STREAM_QUICK_TOKENS if ctx.quick else HTTP_STREAM_TOKENS)

    def make(i: int, previous: Any) -> dict[str, Any]:
        state = previous["stream_state"] if previous else None
        first = previous is None
        return chunk_body(
            [ids[i]], state, prompt_ids=prompt_ids if first else None, request=request if first else None
        )

    try:
        wall, cpu = light.chained_ms(
            server.url, "/v1/chat/completions/derender", make, len(ids), _tree(server.proc.pid)
        )
    except (RuntimeError, OSError) as exc:
        res.skip("http", "HTTP derender chunk (1 token), 1 worker", str(exc)[:160])
        return
    res.add(
        "http",
        "HTTP derender chunk (1 token), 1 worker",
        wall,
        note=f"median wall over {len(ids)} chunks; server CPU {cpu:.3f} ms/chunk",
    )


def _peer_model(url: str) -> str | None:
    try:
        return httpx.get(url + "/v1/models", timeout=10).json()["data"][0]["id"]
    except (httpx.HTTPError, KeyError, IndexError, ValueError):
        return None


def _median_wall(url: str, path: str, make_body: Any, repeat: int) -> tuple[float | None, Any]:
    """Median wall ms of ``repeat`` POSTs of ``make_body(i)``; (None, error text) on a non-200 answer,
    else (ms, the last response's JSON)."""
    with httpx.Client(base_url=url, timeout=120) as c:
        samples, last = [], None
        for i in range(repeat):
            body = make_body(i)
            t0 = time.perf_counter()
            r = c.post(path, json=body)
            if r.status_code != 200:
                return None, f"{r.status_code} {r.text[:120]}"
            samples.append(time.perf_counter() - t0)
            last = r.json()
    return statistics.median(samples) * 1e3, last


def peer(res: Any, ctx: Any) -> None:
    """Same render/derender requests to our server and to ``PEER_URL``; ratio peer/ours of median wall.

    Render bodies carry a fresh nonce per request in every message (nothing cacheable on either side);
    the note says whether both servers produced the same prompt ``token_ids``.
    """
    if not ctx.peer_url:
        res.skip(
            "peer", "peer comparison", "set PEER_URL (or --peer-url) to a running render server", unit="x"
        )
        return
    peer_name = _peer_model(ctx.peer_url)
    if peer_name is None:
        res.skip("peer", "peer comparison", f"{ctx.peer_url}/v1/models did not answer", unit="x")
        return
    ours = ctx.server(1)
    for label, path, body in _peer_cases(ctx):
        cold = path.endswith("/render")

        def make(name: str, tag: str, body: dict[str, Any] = body, cold: bool = cold) -> Any:
            return lambda i: dict(with_nonce(body, f"{tag}{i}") if cold else body, model=name)

        mine, out1 = _median_wall(ours.url, path, make(SERVED_NAME, "p"), ctx.repeat)
        theirs, out2 = _median_wall(ctx.peer_url, path, make(peer_name, "p"), ctx.repeat)
        if mine is None or theirs is None:
            errors = f"ours: {out1 if mine is None else 'ok'}; peer: {out2 if theirs is None else 'ok'}"
            res.skip("peer", f"{label}: peer / ours wall", errors, unit="x")
            continue
        same = ""
        if cold:
            same = f"; token_ids equal: {'yes' if out1.get('token_ids') == out2.get('token_ids') else 'NO'}"
        res.add(
            "peer",
            f"{label}: peer / ours wall",
            theirs / mine,
            "x",
            note=f"ours {mine:.1f} ms, peer {theirs:.1f} ms{same}",
        )


def _peer_cases(ctx: Any) -> list[tuple[str, str, dict[str, Any]]]:
    from .data import template_text
    from .stream import output_ids

    request = chat_request()
    prompt_ids = ctx.encode(template_text(ctx.bundle.tokenizer, request))
    ids = output_ids(ctx.encode, 200)
    batch = {
        "generate_response": {
            "request_id": "generate-tokens-chatcmpl-bench",
            "choices": [{"index": 0, "token_ids": ids, "finish_reason": "stop", "stop_reason": None}],
        },
        "prompt_token_ids": prompt_ids,
        "chat_request": dict(request, stream=False),
    }
    short = short_chats(ctx.shared, 1)[0]
    return [
        ("render chat_9k", "/v1/chat/completions/render", chat_9k(ctx.shared)),
        ("render short chat", "/v1/chat/completions/render", short),
        (
            "render tools chat",
            "/v1/chat/completions/render",
            {"messages": request["messages"], "tools": TOOLS},
        ),
        ("derender batch 200-token think+tool", "/v1/chat/completions/derender", batch),
    ]
