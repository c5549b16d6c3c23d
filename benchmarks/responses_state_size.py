"""Streaming Messages / Responses derender cost: CPU per 1-token chunk and ``stream_state`` size
at output positions 10 and 1,000 (and chat's for comparison).

Qwen3 tokenizer with --reasoning-parser qwen3 --tool-call-parser hermes --enable-auto-tool-choice,
a signed state (as in production), an output that is a short think block then a long answer.
Each call goes through the route's derender function in-process (pydantic validation + state
decode/encode included; no HTTP), one token per call from the start of the stream. At each
position the median ``time.thread_time`` (this thread only) of ``--samples`` calls, each call
made on the same incoming state (so every sample does the same work).

    python -m benchmarks.responses_state_size [--shared ../shared] [--samples 201]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from benchmarks.stream_state_size import chunk_body  # noqa: E402
from render_service.derender.anthropic import derender_messages  # noqa: E402
from render_service.derender.chat import derender_chat  # noqa: E402
from render_service.derender.responses import derender_responses  # noqa: E402
from render_service.models import load_bundle  # noqa: E402
from render_service.settings import Settings  # noqa: E402

WORDS = ["weather", "Paris", "sunny", "forecast", "tomorrow", "rain", "cloud", "wind", "東京", "晴れ", "—"]
ROUTES: dict[str, tuple[Callable[..., dict[str, Any]], str, dict[str, Any]]] = {
    "chat": (derender_chat, "chat_request", {"messages": [{"role": "user", "content": "Weather?"}]}),
    "messages": (derender_messages, "messages_request",
                 {"model": "m", "max_tokens": 2000, "messages": [{"role": "user", "content": "Weather?"}]}),
    "responses": (derender_responses, "responses_request", {"model": "m", "input": "Weather?"}),
}


def body(token: int, state: str | None, first: dict[str, Any] | None = None) -> dict[str, Any]:
    """One token's streaming derender body (the chat benchmark's, under a Responses-style id)."""
    return chunk_body(token, state, first, request_id="resp_bench")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(Path(__file__).resolve().parents[1].parent / "shared"))
    ap.add_argument("--samples", type=int, default=201)
    ap.add_argument("--positions", default="10,1000")
    args = ap.parse_args()
    settings = Settings(
        model=str(Path(args.shared) / "models" / "Qwen--Qwen3-0.6B"),
        reasoning_parser="qwen3",
        tool_call_parser="hermes",
        enable_auto_tool_choice=True,
        stream_state_keys=("benchmark-stream-state-key-0123456789",),
    )
    bundle = load_bundle(settings)
    rng = random.Random(0)
    text = "<think>\nShort thought.\n</think>\n\n" + " ".join(rng.choice(WORDS) for _ in range(3000))
    ids = bundle.tokenizer.encode(text, add_special_tokens=False)
    positions = [int(p) for p in args.positions.split(",")]
    assert len(ids) > max(positions)
    print("route     | position | CPU ms/chunk | stream_state bytes")
    for route, (fn, key, request) in ROUTES.items():
        state = fn(bundle, settings, body(ids[0], None, {key: request, "prompt_token_ids": [1, 2, 3]}))[
            "stream_state"
        ]
        pos = 1
        for target in positions:
            while pos < target:
                state = fn(bundle, settings, body(ids[pos], state))["stream_state"]
                pos += 1
            cpu = []
            for _ in range(args.samples):
                t0 = time.thread_time()
                fn(bundle, settings, body(ids[pos], state))
                cpu.append(time.thread_time() - t0)
            print(f"{route:9} | {target:8d} | {statistics.median(cpu) * 1e3:12.3f} | {len(state):18,d}")


if __name__ == "__main__":
    main()
