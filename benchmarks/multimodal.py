"""``multimodal`` section: server CPU per rendered image (640×480, 4000×3000 JPEG) and per video
(16-frame mp4), ours and — with ``PEER_URL`` (a ``vllm launch render`` of the same vision model)
— the peer's, in one run; plus our cached second turn (same image again).

CPU is ``utime + stime`` of the server's process tree (``/proc``) around ``n`` sequential
requests, divided by ``n``. Both servers are driven by the same client, the light one of the
``http`` section (:class:`.light.Connection`: pre-serialised requests on one keep-alive socket, each
answer read into one buffer of its ``Content-Length``). The client shares the machine's cores and
caches with the server, and its memory traffic per answer shows in the server's CPU: with httpx
(the answer read 64 KiB at a time and joined, ~5 MB of client memory traffic per 2.46 MB answer)
our server's CPU per cached 640×480 turn was 2.3–2.8 ms, with the same server and syscalls 1.2–1.8
ms from a client reading into one buffer, and 3.2 ms when that client also touched 8 MB after
each answer (README "Multimodal render", round 28).

Cold requests make every image unique (a nonce appended after the file's end, which decoders
ignore; new in each run, as a peer that keeps running keeps its processed items), so neither side
can reuse earlier work. The peer's process is found as the one listening on the ``PEER_URL``
port. Targets: ours ≤ 0.5 × peer per image, cached second turn ≤ 0.1 × peer per image. The
peer's own second turn of the same item (vLLM keeps processed items too) is printed beside it,
without a target.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from . import light
from .http_servers import SERVED_NAME, Server, _peer_model, _tree

VL_MODEL = "Qwen--Qwen3-VL-2B-Instruct"
RUN = uuid.uuid4().hex[:12]
"""This run's token in every nonce (see :func:`multimodal`)."""
CASES = [
    ("image 640x480", "rgb_640x480.jpg", "image"),
    ("image 4000x3000", "rgb_large_4000x3000.jpg", "image"),
    ("video 16f 320x240", "video_16f_320x240.mp4", "video"),
]


def _body(data: bytes, kind: str, model: str, nonce: str | None) -> dict[str, Any]:
    if nonce is not None:
        data = data + nonce.encode()
    mime = {"image": "image/jpeg", "video": "video/mp4"}[kind]
    url = f"data:{mime};base64," + base64.b64encode(data).decode()
    part = {"type": f"{kind}_url", f"{kind}_url": {"url": url}}
    return {
        "model": model,
        "max_tokens": 8,
        "messages": [{"role": "user", "content": [part, {"type": "text", "text": "Describe."}]}],
    }


def _cpu_per_request(url: str, pids: list[int], bodies: list[dict[str, Any]]) -> tuple[float | None, str]:
    """Server CPU ms per request over ``bodies`` (sent one after another on one keep-alive
    connection of the light client, :class:`.light.Connection`); (None, error) on non-200."""
    conn = light.Connection(url)
    try:
        requests = [light.raw_request(url, "/v1/chat/completions/render", body) for body in bodies]
        before = light.proc_cpu_s(pids)
        for request in requests:
            status, data = conn.send(request)
            if status != 200:
                return None, f"{status} {bytes(data[:120])!r}"
        after = light.proc_cpu_s(pids)
    finally:
        conn.close()
    return (after - before) * 1e3 / len(bodies), ""


def _listening_pid(url: str) -> int | None:
    import psutil

    port = urlparse(url).port
    for conn in psutil.net_connections(kind="tcp"):
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
            return int(conn.pid)
    return None


def multimodal(res: Any, ctx: Any) -> None:
    """See the module docstring."""
    folder = Path(ctx.shared) / "models" / VL_MODEL
    media = Path(ctx.shared) / "data" / "media"
    # /proc counts CPU in 10 ms ticks: 60 requests of a small item read it to ~0.2 ms
    n = max(4, min(2 * ctx.repeat, 60))
    ours = Server(str(folder), 1, [])
    try:
        ours.settle()
        pids = _tree(ours.proc.pid)
        peer_name = _peer_model(ctx.peer_url) if ctx.peer_url else None
        peer_pid = _listening_pid(ctx.peer_url) if peer_name else None
        for label, name, kind in CASES:
            data = (media / name).read_bytes()
            # the 4000x3000 image costs ~1 CPU-s a request: one (~100 ticks) gives a true figure
            big = "4000" in name
            reps = (1 if ctx.quick else 3) if big else n
            # --quick, 4000x3000: its one cold request is also the one the cached turn repeats (the
            # 640x480 case has warmed the image path already), so no separate ~1 CPU-s warm-up
            # nonces new to both servers: the peer keeps processed items (vLLM's processor cache) for
            # as long as it runs, so nonces repeated by an earlier run would be cached turns there
            cold = [f"c{i}-{RUN}" for i in range(reps)]
            warm = cold[0] if ctx.quick and big else f"warm-{RUN}"
            if warm != cold[0]:
                _cpu_per_request(ours.url, pids, [_body(data, kind, SERVED_NAME, warm)])
            mine, err = _cpu_per_request(
                ours.url, pids, [_body(data, kind, SERVED_NAME, c) for c in cold]
            )
            if mine is None:
                res.skip("multimodal", f"{label}: ours CPU", err)
                continue
            res.add("multimodal", f"{label}: ours CPU per item", mine, "ms", note=f"{reps} cold requests")
            cached, _ = _cpu_per_request(ours.url, pids, [_body(data, kind, SERVED_NAME, warm)] * reps)
            theirs = again = None
            if peer_name and peer_pid:
                ppids = _tree(peer_pid)
                # its warm-up item is never one measured cold (in --quick, 4000x3000, ``warm`` is)
                _cpu_per_request(ctx.peer_url, ppids, [_body(data, kind, peer_name, f"warm-{RUN}")])
                theirs, perr = _cpu_per_request(
                    ctx.peer_url, ppids, [_body(data, kind, peer_name, c) for c in cold]
                )
                if theirs is None:
                    res.skip("multimodal", f"{label}: peer CPU", perr)
                else:  # the peer's own second turn (its processor cache), for comparison: no target
                    again, _ = _cpu_per_request(ctx.peer_url, ppids, [_body(data, kind, peer_name, warm)] * reps)
            if theirs:
                res.add("multimodal", f"{label}: peer CPU per item", theirs, "ms")
                res.add("multimodal", f"{label}: ours / peer", mine / theirs, "x", ("<=", 0.5))
                if cached is not None:
                    res.add(
                        "multimodal",
                        f"{label}: cached 2nd turn / peer",
                        cached / theirs,
                        "x",
                        ("<=", 0.1),
                        note=f"ours cached {cached:.1f} ms",
                    )
                if again is not None:
                    res.add("multimodal", f"{label}: peer cached 2nd turn", again, "ms", note="no target")
            else:
                if cached is not None:
                    res.add("multimodal", f"{label}: ours cached 2nd turn", cached, "ms")
                res.skip(
                    "multimodal",
                    f"{label}: peer CPU",
                    "set PEER_URL to a vllm launch render of "
                    f"{VL_MODEL} (its process must be visible to this user)",
                )
    finally:
        ours.stop()
