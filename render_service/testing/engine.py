"""A scripted tokens-only engine: ``POST /inference/v1/generate`` answering fixed token ids.

For end-to-end tests of render → generate → derender without a GPU. It speaks the upstream
tokens-mode shapes (upstream §4): a JSON ``GenerateResponse`` when ``stream`` is false; SSE
(``data: <json>\\n\\n`` events with exactly one choice each, interleaved by index for ``n > 1``,
an optional usage-only event, then ``data: [DONE]``) when true.

How to script it::

    app = create_engine_app(["<think>\\nhi\\n</think>\\n\\nHello<|im_end|>"], tokenizer=tok)
    app = create_engine_app([[9707, 151645]])                    # ids directly
    app = create_engine_app(lambda request: [[...], [...]])      # per request (dict), one list per choice

Choice ``i`` gets script entry ``i % len(script)``. Output is cut at ``sampling_params.max_tokens``
(``finish_reason: "length"``), else ``"stop"``. ``chunk_size`` ids go into each SSE event, after
``delay`` seconds. ``role`` makes it a prefiller or a decoder of a P/D pair (the decoder checks it
got the prefiller's ``kv_transfer_params`` for the same ``token_ids``); aborts
(``/inference/v1/abort_requests``) are recorded and end the named streams. ``hold`` makes a
stream stop after that many ids of a choice until it is aborted or its client goes away (a test
then cannot race the engine to the end); ``api_key`` makes it require ``Authorization: Bearer``
as vLLM's ``--api-key`` does (401 ``{"error": "Unauthorized"}``). Tests wait on the recorded
facts with :func:`wait_until` (a condition, not a sleep). From the shell:
``python -m render_service.testing.engine --port P --role prefill|decode`` (:func:`main`).
With ``sampling_params.logprobs = k`` each position gets made-up logprobs: the sampled id first
(rank 1), then ``k`` neighbouring ids. Like a ``--tokens-only`` engine it rejects ``stop`` strings
with 400. Run it on a port with :func:`serve_in_thread`.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import suppress
from typing import Any

import orjson
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse

from ..derender.flow import usage_block

Script = Sequence[Sequence[int] | str] | Callable[[dict[str, Any]], Sequence[Sequence[int]]]

STOP_REFUSED = (
    "stop strings are not supported on a --tokens-only server because detokenization is disabled. "
    "Check stop strings on the coordinator, or use stop_token_ids."
)


def _outputs(script: Script, request: dict[str, Any], tokenizer: Any, n: int) -> list[list[int]]:
    entries = script(request) if callable(script) else script
    ids = [tokenizer.encode(e, add_special_tokens=False) if isinstance(e, str) else list(e) for e in entries]
    return [ids[i % len(ids)] for i in range(n)]


def _logprobs(ids: Sequence[int], k: int | None) -> dict[str, Any] | None:
    if k is None:
        return None
    content = []
    for pos, tid in enumerate(ids):
        sampled = {"token_id": tid, "logprob": -0.25 * (pos % 4), "rank": 1}
        others = [{"token_id": tid + j, "logprob": -1.0 - j, "rank": j + 1} for j in range(1, k + 1)]
        content.append({**sampled, "top_logprobs": [sampled, *others]})
    return {"content": content}


def _choice(index: int, ids: Sequence[int], finish: str | None, k: int | None) -> dict[str, Any]:
    return {
        "index": index,
        "finish_reason": finish,
        "stop_reason": None,
        "token_ids": list(ids),
        "routed_experts": None,
        "sampling_mask": None,
        "weight_versions": None,
        "logprobs": _logprobs(ids, k),
    }


async def _events(
    app: Any,
    rid: str,
    outs: list[list[int]],
    finishes: list[str],
    size: int,
    k: int | None,
    usage: dict[str, Any] | None,
    delay: float,
    hold: int | None = None,
    hold_timeout: float = 60.0,
) -> AsyncIterator[bytes]:
    pos = [0] * len(outs)
    with app.state.changed:
        app.state.active.add(rid)
    aborted = app.state.abort_events.setdefault(rid, asyncio.Event())
    completed = False
    try:
        while any(p < len(o) for p, o in zip(pos, outs, strict=True)):
            for i, out in enumerate(outs):
                if pos[i] >= len(out):
                    continue
                if delay:
                    await asyncio.sleep(delay)
                if hold is not None and pos[i] >= hold and rid not in app.state.abort_pending:
                    with suppress(TimeoutError):  # held until aborted or the client goes away
                        await asyncio.wait_for(aborted.wait(), hold_timeout)
                    hold = None
                if rid in app.state.abort_pending:  # as vLLM: a finish-only chunk, then the end
                    app.state.abort_pending.discard(rid)
                    for j in range(len(outs)):
                        yield _event(rid, _choice(j, [], "abort", None))
                    yield b"data: [DONE]\n\n"
                    return
                piece, pos[i] = out[pos[i] : pos[i] + size], pos[i] + size
                finish = finishes[i] if pos[i] >= len(out) else None
                yield _event(rid, _choice(i, piece, finish, k))
        if usage is not None:
            yield _event(rid, None, usage)
        yield b"data: [DONE]\n\n"
        completed = True
    finally:
        app.state.abort_events.pop(rid, None)
        with app.state.changed:
            app.state.active.discard(rid)
            if not completed:  # aborted, or the client went away
                app.state.cancelled.append(rid)
            app.state.changed.notify_all()


async def _unanswered(app: Any, rid: str, timeout: float = 60.0) -> None:
    """Hold a request, active, until it is aborted (or ``timeout``), without answering it."""
    aborted = app.state.abort_events.setdefault(rid, asyncio.Event())
    with app.state.changed:
        app.state.active.add(rid)
    try:
        with suppress(TimeoutError):
            await asyncio.wait_for(aborted.wait(), timeout)
    finally:
        app.state.abort_events.pop(rid, None)
        app.state.abort_pending.discard(rid)
        with app.state.changed:
            app.state.active.discard(rid)
            app.state.cancelled.append(rid)
            app.state.changed.notify_all()


def _event(rid: str, choice: dict[str, Any] | None, usage: dict[str, Any] | None = None) -> bytes:
    event = {"request_id": rid, "usage": usage, "output_mode": "tokens",
             "choices": [] if choice is None else [choice]}
    return b"data: " + orjson.dumps(event) + b"\n\n"


def wait_until(app: Any, predicate: Callable[[], bool], timeout: float = 60.0) -> bool:
    """Block (a test thread) until ``predicate()`` over ``app.state`` holds; it is re-checked
    whenever the engine records a request, an abort or a stream's end. ``False`` after
    ``timeout`` seconds (generous: a bound for a broken gateway, not a pace)."""
    with app.state.changed:
        return app.state.changed.wait_for(predicate, timeout)


def _record(app: Any, name: str, values: Sequence[Any]) -> None:
    with app.state.changed:
        getattr(app.state, name).extend(values)
        app.state.changed.notify_all()


def kv_blocks(token_ids: Sequence[int]) -> list[int]:
    """Made-up KV block ids of a prompt: what a prefiller hands the decoder for exactly these ids."""
    digest = hashlib.sha256(orjson.dumps(list(token_ids))).hexdigest()
    return [len(token_ids), *(int(digest[i : i + 8], 16) for i in range(0, 32, 8))]


def _bad(message: str) -> Response:
    err = {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}
    return Response(orjson.dumps(err), status_code=400, media_type="application/json")


def _check_role(role: str, body: dict[str, Any], engine_id: str) -> str | None:
    """Why a prefiller / decoder refuses ``body`` (P/D handshake checks), or ``None``."""
    kv = body.get("kv_transfer_params") or {}
    params = body.get("sampling_params") or {}
    if role == "prefill":
        if kv.get("do_remote_decode") is not True:
            return "scripted prefiller: kv_transfer_params.do_remote_decode must be true"
        if params.get("max_tokens") != 1 or body.get("stream"):
            return "scripted prefiller: expected max_tokens 1 and stream false"
    if role == "decode":
        if kv.get("do_remote_prefill") is not True or not str(kv.get("remote_engine_id", "")).startswith(
            "scripted-prefill"
        ):
            return "scripted decoder: no prefiller's kv_transfer_params (do_remote_prefill, remote_engine_id)"
        if kv.get("remote_block_ids") != kv_blocks(body.get("token_ids") or []):
            return "scripted decoder: kv_transfer_params do not match these token_ids"
    return None


def create_engine_app(
    script: Script,
    *,
    tokenizer: Any = None,
    model: str = "scripted",
    chunk_size: int = 1,
    role: str = "both",
    delay: float | Callable[[dict[str, Any]], float] = 0.0,
    engine_id: str | None = None,
    hold: int | Callable[[dict[str, Any]], int | None] | None = None,
    api_key: str | None = None,
    mute: Callable[[dict[str, Any]], bool] | None = None,
) -> FastAPI:
    """The engine app. ``tokenizer`` is needed only when the script holds texts.

    ``role``: ``"both"`` (plain engine), ``"prefill"`` (accepts only prefill calls and answers
    ``kv_transfer_params`` for a remote decode) or ``"decode"`` (accepts only calls carrying a
    prefiller's ``kv_transfer_params`` made for the same ``token_ids``; else 400). ``delay``:
    seconds before each SSE event and before a JSON answer (a number, or a function of the request
    body). ``hold``: ids of a choice after which its stream waits for an abort or the client's
    going away (at most 60 s; a number or a function of the request body). ``api_key``: the
    bearer key every ``/inference/*`` call must carry. ``mute(body)`` true: the request is
    recorded, then gets no status line at all until it is aborted (at most 60 s), as an engine
    still queueing it; the client's going away does not end that wait (only an abort).
    Recorded on ``app.state``: ``requests`` (bodies),
    ``request_ids`` (engine ids), ``aborts`` (ids sent to the abort endpoint), ``cancelled`` (ids
    whose stream ended before its end: aborted or the client went away).
    """
    app = FastAPI(title="scripted tokens-only engine")
    app.state.requests = []
    app.state.request_ids = []
    app.state.aborts = []
    app.state.cancelled = []
    app.state.active = set()
    app.state.abort_pending = set()
    app.state.abort_events = {}
    app.state.changed = threading.Condition()
    app.state.unauthorized = 0
    engine_id = engine_id or f"scripted-{role}-{uuid.uuid4().hex[:8]}"

    def refused(request: Request) -> Response | None:
        """vLLM ``--api-key``: ``/inference/*`` needs the bearer key (legacy ``/abort_requests`` not)."""
        if api_key is None or not request.url.path.startswith("/inference"):
            return None
        if request.headers.get("authorization") == f"Bearer {api_key}":
            return None
        app.state.unauthorized += 1
        body = orjson.dumps({"error": "Unauthorized"})
        return Response(body, status_code=401, media_type="application/json")

    @app.post("/inference/v1/generate")
    async def generate(request: Request) -> Response:
        if (denied := refused(request)) is not None:
            return denied
        body = orjson.loads(await request.body())
        _record(app, "requests", [body])
        params = body.get("sampling_params") or {}
        if params.get("stop"):
            return _bad(STOP_REFUSED)
        refusal = _check_role(role, body, engine_id)
        if refusal:
            return _bad(refusal)
        rid = "generate-tokens-" + (request.headers.get("x-request-id") or str(body.get("request_id", "")))
        _record(app, "request_ids", [rid])
        if mute is not None and mute(body):
            await _unanswered(app, rid)
            return _bad("scripted engine: aborted before answering")
        outs = _outputs(script, body, tokenizer, int(params.get("n") or 1))
        limit = params.get("max_tokens")
        finishes = ["length" if limit is not None and len(o) > limit else "stop" for o in outs]
        outs = [o[:limit] if limit is not None else o for o in outs]
        k = params.get("logprobs")
        usage = usage_block(len(body["token_ids"]), sum(len(o) for o in outs))
        wait = delay(body) if callable(delay) else delay
        if body.get("stream"):
            want_usage = (body.get("stream_options") or {}).get("include_usage")
            held = hold(body) if callable(hold) else hold
            events = _events(app, rid, outs, finishes, chunk_size, k, usage if want_usage else None, wait,
                             held)
            return StreamingResponse(events, media_type="text/event-stream")
        if wait:
            await asyncio.sleep(wait)
        kv = None
        if role == "prefill":
            kv = {"do_remote_prefill": True, "do_remote_decode": False, "remote_engine_id": engine_id,
                  "remote_block_ids": kv_blocks(body["token_ids"]), "remote_host": "127.0.0.1",
                  "remote_port": request.url.port, "remote_request_id": rid, "tp_size": 1}
        result = {
            "request_id": rid,
            "model": model,
            "created": int(time.time()),
            "usage": usage,
            "prompt_logprobs": None,
            "prompt_token_ids": body["token_ids"] if body.get("return_token_ids") else None,
            "mm_placeholders": None,
            "metrics": None,
            "kv_transfer_params": kv,
            "ec_transfer_params": None,
            "output_mode": "tokens",
            "choices": [_choice(i, o, f, k) for i, (o, f) in enumerate(zip(outs, finishes, strict=True))],
        }
        return Response(orjson.dumps(result), media_type="application/json")

    async def abort_requests(request: Request) -> Response:
        if (denied := refused(request)) is not None:
            return denied
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError as exc:
            return _bad(f"JSON decode error: {exc}")
        ids = body.get("request_ids") if isinstance(body, dict) else None
        if ids is None:
            return _bad("Missing 'request_ids' in request body")
        app.state.abort_pending.update(i for i in ids if i in app.state.active)
        for i in ids:
            if i in app.state.abort_events:
                app.state.abort_events[i].set()
        _record(app, "aborts", ids)
        return Response(status_code=200)

    @app.get("/scripted/stats")
    async def stats(id: str | None = None) -> Response:
        """Counts for load tests (``active``: streams being sent); with ``id``: whether that
        engine request is still streaming and whether it was aborted."""
        out: dict[str, Any] = {"requests": len(app.state.request_ids), "active": len(app.state.active),
                               "aborts": len(app.state.aborts), "cancelled": len(app.state.cancelled)}
        if id is not None:
            out |= {"id_active": id in app.state.active, "id_aborted": id in app.state.aborts}
        return Response(orjson.dumps(out), media_type="application/json")

    app.add_api_route("/inference/v1/abort_requests", abort_requests, methods=["POST"])
    app.add_api_route("/abort_requests", abort_requests, methods=["POST"])
    return app


def serve_in_thread(app: Any) -> tuple[str, Callable[[], None]]:
    """Run ``app`` with uvicorn on a free 127.0.0.1 port in a daemon thread.

    Returns:
        ``(base_url, stop)``; call ``stop()`` to shut the server down.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("engine did not start")
        time.sleep(0.02)

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=10)

    return f"http://127.0.0.1:{port}", stop


DEMO_TEXT = "<think>\nThe user greets me.\n</think>\n\nHello! How can I help you today?<|im_end|>"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m render_service.testing.engine --port P --role prefill|decode|both``: serve a
    scripted engine answering ``--text`` (tokenized with ``--model``'s tokenizer) to every request."""
    p = argparse.ArgumentParser(prog="python -m render_service.testing.engine", description=main.__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8100)
    p.add_argument("--role", choices=("both", "prefill", "decode"), default="both")
    p.add_argument("--model", default=None, help="tokenizer folder (default: the embedded Qwen3-0.6B)")
    p.add_argument("--text", action="append", default=None, help="output text (repeat: one per choice)")
    p.add_argument("--chunk-size", type=int, default=1, help="token ids per SSE event")
    p.add_argument("--delay", type=float, default=0.0, help="seconds before each SSE event")
    args = p.parse_args(argv)
    from transformers import AutoTokenizer

    from ..settings import EMBEDDED_MODEL_DIR

    tokenizer = AutoTokenizer.from_pretrained(args.model or str(EMBEDDED_MODEL_DIR))
    app = create_engine_app(args.text or [DEMO_TEXT], tokenizer=tokenizer, chunk_size=args.chunk_size,
                            role=args.role, delay=args.delay)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
