"""In-process sections: the tokenization floor, render CPU, multi-turn render, and the GIL probe.

CPU is ``time.process_time`` medians over ``repeat`` runs (see :func:`benchmarks.table.cpu_ms`).
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

from render_service.tokens.prefix_cache import CachedEncoder

from .data import chat_9k, short_chats, template_text, turn_bodies, with_nonce
from .table import Results, cpu_ms, cpu_ms_after, not_implemented, settle

TARGET_COLD_MS = ("<=", 3.0)
TARGET_NEXT_TURN_MS = ("<=", 1.0)
_nonce = itertools.count()


def floor(res: Results, ctx: Any) -> None:
    """Template text, HF encode vs FastEncoder vs CachedEncoder (second turn) on chat_9k and short chats."""
    tok, fast = ctx.bundle.tokenizer, ctx.fast
    body = chat_9k(ctx.shared)
    text = template_text(tok, body)
    rep = ctx.repeat
    res.add(
        "floor",
        "jinja template chat_9k (HF apply_chat_template)",
        cpu_ms(lambda: template_text(tok, body), rep),
    )
    hf = res.add(
        "floor",
        "HF encode chat_9k",
        cpu_ms(lambda: tok.encode(text, add_special_tokens=False), rep),
        note=f"{len(tok.encode(text, add_special_tokens=False))} tokens",
    )
    if fast is None:
        res.skip("floor", "fast encode chat_9k", "no FastEncoder for this tokenizer (HF fallback)")
        return
    fe = res.add("floor", "fast encode chat_9k", cpu_ms(lambda: fast.encode(text), rep))
    res.add("floor", "HF / fast encode", hf.value / fe.value, "x")
    first, second = (template_text(tok, b) for b in turn_bodies(body))

    def after_first() -> CachedEncoder:
        cached = CachedEncoder(fast)
        cached.encode(first)
        return cached

    res.add(
        "floor",
        "cached encode chat_9k turn k+1 after turn k",
        cpu_ms_after(after_first, lambda cached: cached.encode(second), rep + 1),
        target=TARGET_NEXT_TURN_MS,
    )
    shorts = [template_text(tok, b) for b in short_chats(ctx.shared, ctx.n_short)]
    res.add(
        "floor",
        f"HF encode, short chats (n={len(shorts)}) per request",
        cpu_ms(lambda: [tok.encode(t, add_special_tokens=False) for t in shorts], rep) / len(shorts),
    )
    res.add(
        "floor",
        "fast encode, short chats per request",
        cpu_ms(lambda: [fast.encode(t) for t in shorts], rep) / len(shorts),
    )


def _render(ctx: Any, body: dict[str, Any]) -> Any:
    from render_service.render import render_chat

    return render_chat(ctx.bundle, ctx.settings, body)


def render(res: Results, ctx: Any) -> None:
    """render_chat CPU per request: chat_9k cold (nothing cached) and repeated, short chats."""
    body = chat_9k(ctx.shared)
    body.pop("model", None)
    try:
        _render(ctx, body)
    except Exception as exc:  # noqa: BLE001 - reported as a skip row
        reason = (
            "render_chat raises NotImplementedError"
            if not_implemented(exc)
            else f"{type(exc).__name__}: {exc}"
        )
        for name, target in (
            ("render chat_9k cold", TARGET_COLD_MS),
            ("render chat_9k repeated", None),
            ("render short chats per request", None),
        ):
            res.skip("render", name, reason, target)
        return
    settle()  # one-off set-up started by the first call (e.g. a background encoder build)
    rep = ctx.repeat
    cold = cpu_ms(lambda: _render(ctx, with_nonce(body, f"n{next(_nonce)}")), rep)
    copy_cost = cpu_ms(lambda: with_nonce(body, "x"), rep)
    res.add(
        "render",
        "render chat_9k cold (nonce in every message)",
        cold - copy_cost,
        target=TARGET_COLD_MS,
        note=f"body copy {copy_cost:.2f} ms subtracted",
    )
    res.add("render", "render chat_9k repeated (same body)", cpu_ms(lambda: _render(ctx, body), rep))
    shorts = short_chats(ctx.shared, ctx.n_short)
    res.add(
        "render",
        f"render short chats per request (n={len(shorts)})",
        cpu_ms(lambda: [_render(ctx, b) for b in shorts], rep) / len(shorts),
    )


def multiturn(res: Results, ctx: Any) -> None:
    """render_chat of turn k+1 right after turn k of the same conversation (fresh nonce each time)."""
    first, second = turn_bodies(chat_9k(ctx.shared))
    first.pop("model", None)
    second.pop("model", None)

    def turn_k() -> dict[str, Any]:
        nonce = f"t{next(_nonce)}"
        _render(ctx, with_nonce(first, nonce))
        return with_nonce(second, nonce)

    try:
        _render(ctx, first)
        settle()
        median = cpu_ms_after(turn_k, lambda body: _render(ctx, body), ctx.repeat + 1)
    except Exception as exc:  # noqa: BLE001 - reported as a skip row
        reason = (
            "render_chat raises NotImplementedError"
            if not_implemented(exc)
            else f"{type(exc).__name__}: {exc}"
        )
        res.skip("multiturn", "render chat_9k turn k+1 after turn k", reason, TARGET_NEXT_TURN_MS)
        return
    res.add(
        "multiturn",
        "render chat_9k turn k+1 after turn k",
        median,
        target=TARGET_NEXT_TURN_MS,
        note=f"{len(first['messages'])} -> {len(second['messages'])} messages",
    )


def _max_gap_ms(fn: Any, text: str) -> tuple[float, float]:
    """Run ``fn(text)`` while a pure-Python thread spins; (wall ms, longest spinner stall ms)."""
    stop, gap = [False], [0.0]

    def spin() -> None:
        last = time.perf_counter()
        while not stop[0]:
            now = time.perf_counter()
            gap[0] = max(gap[0], now - last)
            last = now

    thread = threading.Thread(target=spin)
    thread.start()
    time.sleep(0.02)
    gap[0] = 0.0
    t0 = time.perf_counter()
    fn(text)
    wall = time.perf_counter() - t0
    stop[0] = True
    thread.join()
    return wall * 1e3, gap[0] * 1e3


def gil(res: Results, ctx: Any) -> None:
    """Does encode release the GIL? Longest stall of a spinning Python thread during one long encode
    (chat_9k x 10); a stall near the encode's wall time means the GIL was held throughout."""
    tok, fast = ctx.bundle.tokenizer, ctx.fast
    text = template_text(tok, chat_9k(ctx.shared)) * 10
    probes = [
        ("HF backend Tokenizer.encode", lambda t: tok.backend_tokenizer.encode(t, add_special_tokens=False)),
        ("HF transformers tokenizer.encode", lambda t: tok.encode(t, add_special_tokens=False)),
    ]
    if fast is not None:
        probes.insert(0, ("tiktoken FastEncoder.encode", fast.encode))
    for name, fn in probes:
        wall, gap = _max_gap_ms(fn, text)
        held = "held (stall ~ encode time)" if gap > 0.5 * wall else "released"
        res.add(
            "gil", f"{name}: longest Python-thread stall", gap, note=f"encode wall {wall:.0f} ms; GIL {held}"
        )
