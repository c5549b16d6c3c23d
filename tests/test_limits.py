"""Request limits: body size (413), list/`n`/stream_state bounds (400 with `param`), queue (503)."""

from __future__ import annotations

import threading
import time

import anyio
import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from render_service.errors import InvalidRequest
from render_service.serving.limits import BodyLimits, Overloaded, WorkerPool, check_body

SMALL = dict(max_request_body_bytes=2048, max_messages=3, max_tools=2, max_n=4, max_stream_state_bytes=64)
RENDER = "/v1/chat/completions/render"
DERENDER = "/v1/chat/completions/derender"


def _error(r):
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["code"] == r.status_code
    return err


def test_content_length_over_limit_is_413(serve):
    """A declared Content-Length above --max-request-body-bytes is refused with 413, upstream shape."""
    client = serve(**SMALL)
    r = client.post(RENDER, content=b"{" + b" " * 4000 + b"}", headers={"content-type": "application/json"})
    assert r.status_code == 413
    err = _error(r)
    assert err["type"] == "PayloadTooLargeError" and "2048" in err["message"]


@pytest.mark.parametrize("path", [RENDER, "/v1/completions/render", DERENDER, "/v1/messages/render",
                                  "/v1/responses/render", "/tokenize"])
def test_declared_length_over_limit_is_413_before_the_body(serve, path):
    """A request that declares a Content-Length over the limit and sends almost nothing is answered
    413 at once on every route, also those the lanes in front of the app take (they read bodies
    before the app's limit saw the header: no answer until the declared bytes came; newcomer
    check, stop 22). A raw socket, since HTTP clients send the whole declared body."""
    import socket

    client = serve(**SMALL)
    host, port = client.base_url.host, client.base_url.port
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
                     "content-length: 99999999999\r\n\r\n{}".encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            assert chunk, answer
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_streamed_body_over_limit_is_413(serve):
    """A chunked body without Content-Length is counted as it streams and refused past the limit."""
    client = serve(**SMALL)

    def chunks():
        yield b'{"messages": ['
        for _ in range(40):
            yield b'{"role": "user", "content": "' + b"x" * 60 + b'"},'
        yield b'{"role": "user", "content": "end"}]}'

    r = client.post(RENDER, content=chunks(), headers={"content-type": "application/json"})
    assert "content-length" not in r.request.headers
    assert r.status_code == 413
    assert _error(r)["type"] == "PayloadTooLargeError"


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        (RENDER, {"messages": [{"role": "user", "content": "hi"}] * 4}, "messages"),
        (RENDER, {"messages": [], "tools": [{"type": "function"}] * 3}, "tools"),
        (RENDER, {"messages": [], "n": 5}, "n"),
        (DERENDER, {"stream": True, "stream_state": "x" * 65}, "stream_state"),
        (DERENDER, {"stream": True, "stream_state": {"prev_tokens": ["abcdefgh"] * 10}}, "stream_state"),
        (DERENDER, {"chat_request": {"messages": [{"role": "user", "content": "hi"}] * 4}},
         "chat_request.messages"),
        ("/v1/completions/derender", {"completion_request": {"n": 9}}, "completion_request.n"),
    ],
)
def test_parsed_body_bounds_are_400_with_param(serve, path, body, param):
    """Too many messages/tools, too large `n`, an oversized stream_state (string or object), also
    inside nested `*_request` objects, are 400s naming the field before any handler runs."""
    r = serve(**SMALL).post(path, json=body)
    assert r.status_code == 400
    err = _error(r)
    assert err["param"] == param and err["type"] == "BadRequestError"
    assert "--max-" in err["message"]


def test_a_state_over_the_limit_is_never_handed_out(serve):
    """A stream whose state would exceed --max-stream-state-bytes is a 400 on the call that would
    hand it out, naming the flag, instead of a 200 whose state the next call is refused for
    (newcomer finding: megabytes of stop strings)."""
    body = {"stream": True, "chat_request": {"messages": [{"role": "user", "content": "hi"}]},
            "generate_chunk": {"request_id": "x", "choices": [{"index": 0, "token_ids": [9707]}]}}
    r = serve(**SMALL).post(DERENDER, json=body)
    assert r.status_code == 400, r.text
    err = _error(r)
    assert err["param"] == "stream_state" and "--max-stream-state-bytes" in err["message"]
    assert "would be" in err["message"]


def test_bodies_at_the_limits_pass_the_checks(serve):
    """Exactly max_messages / max_tools / max_n are not refused by the limit checks."""
    body = {"messages": [{"role": "user", "content": "hi"}] * 3, "tools": [], "n": 4}
    r = serve(**SMALL).post(RENDER, json=body)
    if r.status_code == 400:
        assert "--max-" not in r.json()["error"]["message"]


LIMITS = BodyLimits(max_messages=5, max_tools=5, max_n=5, max_stream_state_bytes=100)
json_leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=10)


@settings(max_examples=examples(150), deadline=None)
@given(
    st.dictionaries(st.sampled_from(["messages", "tools", "n", "stream_state", "chat_request", "x"]),
                    st.recursive(json_leaf, lambda c: st.lists(c, max_size=8) | st.dictionaries(
                        st.sampled_from(["messages", "n", "stream_state", "y"]), c, max_size=4),
                        max_leaves=30))
)
def test_check_body_raises_only_invalid_request(body):
    """Any JSON-like body either passes or raises InvalidRequest whose param names a bounded field
    that really is over its bound; nothing else is ever raised."""
    try:
        check_body(body, LIMITS)
    except InvalidRequest as exc:
        field = exc.param.split(".")[-1]
        assert field in {"messages", "tools", "n", "stream_state"}
        obj = body if "." not in exc.param else body[exc.param.split(".")[0]]
        value = obj[field]
        if field == "n":
            assert value > LIMITS.max_n
        elif field == "stream_state":
            assert "max-stream-state-bytes" in exc.message
        else:
            assert len(value) > 5


def test_worker_pool_sheds_load_when_queue_full():
    """With 1 thread and room for 1 waiter, a third concurrent call is refused at once (503), the
    waiter still runs, and the busy/queued counts return to zero."""
    release = threading.Event()
    seen: list[tuple[int, int]] = []
    pool = None

    async def main():
        nonlocal pool
        pool = WorkerPool(1, 1, 30.0, on_change=lambda b, q: seen.append((b, q)))
        results: list[object] = []

        async def call():
            try:
                results.append(await pool.run(release.wait, 10))
            except Overloaded as exc:
                results.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.sleep(0.05)
            tg.start_soon(call)
            await anyio.sleep(0.05)
            tg.start_soon(call)
            await anyio.sleep(0.05)
            release.set()
        return results

    results = anyio.run(main)
    refused = [r for r in results if isinstance(r, Overloaded)]
    assert len(refused) == 1 and refused[0].status_code == 503
    assert results.count(True) == 2
    assert (1, 1) in seen and (pool.busy, pool.queued) == (0, 0)


def test_worker_pool_queue_timeout_is_503():
    """A request that cannot get a thread within queue_timeout gets Overloaded, not a hang."""
    release = threading.Event()

    async def main():
        pool = WorkerPool(1, 10, 0.2)
        async with anyio.create_task_group() as tg:
            tg.start_soon(pool.run, release.wait, 10)
            await anyio.sleep(0.05)
            with pytest.raises(Overloaded, match="queue-timeout"):
                await pool.run(time.sleep, 0)
            release.set()

    anyio.run(main)


def test_worker_pool_run_here_holds_a_free_slot_or_declines():
    """``run_here`` runs on the calling thread holding a slot (busy counted, later callers queue
    behind it), declines without running while every slot is taken, and frees the slot on error."""
    release = threading.Event()
    seen: list[tuple[int, int]] = []

    async def main():
        pool = WorkerPool(1, 1, 30.0, on_change=lambda b, q: seen.append((b, q)))
        here = threading.get_ident()
        ran, result = pool.run_here(lambda: (threading.get_ident(), pool.busy))
        assert ran and result == (here, 1)
        with pytest.raises(ZeroDivisionError):
            pool.run_here(lambda: 1 / 0)
        assert (pool.busy, pool._gate.value) == (0, 1)
        calls: list[object] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(pool.run, release.wait, 10)
            await anyio.sleep(0.05)
            assert pool.run_here(calls.append, "x") == (False, None) and calls == []
            release.set()
        assert pool.run_here(calls.append, "y") == (True, None) and calls == ["y"]
        return pool

    pool = anyio.run(main)
    assert (1, 0) in seen and (pool.busy, pool.queued) == (0, 0)


def test_a_client_gone_mid_body_is_not_a_server_error(serve, caplog):
    """A client that closes the connection before sending the body it announced (round 29's
    newcomer: ``Content-Length: 1000000``, a few bytes, close) was logged as a 500 with two
    tracebacks (``ClientDisconnect`` in ``read_json``). Now an INFO line, no error logged, and the
    server answers the next request."""
    import logging
    import socket
    import time
    from urllib.parse import urlsplit

    client = serve()
    url = urlsplit(str(client.base_url))
    with caplog.at_level(logging.INFO):
        with socket.create_connection((url.hostname, url.port)) as sock:
            sock.sendall(b"POST " + RENDER.encode() + b" HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                         b"content-length: 1000000\r\n\r\n" + b'{"messages": [')
            time.sleep(0.2)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any("client disconnected" in r.getMessage() for r in caplog.records):
            time.sleep(0.05)
    assert any("client disconnected before sending the whole request body" in r.getMessage() for r in caplog.records)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]
    assert client.post(RENDER, json={"messages": [{"role": "user", "content": "hi"}]}).status_code == 200
