"""Failover without loss, over real HTTP: replicas started as separate processes with the same
model and parser flags and **no key configured** (the README's plain command) take a stream's
chunks alternately; one is SIGKILLed mid-stream and the client retries the failed chunk on the
other. The joined deltas equal the batch result (nothing lost or repeated, same tool-call ids).
The same across the two worker processes of one ``--renderer-num-workers 2`` replica (one worker
killed).

Qwen3 with ``--reasoning-parser qwen3 --tool-call-parser hermes --enable-auto-tool-choice``; the
output has reasoning, text, two tool calls and a stop string; one token per chunk.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest
from derender_helpers import QWEN3, bundle
from test_e2e_derender import TOOLS, joined

from benchmarks.http_servers import _free_port, _tree, fresh_client
from benchmarks.light import Connection, _owner, balanced_connections, raw_request

REPO = Path(__file__).resolve().parents[1]
PATH = "/v1/chat/completions/derender"
FLAGS = ["--reasoning-parser", "qwen3", "--tool-call-parser", "hermes", "--enable-auto-tool-choice"]
ANSWER = (
    "<think>\nTwo cities, so two calls.\n</think>\n\nLet me check both."
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>\n'
    "Done. STOP and this is never shown.<|im_end|>"
)
CHAT = {"messages": [{"role": "user", "content": "weather in Paris and Rome?"}], "tools": TOOLS,
        "stop": ["STOP"], "stream": True}


class Replica:
    """``python -m render_service serve`` with FLAGS (embedded Qwen3) in its own process group."""

    def __init__(self, workers: int = 1) -> None:
        self.url = f"http://127.0.0.1:{_free_port()}"
        env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error")
        for name in ("RENDER_SERVICE_STREAM_STATE_KEYS", "RENDER_SERVICE_STREAM_STATE_KEY_FILE"):
            env.pop(name, None)
        cmd = [sys.executable, "-m", "render_service", "serve", "--port", self.url.rsplit(":", 1)[1],
               "--renderer-num-workers", str(workers), "--log-level", "warning", *FLAGS]
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, start_new_session=True,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.workers = workers

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 90
        with fresh_client(1) as client:  # httpx.get per poll built an SSL context each time (~36 CPU-ms)
            while time.monotonic() < deadline:
                assert self.proc.poll() is None, "replica exited"
                try:
                    if client.get(self.url + "/ready").status_code == 200:
                        if self.workers == 1 or len(self.pids()) > self.workers:
                            return
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        raise RuntimeError("replica not ready")

    def pids(self) -> list[int]:
        return _tree(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture(scope="module")
def replicas():
    """A 1-worker replica and a 2-worker replica, started at once. The replica test kills the
    1-worker one and finishes on the 2-worker one (the worker count is no part of the
    configuration fingerprint, so their states are interchangeable as between two 1-worker
    replicas); the worker test kills one of the 2-worker replica's workers (a test run first
    leaves the other's replica serving: its replacement worker or its survivor answers). One
    replica process fewer than a third, separate replica for the worker test (~7 CPU-s: a load and
    a fast-encoder build)."""
    started = [Replica(), Replica(workers=2)]
    try:
        for r in started:
            r.wait_ready()
        yield started
    finally:
        for r in started:
            r.stop()


def _post(conn: Connection, url: str, body: dict) -> dict:
    status, data = conn.send(raw_request(url, PATH, body))
    assert status == 200, data[:300]
    return orjson.loads(data)


def _stream(targets, ids, prompt_ids, kill_at, kill):
    """Send one token per chunk, alternating over ``targets`` [(conn, url)]; before chunk
    ``kill_at`` call ``kill()``; a chunk whose send fails is retried on the next target."""
    state, chunks, alive = None, [], list(targets)
    for i, token in enumerate(ids):
        if i == kill_at:
            kill()
        body = {"stream": True, "stream_state": state, "generate_chunk": {
            "request_id": "chatcmpl-failover",
            "choices": [{"index": 0, "token_ids": [token], "finish_reason": None}]}}
        if state is None:
            body.update(chat_request=CHAT, prompt_token_ids=prompt_ids)
        turn = i
        while True:
            conn, url = alive[turn % len(alive)]
            try:
                out = _post(conn, url, body)
                break
            except OSError:  # the replica (or worker) died: drop it, retry this chunk elsewhere
                alive.remove((conn, url))
                assert alive, "no replica left"
        state = out["stream_state"]
        chunks.append(out["chunk"])
        if out["stop_generation"]:
            break
    return chunks, len(alive)


def _batch(url, ids, prompt_ids):
    gen = {"request_id": "chatcmpl-failover",
           "choices": [{"index": 0, "token_ids": ids, "finish_reason": "length"}]}
    r = httpx.post(url + PATH, json={"generate_response": gen, "chat_request": dict(CHAT, stream=False),
                                     "prompt_token_ids": prompt_ids}, timeout=30)
    assert r.status_code == 200, r.text
    c = r.json()["choices"][0]
    msg = c["message"]
    calls = [{"id": t["id"], "name": t["function"]["name"], "arguments": t["function"]["arguments"]}
             for t in msg["tool_calls"]]
    return msg["content"], msg["reasoning"], calls, c["finish_reason"]


def _case(url):
    tok = bundle(QWEN3).tokenizer
    ids = tok.encode(ANSWER, add_special_tokens=False)
    r = httpx.post(url + "/v1/chat/completions/render", json=CHAT, timeout=30)
    assert r.status_code == 200, r.text
    return ids, r.json()["token_ids"]


def _check(chunks, batch):
    content, reasoning, calls, finish = joined(chunks)
    assert (content, reasoning, calls, finish) == batch
    assert reasoning == "\nTwo cities, so two calls.\n" and "never shown" not in content
    assert [c["name"] for c in calls] == ["get_weather", "get_weather"]
    assert chunks[-1]["choices"][0]["stop_reason"] == "STOP"


def test_failover_between_replicas(replicas):
    """Alternate chunks over two replicas; SIGKILL one in the middle; the stream completes on the
    survivor and equals the batch derender."""
    a, b = replicas[0], replicas[1]
    ids, prompt_ids = _case(a.url)
    batch = _batch(b.url, ids, prompt_ids)
    targets = [(Connection(a.url), a.url), (Connection(b.url), b.url)]
    chunks, left = _stream(targets, ids, prompt_ids, len(ids) // 2,
                           lambda: os.killpg(a.proc.pid, signal.SIGKILL))
    assert left == 1
    _check(chunks, batch)


def test_failover_between_worker_processes(replicas):
    """One replica, two worker processes (one connection held by each): kill one worker
    mid-stream; the other finishes the stream, equal to the batch derender."""
    c = replicas[1]
    ids, prompt_ids = _case(c.url)
    batch = _batch(c.url, ids, prompt_ids)
    # the held connections are opened last: an idle one is closed by the server after its
    # keep-alive timeout, which a loaded machine can reach between setup steps
    conns = balanced_connections(c.url, 2, 2, c.pids())
    owners = [_owner(conn, c.pids()) for conn in conns]
    assert len(conns) == 2 and len(set(owners)) == 2 and None not in owners
    chunks, left = _stream([(conn, c.url) for conn in conns], ids, prompt_ids, len(ids) // 2,
                           lambda: os.kill(owners[0], signal.SIGKILL))
    assert left == 1
    _check(chunks, batch)
