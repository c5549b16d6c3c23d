"""Benchmark inputs: the 9k-token chat, short real chats, conversation turns, nonce-marked copies."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def shared_dir(explicit: str | None = None) -> Path:
    """``--shared``, else ``$RENDER_SERVICE_SHARED``, else ``../shared`` beside the checkout."""
    return Path(explicit or os.environ.get("RENDER_SERVICE_SHARED") or REPO.parent / "shared")


def chat_9k(shared: Path) -> dict[str, Any]:
    """The 9,079-token benchmark chat body (56 messages, 6 tools)."""
    return json.loads((shared / "bench" / "chat_9k.json").read_text(encoding="utf-8"))


def short_chats(shared: Path, limit: int, max_tokens: int = 600) -> list[dict[str, Any]]:
    """Up to ``limit`` real requests of at most ``max_tokens`` (approx.) as chat bodies."""
    lines = (shared / "data" / "chat_requests.jsonl").read_text(encoding="utf-8").split("\n")
    out = []
    for line in lines:
        if not line.strip():
            continue
        rec = json.loads(line)
        if rec["meta"].get("approx_tokens_qwen2.5", 10**9) > max_tokens:
            continue
        body = {"messages": rec["messages"]}
        if rec.get("tools"):
            body["tools"] = rec["tools"]
        out.append(body)
        if len(out) >= limit:
            break
    return out


def turn_bodies(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(turn k, turn k+1): the conversation as of its second-to-last user message, and all of it."""
    msgs = body["messages"]
    users = [i for i, m in enumerate(msgs) if m["role"] == "user"]
    previous = users[-2] if len(users) >= 2 else users[-1]
    return dict(body, messages=msgs[: previous + 1]), dict(body)


def with_nonce(body: dict[str, Any], nonce: str) -> dict[str, Any]:
    """A copy of ``body`` whose every string message content starts with ``nonce`` (nothing cached)."""
    out = copy.deepcopy(body)
    for m in out["messages"]:
        if isinstance(m.get("content"), str):
            m["content"] = f"[{nonce}] {m['content']}"
    return out


def template_text(tokenizer: Any, body: dict[str, Any]) -> str:
    """The prompt text HF's chat template renders for ``body`` (generation prompt added)."""
    return tokenizer.apply_chat_template(
        body["messages"], tools=body.get("tools"), tokenize=False, add_generation_prompt=True
    )
