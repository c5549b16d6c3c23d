"""Median CPU time of one chat render of ../shared/bench/chat_9k.json, split into its stages.

Usage: ``PYTHONPATH=. python benchmarks/bench_render_split.py [MODEL_FOLDER] [--n 200]`` (default: embedded Qwen3,
with qwen3 + hermes parsers configured). CPU time is ``time.process_time_ns`` per call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from render_service import chat_template, render
from render_service.models import load_bundle
from render_service.render import messages
from render_service.settings import Settings
from render_service.tokens import tokenization

BENCH = Path(__file__).resolve().parents[1].parent / "shared" / "bench" / "chat_9k.json"


def median_ms(fn, n: int) -> float:
    """Median CPU milliseconds of ``fn()`` over ``n`` calls."""
    times = []
    for _ in range(n):
        t0 = time.process_time_ns()
        fn()
        times.append(time.process_time_ns() - t0)
    return statistics.median(times) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default=None)
    ap.add_argument("--n", type=int, default=200)
    args = ap.parse_args()
    s = Settings(
        model=args.model, reasoning_parser="qwen3", tool_call_parser="hermes", enable_auto_tool_choice=True
    )
    bundle = load_bundle(s)
    body = json.loads(BENCH.read_text(encoding="utf-8"))
    body.pop("model", None)
    conv = messages.normalize(body["messages"])
    ct = bundle.compiled_template
    text = chat_template.render(ct, conv.primary, tools=body["tools"])
    ids = tokenization.encode_prompt(bundle, text)
    print(f"prompt: {len(ids)} tokens, {len(text)} chars; medians of {args.n} calls (CPU ms)")
    print(f"normalize messages  {median_ms(lambda: messages.normalize(body['messages']), args.n):.3f}")
    template_ms = median_ms(lambda: chat_template.render(ct, conv.primary, tools=body["tools"]), args.n)
    print(f"template            {template_ms:.3f}")
    print(f"tokenization        {median_ms(lambda: tokenization.encode_prompt(bundle, text), args.n):.3f}")
    print(f"render_chat total   {median_ms(lambda: render.render_chat(bundle, s, body), args.n):.3f}")


if __name__ == "__main__":
    main()
