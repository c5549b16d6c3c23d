"""Streaming chat derender cost: time per 1-token chunk and stream_state size by output position,
and request body sizes for the 9k-token prompt.

Qwen3 tokenizer with --reasoning-parser qwen3 --tool-call-parser hermes --enable-auto-tool-choice,
an output that is one long think block. Each call goes through ``derender_chat`` in-process
(pydantic validation + state decode/encode included; no HTTP), and also over HTTP on
127.0.0.1 (uvicorn, one process). Medians over ``--samples`` calls at each position.

    python benchmarks/stream_state_size.py [--shared ../shared] [--samples 51]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import httpx
import orjson

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from render_service import derender  # noqa: E402
from render_service.models import load_bundle  # noqa: E402
from render_service.serving.app import create_app  # noqa: E402
from render_service.settings import Settings  # noqa: E402
from render_service.testing.engine import serve_in_thread  # noqa: E402


def chunk_body(token: int, state: str | None, extra: dict | None = None,
               request_id: str = "chatcmpl-bench") -> dict:
    """A streaming derender body for one token of engine request ``request_id`` (``extra``: the
    first call's request fields)."""
    body = {
        "stream": True,
        "stream_state": state,
        "generate_chunk": {"request_id": request_id, "choices": [{"index": 0, "token_ids": [token]}]},
    }
    body.update(extra or {})
    return body


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(Path(__file__).resolve().parents[1].parent / "shared"))
    ap.add_argument("--samples", type=int, default=51)
    args = ap.parse_args()
    shared = Path(args.shared)
    settings = Settings(
        model=str(shared / "models" / "Qwen--Qwen3-0.6B"),
        reasoning_parser="qwen3",
        tool_call_parser="hermes",
        enable_auto_tool_choice=True,
        stream_state_keys=("benchmark-stream-state-key-0123456789",),  # signed, as in production
    )
    bundle = load_bundle(settings)
    tok = bundle.tokenizer
    chat9k = json.loads((shared / "bench" / "chat_9k.json").read_text())
    chat = {k: chat9k[k] for k in ("messages", "tools")}
    enc = tok.apply_chat_template(
        chat["messages"], tools=chat["tools"], add_generation_prompt=True, tokenize=True
    )
    prompt = list(enc["input_ids"]) if not isinstance(enc, list) else enc
    think = (
        "<think>\nThe user asks about the weather in 日本; let me think about 東京 and the forecast. " * 400
    )
    long_call = (
        '</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "'
        + "東京 and the forecast, " * 800
    )
    base, stop = serve_in_thread(create_app(settings, bundle))
    http = httpx.Client(base_url=base, timeout=60)
    try:
        for label, text, positions in (
            ("long think block", think, (100, 4000)),
            ("inside one open tool call (args)", long_call, (100, 4000)),
        ):
            ids = tok.encode(text, add_special_tokens=False)
            assert len(ids) > max(positions) + args.samples
            print(f"\n== {label} ==")
            measure(bundle, settings, http, chat, prompt, ids, positions, args.samples)
    finally:
        http.close()
        stop()


def measure(bundle, settings, http, chat, prompt, ids, positions, samples) -> None:
    """Stream ``ids`` one per call; print medians at each position."""
    first = chunk_body(ids[0], None, {"chat_request": chat, "prompt_token_ids": prompt})
    print(f"prompt: {len(prompt)} tokens; first-call body {len(orjson.dumps(first)):,} bytes")
    state = derender.derender_chat(bundle, settings, first)["stream_state"]
    results = {}
    pos = 1
    for target in positions:
        while pos < target:
            state = derender.derender_chat(bundle, settings, chunk_body(ids[pos], state))["stream_state"]
            pos += 1
        core, web, sizes, bodies = [], [], [], []
        for _ in range(samples):
            body = chunk_body(ids[pos], state)
            raw = orjson.dumps(body)
            bodies.append(len(raw))
            t0 = time.perf_counter()
            out = derender.derender_chat(bundle, settings, orjson.loads(raw))
            core.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            r = http.post(
                "/v1/chat/completions/derender", content=raw, headers={"content-type": "application/json"}
            )
            web.append(time.perf_counter() - t0)
            assert r.status_code == 200 and r.json()["stream_state"] == out["stream_state"]
            state = out["stream_state"]
            sizes.append(len(state))
            pos += 1
        results[target] = (
            statistics.median(core),
            statistics.median(web),
            statistics.median(sizes),
            statistics.median(bodies),
        )
    print("position | in-process ms/chunk | HTTP ms/chunk | stream_state bytes | later-chunk body bytes")
    for target, (c, w, s, b) in results.items():
        print(f"{target:8d} | {c * 1e3:19.3f} | {w * 1e3:13.3f} | {s:18.0f} | {b:22.0f}")


if __name__ == "__main__":
    main()
