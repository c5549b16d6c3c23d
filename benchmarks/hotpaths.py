"""The ``hotpaths`` section: **server CPU** per request over HTTP (``/proc`` ticks of every server
process, one keep-alive connection, light client), measured interleaved in one run.

CPU is read per thread from ``/proc/PID/task/TID/schedstat`` (ns), not from 10 ms ticks.

* ``render chat_9k``: ``/v1/chat/completions/render`` of ../shared/bench/chat_9k.json with only
  the last message varied per request (earlier turns repeat, as in a conversation), for ours and,
  when ``RS_URL`` / ``PEER_URL`` are set, for ``vllm-rs render`` and ``vllm launch render``
  (and with ``BEFORE_URL``, a server of another build of ours started with the same flags)
  (processes found by their listening port; they must run on this machine). Target: ours below
  vllm-rs. The same for a 2-message chat (:data:`SHORT_CHAT`): the fixed per-request cost.
* ``later chunk``: a streaming chat derender call carrying one token, the previous
  ``stream_state`` and nothing else (no ``chat_request``, no prompt ids), against the bare route of
  :mod:`benchmarks.bare_server` (same uvicorn stack, orjson parse of the very same request bytes,
  an answer of the same size). Target: ours / bare ≤ 1.3.
* ``per token``: server CPU per output token at 1, 4 and 16 tokens per chunk, at output
  position 20 and 1,000 (the state is opened by one call carrying the first ``pos`` tokens), for
  ours and, with ``PEER_URL``, the vLLM peer (whose streaming derender replays the output, so it
  must be sent ``chat_request`` and prompt ids on every call).
"""

from __future__ import annotations

import copy
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import httpx
import orjson

from . import light
from .data import REPO, chat_9k
from .http_servers import SERVED_NAME, _free_port, _peer_model, _tree
from .stream import chat_request, chunk_body, output_ids

TARGET_RATIO = ("<=", 1.3)
TARGET_VS_RS = ("<=", 1.0)
CHUNK_SIZES = (1, 4, 16)
POSITIONS = (20, 1000)
#: Interleaved rounds per comparison (``--quick``: 3): short rounds in alternating order, so a
#: change of the machine's load during the run weighs on every server alike.
ROUNDS = 9
#: Rounds of the later-chunk comparison (``--quick``: 3): each is only ~100 calls per server, so
#: more of them keep one load burst on the shared machine from deciding the medians.
CHUNK_ROUNDS = 21
#: Chained calls per round and server in the later-chunk comparison (``--quick``: 20).
CHUNK_CALLS = 200


def _listening_pids(url: str) -> list[int]:
    """The process listening on ``url``'s port (``/proc/net/tcp`` + fd scan) and its descendants."""
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    inodes = {f"socket:[{inode}]" for local, _, state, inode in light.tcp_sockets()
              if local == port and state == "0A"}  # 0A: LISTEN
    pid = light.holder(inodes, sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
    return _tree(pid) if pid is not None else []


class Bare:
    """The bare route server (its own process) answering ``size`` bytes."""

    def __init__(self, size: int) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.bare_server", "--port", str(self.port), "--size", str(size)],
            cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=subprocess.DEVNULL,
            stderr=self.log, start_new_session=True,
        )
        deadline = time.perf_counter() + 60
        while time.perf_counter() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("bare server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()


def _send_all(url: str, requests: list[bytes], pids: list[int]) -> float:
    """Server CPU ms per request of ``requests`` sent one after another on one connection."""
    conn = light.Connection(url)
    try:
        conn.send(requests[0])  # warm the connection
        cpu0 = light.thread_cpu_ns(pids)
        for req in requests:
            status, data = conn.send(req)
            if status != 200:
                raise RuntimeError(f"{url} answered {status}: {data[:160]!r}")
        return light.cpu_since(cpu0, pids) / len(requests) * 1e3
    finally:
        conn.close()


def _stream(
    url: str, pids: list[int], first: dict[str, Any], later: Any, count: int
) -> tuple[float, list[bytes], float]:
    """Open a stream with ``first``, then ``count`` chained calls ``later(i, state)``. Returns the
    server CPU ms per later call, the later calls' request bytes, and their mean answer size."""
    conn = light.Connection(url)
    path = "/v1/chat/completions/derender"
    try:
        status, data = conn.send(light.raw_request(url, path, first))
        if status != 200:
            raise RuntimeError(f"{url} answered {status}: {data[:200]!r}")
        state = orjson.loads(data)["stream_state"]
        sent, sizes = [], []
        cpu0 = light.thread_cpu_ns(pids)
        for i in range(count):
            req = light.raw_request(url, path, later(i, state))
            status, data = conn.send(req)
            if status != 200:
                raise RuntimeError(f"{url} answered {status}: {data[:200]!r}")
            state = orjson.loads(data)["stream_state"]
            sent.append(req)
            sizes.append(len(data))
        cpu = light.cpu_since(cpu0, pids) / count * 1e3
        return cpu, sent, statistics.mean(sizes)
    finally:
        conn.close()


#: The smallest real render: a system prompt and one user message, no tools (its cost is the
#: fixed per-request cost, e.g. most of a cached image turn's).
SHORT_CHAT: dict[str, Any] = {"messages": [{"role": "system", "content": "You are a helpful assistant."},
                                           {"role": "user", "content": "What is the capital of France?"}],
                              "max_tokens": 64}


def _last_varied(body: dict[str, Any], nonce: str) -> dict[str, Any]:
    out = copy.copy(body)
    out["messages"] = list(body["messages"])
    last = dict(out["messages"][-1])
    last["content"] = f"[{nonce}] {last['content']}"
    out["messages"][-1] = last
    return out


def render_rows(res: Any, ctx: Any) -> None:
    """Server CPU per chat_9k render over HTTP (last message varied), ours vs vllm-rs vs vllm."""
    ours = ctx.server(1)
    ours.settle()
    targets = [("ours", ours.url, _tree(ours.proc.pid), SERVED_NAME)]
    for label, env in (("vllm-rs render", "RS_URL"), ("vllm launch render", "PEER_URL"),
                       ("another build", "BEFORE_URL")):
        url = os.environ.get(env) or (ctx.peer_url if env == "PEER_URL" else None)
        if not url and env == "BEFORE_URL":  # optional: a render-service of another commit
            continue
        if not url:
            res.skip("hotpaths", f"render chat_9k server CPU, {label}", f"set {env}")
            continue
        pids, name = _listening_pids(url), _peer_model(url)
        if not pids or name is None:
            res.skip("hotpaths", f"render chat_9k server CPU, {label}",
                     f"{url}: no local process or /v1/models")
            continue
        targets.append((label, url, pids, name))
    base = chat_9k(ctx.shared)
    rounds = ROUNDS if ctx.repeat >= 10 else 3
    n = max(10, ctx.repeat // 3)
    samples: dict[str, list[float]] = {t[0]: [] for t in targets}
    short: dict[str, list[float]] = {t[0]: [] for t in targets}
    ids: dict[str, Any] = {}
    for rnd in range(rounds):  # short interleaved rounds, order reversed every other round
        for label, url, pids, name in (targets if rnd % 2 == 0 else targets[::-1]):
            reqs = [light.raw_request(url, "/v1/chat/completions/render",
                                      dict(_last_varied(base, f"r{rnd}-{i}"), model=name)) for i in range(n)]
            samples[label].append(_send_all(url, reqs, pids))
            reqs = [light.raw_request(url, "/v1/chat/completions/render",
                                      dict(_last_varied(SHORT_CHAT, f"r{rnd}-{i}"), model=name))
                    for i in range(2 * n)]
            short[label].append(_send_all(url, reqs, pids))
            if rnd == 0:
                body = dict(_last_varied(base, "check"), model=name)
                answer = httpx.post(url + "/v1/chat/completions/render", json=body, timeout=60)
                ids[label] = answer.json().get("token_ids")
    cpu = {k: statistics.median(v) for k, v in samples.items()}
    for label, *_ in targets:
        equal = "yes" if ids[label] == ids["ours"] else "NO"
        same = "" if label == "ours" else f"; token_ids equal to ours: {equal}"
        res.add("hotpaths", f"render chat_9k over HTTP, server CPU/req, {label}", cpu[label],
                note=f"median of {rounds} interleaved rounds of {n}; last message varied{same}")
    for label, *_ in targets:
        res.add("hotpaths", f"render 2-message chat over HTTP, server CPU/req, {label}",
                statistics.median(short[label]), note=f"median of {rounds} interleaved rounds of {2 * n}")
    if "vllm-rs render" in cpu:
        res.add("hotpaths", "render chat_9k server CPU: ours / vllm-rs", cpu["ours"] / cpu["vllm-rs render"],
                "x", TARGET_VS_RS, note="goal beyond: 0.5")
        # each round sends to both back to back: its ratio sees one machine load (the medians of
        # each side alone drift with other jobs' load between rounds, either way)
        for what, rows in (("chat_9k", samples), ("2-message chat", short)):
            pairs = zip(rows["ours"], rows["vllm-rs render"], strict=True)
            paired = statistics.median(x / y for x, y in pairs)
            res.add("hotpaths", f"render {what}: ours / vllm-rs, median of per-round ratios", paired, "x",
                    TARGET_VS_RS if what == "chat_9k" else None, note=f"{rounds} rounds")
    if "vllm launch render" in cpu:
        res.add("hotpaths", "render chat_9k server CPU: ours / vllm launch render",
                cpu["ours"] / cpu["vllm launch render"], "x")


def chunk_rows(res: Any, ctx: Any) -> None:
    """Later 1-token chunk: ours vs the bare route, interleaved; then per-token CPU by chunk size."""
    from .data import template_text

    ours = ctx.server(1)
    ours.settle()  # the background encoder build must not be counted as chunk CPU
    ours_pids = _tree(ours.proc.pid)
    _quiet(ours_pids)
    request = chat_request()
    prompt_ids = ctx.encode(template_text(ctx.bundle.tokenizer, request))
    ids = output_ids(ctx.encode, 1400)
    rounds = CHUNK_ROUNDS if ctx.repeat >= 10 else 3
    count = CHUNK_CALLS if ctx.repeat >= 10 else 20

    def first(n: int, model: str | None = None) -> dict[str, Any]:
        body = chunk_body(ids[:n], None, prompt_ids=prompt_ids, request=request)
        return dict(body, model=model) if model else body

    def later(i: int, st: Any) -> dict[str, Any]:
        return chunk_body([ids[20 + i]], st)

    def to_bare(sent: list[bytes]) -> list[bytes]:
        return [r.replace(b"/v1/chat/completions/derender", b"/bare", 1) for r in sent]

    mine: list[float] = []
    bare_cpu: list[float] = []
    bare: Bare | None = None
    load = [_load_average()]
    try:
        # warm-up, not counted: one stream on ours (its answers size the bare route's), then the
        # same requests on the fresh bare server, so that neither server's first rounds are cold
        _, sent, size = _stream(ours.url, ours_pids, first(20), later, count)
        bare = Bare(int(size))
        bare_pids = _tree(bare.proc.pid)
        path_bytes = to_bare(sent)
        _send_all(bare.url, path_bytes, bare_pids)
        for rnd in range(rounds):  # short interleaved rounds, order reversed every other round
            if rnd % 2:
                bare_cpu.append(_send_all(bare.url, path_bytes, bare_pids))
            cpu, sent, _ = _stream(ours.url, ours_pids, first(20), later, count)
            mine.append(cpu)
            path_bytes = to_bare(sent)
            if rnd % 2 == 0:
                bare_cpu.append(_send_all(bare.url, path_bytes, bare_pids))
    finally:
        if bare is not None:
            bare.stop()
    load.append(_load_average())
    m, b = statistics.median(mine), statistics.median(bare_cpu)
    res.add("hotpaths", "later chunk (1 token) server CPU, ours", m,
            note=f"median of {rounds} interleaved rounds of {count} chained calls, answer ~{int(size)} B")
    res.add("hotpaths", "later chunk server CPU, bare route (orjson parse, same-size answer)", b,
            note="same uvicorn stack and request bytes, interleaved with ours")
    res.add("hotpaths", "later chunk: ours / bare route", m / b, "x", TARGET_RATIO,
            note=f"load average {load[0]:.1f} at the start, {load[1]:.1f} at the end (1 min)")
    # each round measures both servers back to back (order alternating): the ratio within a
    # round sees one machine load, so its median is the steadier figure under other agents' load
    paired = statistics.median(x / y for x, y in zip(mine, bare_cpu, strict=False))
    res.add("hotpaths", "later chunk: ours / bare route, median of per-round ratios", paired, "x",
            TARGET_RATIO, note=f"{len(bare_cpu)} rounds, each ours and bare back to back")
    _per_token(res, "ours", ours.url, ours_pids, first, ids, None, tokens=480 if ctx.repeat >= 10 else 48)
    peer_url = ctx.peer_url or os.environ.get("PEER_URL")
    if peer_url:
        pids, name = _listening_pids(peer_url), _peer_model(peer_url)
        if pids and name:
            _per_token(res, "vllm peer", peer_url, pids, lambda n: first(n, name), ids,
                       (name, prompt_ids, request), tokens=64)
        else:
            res.skip("hotpaths", "per-token CPU, vllm peer", f"{peer_url}: no local process or /v1/models")


def _quiet(pids: list[int], timeout: float = 120.0) -> None:
    """Wait until the threads of ``pids`` use under 5 ms of CPU in each of two consecutive
    0.5 s windows (nanosecond reads): a stricter wait than ``Server.settle``'s 10 ms ticks,
    whose 10 % bound a start-up thread still building under a load of 15 on two cores (about
    12 % of a core each) can pass while it keeps running into the measured rounds."""
    deadline, calm = time.perf_counter() + timeout, 0
    while calm < 2 and time.perf_counter() < deadline:
        before = light.thread_cpu_ns(pids)
        time.sleep(0.5)
        calm = calm + 1 if light.cpu_since(before, pids) < 0.005 else 0


def _load_average() -> float:
    """The machine's 1-minute load average (``/proc/loadavg``)."""
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def _per_token(res: Any, label: str, url: str, pids: list[int], first: Any, ids: list[int],
               peer: tuple[str, list[int], dict[str, Any]] | None, tokens: int) -> None:
    for pos in POSITIONS:
        for k in CHUNK_SIZES:
            calls = max(2, tokens // k)

            def later(i: int, st: Any, pos: int = pos, k: int = k) -> dict[str, Any]:
                chunk = ids[pos + i * k: pos + (i + 1) * k]
                if peer is None:
                    return chunk_body(chunk, st)
                name, prompt_ids, request = peer
                return dict(chunk_body(chunk, st, prompt_ids=prompt_ids, request=request), model=name)

            try:
                cpu, _, _ = _stream(url, pids, first(pos), later, calls)
            except RuntimeError as exc:
                res.skip("hotpaths", f"per-token CPU, {label}, {k} tok/chunk @ {pos}", str(exc)[:160])
                continue
            res.add("hotpaths", f"per-token CPU, {label}, {k} tok/chunk @ {pos}", cpu / k,
                    note=f"{calls} calls; {cpu:.3f} ms per call")


def hotpaths(res: Any, ctx: Any) -> None:
    """The section (see module docstring)."""
    chunk_rows(res, ctx)
    render_rows(res, ctx)
