"""Gateway section: server CPU per streamed token through ``/v1/chat/completions`` (gateway mode)
against one batch derender of the same output and against the per-chunk HTTP derender path.

A scripted engine (``python -m render_service.testing.engine``, one token id per SSE event, no
delay) answers the stream benchmark's output (long reasoning, then a hermes tool call); the gateway
is ``python -m render_service serve MODEL --engine-url ...`` with the qwen3/hermes parsers. CPU is
the gateway process's own (``/proc/PID/task/*/schedstat``, nanoseconds: a stream costs a few
tenths of a second, which 10 ms ticks would round by several per cent), so the client's and the
engine's work is not counted.

Rows (per output token):

* gateway stream: server CPU of whole streamed requests (render, engine call, in-memory derender of
  every event, SSE out) / tokens streamed;
* one batch derender: in-process ``derender_chat`` of the whole output (``stream`` false) / tokens;
  the ratio's goal is 3x;
* gateway JSON: the same request with ``stream`` false (engine JSON, one batch derender);
* per-chunk HTTP path: ``/v1/chat/completions/derender`` with ``stream_state``, 1 token per call,
  server CPU per call (what a client driving the hops itself costs this tier);
* (full run only) gateway stream at 10 tokens per engine event: the engine restarted with
  ``--chunk-size 10``, what a vLLM engine started with ``--stream-interval 10`` sends (vLLM's knob
  for host overhead per streamed token); the same output, a tenth of the events.

What the first figure is: the scripted engine sends each event as soon as it can (no delay,
a few tenths of a millisecond apart on this machine) and the gateway keeps up, so every network
read holds one event and every token costs one engine read, one derender step and one client
write: a cost per event, which the batch derender amortises over the whole output.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from typing import Any

import httpx
import orjson

from . import http_servers, light
from .gateway_load import _free_port, _start
from .stream import SENTENCE, TAIL, chat_request, chunk_body
from .table import Results, cpu_ms

TARGET_VS_BATCH = ("<=", 3.0)


def _stream_tokens(url: str, body: dict[str, Any]) -> int:
    """Stream one request; the number of completion tokens it reported."""
    usage = 0
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=120) as r:
        if r.status_code != 200:
            raise RuntimeError(f"gateway answered {r.status_code}: {r.read()[:200]!r}")
        for line in r.iter_lines():
            if line.startswith('data: {"error"'):
                raise RuntimeError(line[:200])
            if line.startswith("data: {"):
                chunk = orjson.loads(line[6:])
                usage = (chunk.get("usage") or {}).get("completion_tokens") or usage
    return usage


def engine_text(ctx: Any) -> str:
    """The scripted engine's output: long reasoning (4 sentences in quick runs, else 60), a tool call."""
    return "<think>\n" + SENTENCE * (4 if ctx.repeat <= 3 else 60) + TAIL


def start_engine(ctx: Any) -> tuple[subprocess.Popen[bytes], str, list[str]]:
    """Start the scripted engine (1 token id per event) on a free port: ``(process, url, command)``."""
    port = _free_port()
    cmd = [sys.executable, "-m", "render_service.testing.engine", "--port", str(port),
           "--model", ctx.model, "--text", engine_text(ctx), "--chunk-size", "1"]
    url = f"http://127.0.0.1:{port}"
    return _start(cmd, url, "/scripted/stats"), url, cmd


def stop_engine(engine: subprocess.Popen[bytes]) -> None:
    """End a scripted engine process."""
    engine.terminate()
    engine.wait(10)


def gateway(res: Results, ctx: Any) -> None:
    """See the module docstring. The 1-worker server of the run (``ctx.server(1)``, started with
    ``--engine-url`` of ``ctx.engine()`` when this section is chosen) is the gateway; run alone
    on a context without the engine, the section starts its own engine and gateway."""
    quick = ctx.repeat <= 3
    ids = ctx.bundle.tokenizer.encode(engine_text(ctx), add_special_tokens=False)
    shared = getattr(ctx, "with_engine", False)
    engine, engine_url, cmd = ctx.engine() if shared else start_engine(ctx)
    server = None
    try:
        server = ctx.server(1) if shared else http_servers.Server(
            ctx.model, 1, [*http_servers.PARSER_FLAGS, "--engine-url", engine_url])
        server.settle()
        pids = http_servers._tree(server.proc.pid)
        request = chat_request()
        body = {**request, "max_tokens": 8000, "stream_options": {"include_usage": True}}
        _stream_tokens(server.url, body)  # warm-up: the first render starts the fast-encoder build
        server.settle()
        runs = 3 if quick else 10

        def streamed_ms() -> float:
            """Median server CPU per streamed token (ms) over ``runs`` streams of ``body``."""
            per_token = []
            for _ in range(runs):
                cpu0 = light.proc_cpu_ns_s(pids)
                tokens = _stream_tokens(server.url, body)
                per_token.append((light.proc_cpu_ns_s(pids) - cpu0) / tokens * 1e3)
            return statistics.median(per_token)

        stream_ms = streamed_ms()
        res.add("gateway", "server CPU per streamed token, gateway (1 token/event)", stream_ms,
                note=f"{len(ids)} tokens per stream, median of {runs} streams")

        from render_service.derender import derender_chat

        batch = {"generate_response": {"request_id": "b", "choices": [{"index": 0, "token_ids": ids}]},
                 "chat_request": request}
        batch_ms = cpu_ms(lambda: derender_chat(ctx.bundle, ctx.settings, batch), ctx.repeat) / len(ids)
        res.add("gateway", "CPU per token, one batch derender (in-process)", batch_ms)
        res.add("gateway", "gateway stream / one batch derender, per token", stream_ms / batch_ms, "x",
                TARGET_VS_BATCH, note="fixed cost per engine event (socket read, step, socket write)")

        json_body = {**request, "stream": False, "max_tokens": 8000}
        cpu0 = light.proc_cpu_ns_s(pids)
        for _ in range(runs):
            r = httpx.post(server.url + "/v1/chat/completions", json=json_body, timeout=120)
            r.raise_for_status()
        json_ms = (light.proc_cpu_ns_s(pids) - cpu0) / (runs * len(ids)) * 1e3
        res.add("gateway", "server CPU per token, gateway JSON request (same output)", json_ms)
        res.add("gateway", "gateway stream / gateway JSON, per token", stream_ms / json_ms, "x")

        prompt = server_prompt(server.url, request)

        def make(i: int, previous: Any) -> dict[str, Any]:
            first = previous is None
            return chunk_body([ids[i]], None if first else previous["stream_state"],
                              prompt_ids=prompt if first else None, request=request if first else None)

        _, http_ms = light.chained_ms(server.url, "/v1/chat/completions/derender", make, len(ids), pids)
        res.add("gateway", "server CPU per token, per-chunk HTTP derender (1 token/call)", http_ms)
        res.add("gateway", "gateway stream / per-chunk HTTP path, per token", stream_ms / http_ms, "x",
                ("<=", 1.0))
        if not quick:  # the same output at 10 tokens per engine event (vLLM --stream-interval 10)
            stop_engine(engine)
            engine = _start(cmd[:-1] + ["10"], engine_url, "/scripted/stats")
            if shared:  # the run's context stops it at the end
                ctx.gateway_engine = (engine, engine_url, cmd)
            _stream_tokens(server.url, body)
            interval_ms = streamed_ms()
            res.add("gateway", "server CPU per streamed token, gateway (10 tokens/event)", interval_ms,
                    note="engine as vLLM --stream-interval 10")
            res.add("gateway", "gateway stream at 10 tokens/event / one batch derender",
                    interval_ms / batch_ms, "x")
    except (RuntimeError, OSError, httpx.HTTPError) as exc:
        res.skip("gateway", "gateway CPU per streamed token", f"{type(exc).__name__}: {exc}"[:160])
    finally:
        if not shared:
            if server is not None:
                server.stop()
            stop_engine(engine)


def server_prompt(url: str, request: dict[str, Any]) -> list[int]:
    """The rendered prompt ids of ``request`` (first streaming derender call needs them)."""
    r = httpx.post(url + "/v1/chat/completions/render", json=request, timeout=60)
    r.raise_for_status()
    return list(r.json()["token_ids"])
