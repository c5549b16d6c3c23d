"""Benchmark harness: ``python -m benchmarks.run [flags]`` prints one table of medians, ratios and targets.

Sections (``--only`` takes a comma list; default all):

* ``floor``     template text, HF encode vs FastEncoder, CachedEncoder turn k+1 after turn k (chat_9k),
                short chats — pure tokenization cost, in-process CPU.
* ``render``    ``render_chat`` CPU per request: chat_9k cold (nonce in every message) and repeated,
                short real chats (target: cold chat_9k ≤ 3 ms).
* ``multiturn`` ``render_chat`` of turn k+1 right after turn k (target ≤ 1 ms).
* ``stream``    ``derender_chat`` streaming CPU per 1-token chunk at output positions (qwen3 + hermes,
                long think block then a tool call; targets ≤ 0.3 ms, chunk@last ≤ 1.2× chunk@first) and
                the whole stream against one batch derender (≤ 1.5×).
* ``body``      request bytes of a later streaming chunk for 1k- and 100k-token prompts (≤ 1 KB at 100k).
* ``http``      servers started as ``python -m render_service serve MODEL --renderer-num-workers N``:
                start-up (≤ 3 s), render throughput for chat_9k / short chats, peak RSS per process
                (≤ 300 MB), N-worker / 1-worker throughput (2 workers ≥ 1.7×).
* ``gil``       whether HF and tiktoken encode release the GIL (stall of a spinning Python thread).
* ``hotpaths``  server CPU over HTTP: chat_9k render (ours; vllm-rs with ``RS_URL``; vllm with
                ``PEER_URL``), later chunk vs a bare route (≤ 1.3×), per-token CPU at 1/4/16 tokens
                per chunk at output positions 20 and 1,000 (:mod:`benchmarks.hotpaths`).
* ``gateway``   gateway mode (``serve --engine-url`` in front of a scripted engine): server CPU per
                streamed token against one batch derender of the same output (goal ≤ 3×), against
                the same request as JSON and against the per-chunk HTTP derender path. With this
                section chosen, every server of the run is started with ``--engine-url`` (the
                gateway's scripted engine), so this section reuses the 1-worker server of ``http``.
* ``peer``      with ``PEER_URL`` set: the same render/derender requests to that server; peer/ours ratio.
* ``multimodal`` server CPU per rendered image (640×480, 4000×3000) and per video on Qwen3-VL, ours,
                our cached second turn and, with ``PEER_URL`` a vLLM render of that model, the peer's
                (targets: ours ≤ 0.5× peer, cached ≤ 0.1× peer).

Rows whose code is not written yet (``NotImplementedError``) print ``skip`` with the reason.
CPU figures are ``time.process_time`` medians in this process; HTTP figures are wall time.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import gateway_cpu, hotpaths, http_servers, inproc, multimodal, stream
from .data import shared_dir
from .table import Results, render_table

SECTIONS: dict[str, Callable[[Results, Any], None]] = {
    "floor": inproc.floor,
    "render": inproc.render,
    "multiturn": inproc.multiturn,
    "stream": stream.stream,
    "body": stream.body_size,
    "http": http_servers.workers,
    "gil": inproc.gil,
    "gateway": gateway_cpu.gateway,
    "peer": http_servers.peer,
    "hotpaths": hotpaths.hotpaths,
    "multimodal": multimodal.multimodal,
}


@dataclass
class Context:
    """Everything a section needs; the bundle, fast encoder and servers are created once and shared."""

    shared: Path
    model: str
    repeat: int
    n_short: int
    stream_positions: list[int]
    stream_budget: float
    body_prompts: list[int]
    workers: list[int]
    concurrency: int
    duration: float
    peer_url: str | None
    #: ``--quick``: sections whose repeats are fixed (not ``repeat``) take fewer where one sample
    #: already gives a true figure; the full run's method is unchanged
    quick: bool = False
    bundle: Any = None
    settings: Any = None
    fast: Any = None
    servers: dict[int, Any] = field(default_factory=dict)
    #: with the ``gateway`` section chosen: the scripted engine (:func:`gateway_cpu.start_engine`)
    #: every server of this run is started in front of (``--engine-url``), so the gateway section
    #: reuses the 1-worker server instead of starting its own; ``(process, url, command)``.
    gateway_engine: Any = None
    with_engine: bool = False

    def load(self) -> None:
        """Load the model bundle (as the server does) and build the fast encoder."""
        from render_service.models import load_bundle
        from render_service.settings import Settings
        from render_service.tokens.fast_tokenizer import build_fast_encoder

        # the same configuration as the HTTP servers (qwen3 reasoning + hermes tools, auto tool choice)
        self.settings = Settings(
            model=self.model,
            reasoning_parser="qwen3",
            tool_call_parser="hermes",
            enable_auto_tool_choice=True,
        )
        self.bundle = load_bundle(self.settings)
        self.fast = build_fast_encoder(self.bundle.tokenizer)

    def encode(self, text: str) -> list[int]:
        """Prompt ids (FastEncoder when available, else HF; identical either way)."""
        if self.fast is not None:
            return self.fast.encode(text)
        return self.bundle.tokenizer.encode(text, add_special_tokens=False)

    def server(self, workers: int) -> Any:
        """A running server with ``workers`` workers and the qwen3/hermes parsers (started once)."""
        if workers not in self.servers:
            flags = list(http_servers.PARSER_FLAGS)
            if self.with_engine:  # gateway mode on: render routes unchanged, /v1/chat/completions added
                flags += ["--engine-url", self.engine()[1]]
            self.servers[workers] = http_servers.Server(self.model, workers, flags)
        return self.servers[workers]

    def engine(self) -> Any:
        """The gateway section's scripted engine ``(process, url, command)``, started once."""
        if self.gateway_engine is None:
            self.gateway_engine = gateway_cpu.start_engine(self)
        return self.gateway_engine

    def close(self) -> None:
        """Stop every server this run started, then the scripted engine."""
        for server in self.servers.values():
            server.stop()
        self.servers.clear()
        if self.gateway_engine is not None:
            gateway_cpu.stop_engine(self.gateway_engine[0])
            self.gateway_engine = None


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def build_parser() -> argparse.ArgumentParser:
    """The harness flags (see module docstring for the sections)."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="few repeats, short stream, 1 worker, 1 s HTTP runs")
    p.add_argument("--only", default=",".join(SECTIONS), help="comma list of sections (default: all)")
    p.add_argument("--model", default=None, help="model folder (default: SHARED/models/Qwen--Qwen3-0.6B)")
    p.add_argument("--shared", default=None, help="the shared data folder (default: ../shared)")
    p.add_argument("--repeat", type=int, default=None, help="repeats per median (default 30; quick 3)")
    p.add_argument("--short", type=int, default=None, help="number of short real chats (default 50; quick 5)")
    p.add_argument(
        "--stream-positions",
        type=_ints,
        default=None,
        help="output positions for per-chunk CPU (default 10,1000,4000,8000; quick 10,100,300)",
    )
    p.add_argument("--stream-budget", type=float, default=120.0, help="wall-time cap of the stream run, s")
    p.add_argument(
        "--body-prompts",
        type=_ints,
        default=None,
        help="prompt lengths for the later-chunk body (default 1000,100000; quick 1000,5000)",
    )
    p.add_argument(
        "--workers", type=_ints, default=None, help="worker counts to compare (default 1,2; quick 1)"
    )
    p.add_argument("--concurrency", type=int, default=8, help="HTTP keep-alive connections (client threads)")
    p.add_argument("--duration", type=float, default=None, help="seconds per HTTP throughput run (default 8)")
    p.add_argument("--peer-url", default=os.environ.get("PEER_URL"), help="peer server base URL ($PEER_URL)")
    return p


def make_context(args: argparse.Namespace) -> Context:
    """Resolve defaults (``--quick`` shrinks them) into a :class:`Context`."""
    shared = shared_dir(args.shared)
    q = args.quick
    return Context(
        shared=shared,
        model=args.model or str(shared / "models" / "Qwen--Qwen3-0.6B"),
        repeat=args.repeat or (3 if q else 30),
        n_short=args.short or (5 if q else 50),
        stream_positions=args.stream_positions or ([10, 100, 300] if q else [10, 1000, 4000, 8000]),
        stream_budget=args.stream_budget,
        body_prompts=args.body_prompts or ([1000, 5000] if q else [1000, 100_000]),
        workers=args.workers or ([1] if q else [1, 2]),
        concurrency=args.concurrency,
        duration=args.duration or (1.0 if q else 8.0),
        peer_url=args.peer_url,
        quick=q,
    )


def main(argv: list[str] | None = None) -> int:
    """Run the selected sections and print the table; exit 0 even when targets are missed."""
    args = build_parser().parse_args(argv)
    ctx = make_context(args)
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SECTIONS]
    if unknown:
        raise SystemExit(f"unknown section(s): {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    res = Results()
    ctx.with_engine = "gateway" in chosen
    t0 = time.perf_counter()
    ctx.load()
    try:
        for name in chosen:
            print(f"[benchmarks] {name} ...", file=sys.stderr, flush=True)
            SECTIONS[name](res, ctx)
    finally:
        ctx.close()
    print(
        f"render-service benchmarks: model={ctx.model}"
        + (f" (multimodal: {multimodal.VL_MODEL})" if "multimodal" in chosen else "")
        + f" repeat={ctx.repeat} "
        f"fast_encoder={'yes' if ctx.fast else 'no (HF)'} ({time.perf_counter() - t0:.0f} s)"
    )
    print(render_table(res.rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
