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
(``finish_reason: "length"``), else ``"stop"``. ``chunk_size`` ids go into each SSE event.
With ``sampling_params.logprobs = k`` each position gets made-up logprobs: the sampled id first
(rank 1), then ``k`` neighbouring ids. Like a ``--tokens-only`` engine it rejects ``stop`` strings
with 400. Run it on a port with :func:`serve_in_thread`.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
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


def _events(
    rid: str,
    outs: list[list[int]],
    finishes: list[str],
    size: int,
    k: int | None,
    usage: dict[str, Any] | None,
) -> Iterator[bytes]:
    pos = [0] * len(outs)
    while any(p < len(o) for p, o in zip(pos, outs, strict=True)):
        for i, out in enumerate(outs):
            if pos[i] >= len(out):
                continue
            piece, pos[i] = out[pos[i] : pos[i] + size], pos[i] + size
            finish = finishes[i] if pos[i] >= len(out) else None
            event = {
                "request_id": rid,
                "usage": None,
                "output_mode": "tokens",
                "choices": [_choice(i, piece, finish, k)],
            }
            yield b"data: " + orjson.dumps(event) + b"\n\n"
    if usage is not None:
        yield (
            b"data: "
            + orjson.dumps({"request_id": rid, "usage": usage, "output_mode": "tokens", "choices": []})
            + b"\n\n"
        )
    yield b"data: [DONE]\n\n"


def create_engine_app(
    script: Script, *, tokenizer: Any = None, model: str = "scripted", chunk_size: int = 1
) -> FastAPI:
    """The engine app. ``tokenizer`` is needed only when the script holds texts."""
    app = FastAPI(title="scripted tokens-only engine")
    app.state.requests = []

    @app.post("/inference/v1/generate")
    async def generate(request: Request) -> Response:
        body = orjson.loads(await request.body())
        app.state.requests.append(body)
        params = body.get("sampling_params") or {}
        if params.get("stop"):
            err = {"error": {"message": STOP_REFUSED, "type": "BadRequestError", "param": None, "code": 400}}
            return Response(orjson.dumps(err), status_code=400, media_type="application/json")
        outs = _outputs(script, body, tokenizer, int(params.get("n") or 1))
        limit = params.get("max_tokens")
        finishes = ["length" if limit is not None and len(o) > limit else "stop" for o in outs]
        outs = [o[:limit] if limit is not None else o for o in outs]
        k, rid = params.get("logprobs"), f"generate-tokens-{body.get('request_id', '')}"
        usage = usage_block(len(body["token_ids"]), sum(len(o) for o in outs))
        if body.get("stream"):
            want_usage = (body.get("stream_options") or {}).get("include_usage")
            events = _events(rid, outs, finishes, chunk_size, k, usage if want_usage else None)
            return StreamingResponse(events, media_type="text/event-stream")
        result = {
            "request_id": rid,
            "model": model,
            "created": int(time.time()),
            "usage": usage,
            "prompt_logprobs": None,
            "prompt_token_ids": body["token_ids"] if body.get("return_token_ids") else None,
            "mm_placeholders": None,
            "metrics": None,
            "kv_transfer_params": None,
            "ec_transfer_params": None,
            "output_mode": "tokens",
            "choices": [_choice(i, o, f, k) for i, (o, f) in enumerate(zip(outs, finishes, strict=True))],
        }
        return Response(orjson.dumps(result), media_type="application/json")

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
