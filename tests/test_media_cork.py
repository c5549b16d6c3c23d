"""A media answer's pieces are written corked (``serving/media_body.py`` ``corked``): under real
uvicorn over 127.0.0.1 the connection's socket is found behind uvicorn's ``send``, ``TCP_CORK``
is on while the pieces are written and off once the answer is out (also when the app fails
mid-answer), and the bytes the client reads are the pieces joined. Through the real app, the
render lane's answer to a cached image is sent corked and is byte-equal to the full stack's
ordinary JSON of the same render."""

from __future__ import annotations

import base64
import socket
from typing import Any

import httpx
import orjson
import pytest
from conftest import model_dir, shared_path

from render_service.serving import media_body, render_lane
from render_service.settings import Settings
from render_service.testing.engine import serve_in_thread

pytestmark = pytest.mark.skipif(not hasattr(socket, "TCP_CORK"), reason="TCP_CORK is Linux's")

PIECES = [b'{"a":"', memoryview(b"x" * 300_000), b'","b":"', memoryview(b"y" * 7), b'"}']


def _cork(send: Any) -> int | None:
    sock = media_body._socket_of(send)
    return None if sock is None else int(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK))


def _pieces_app(seen: list[Any], fail: bool = False) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await receive()
        seen.append(("before", _cork(send)))
        try:
            with media_body.corked(send):
                seen.append(("inside", _cork(send)))
                if fail:
                    raise RuntimeError("fails mid-answer")
                await media_body.PiecesResponse(list(PIECES))(scope, receive, send)
        finally:
            seen.append(("after", _cork(send)))

    return app


def test_pieces_are_written_corked_and_pushed_at_the_end() -> None:
    seen: list[Any] = []
    url, stop = serve_in_thread(_pieces_app(seen))
    try:
        with httpx.Client(base_url=url) as client:
            for _ in range(2):  # the same keep-alive connection: each answer corks and uncorks
                r = client.get("/")
                assert r.status_code == 200
                assert r.content == b"".join(bytes(p) for p in PIECES)
                assert r.headers["content-length"] == str(len(r.content))
    finally:
        stop()
    assert seen == [("before", 0), ("inside", 1), ("after", 0)] * 2


def test_an_answer_that_fails_mid_way_is_uncorked() -> None:
    seen: list[Any] = []
    url, stop = serve_in_thread(_pieces_app(seen, fail=True))
    try:
        with httpx.Client(base_url=url) as client:
            assert client.get("/").status_code == 500  # uvicorn answers the app's exception
    finally:
        stop()
    assert seen == [("before", 0), ("inside", 1), ("after", 0)]


def test_a_send_without_uvicorns_socket_is_left_alone() -> None:
    async def wrapper(message: Any) -> None:
        raise AssertionError("not called")

    assert media_body._socket_of(wrapper) is None
    with media_body.corked(wrapper):
        pass


def test_the_lane_sends_a_cached_image_corked_and_byte_equal(serve: Any, monkeypatch: Any) -> None:
    """The real app under uvicorn: the second turn of an image is answered by the render lane
    from the cache, its pieces written while ``TCP_CORK`` is on (the real ``corked``, wrapped
    only to read the option), and its bytes are the ordinary JSON of that render."""
    states: list[int | None] = []
    real = render_lane.corked

    class Recording:
        def __init__(self, send: Any) -> None:
            self.send, self.inner = send, real(send)

        def __enter__(self) -> None:
            self.inner.__enter__()
            states.append(_cork(self.send))

        def __exit__(self, *exc: Any) -> Any:
            out = self.inner.__exit__(*exc)
            states.append(_cork(self.send))
            return out

    monkeypatch.setattr(render_lane, "corked", Recording)
    client = serve(model=model_dir("Qwen--Qwen3-VL-2B-Instruct"))
    data = shared_path("data", "media", "rgb_640x480.jpg").read_bytes() + b"cork-test"
    url = "data:image/jpeg;base64," + base64.b64encode(data).decode()
    part = {"type": "image_url", "image_url": {"url": url}}
    body = {"messages": [{"role": "user", "content": [part, {"type": "text", "text": "Hi"}]}]}
    answers = []
    for _ in range(2):
        r = client.post("/v1/chat/completions/render", json=body, headers={"x-request-id": "cork-1"})
        assert r.status_code == 200, r.text[:300]
        answers.append(r.content)
    assert answers[0] == answers[1]
    assert states == [1, 0, 1, 0]  # both turns (the first rendered on a worker) corked, then pushed
    doc = orjson.loads(answers[1])
    entry = doc["features"]["kwargs_data"]["image"][0]
    assert isinstance(entry, str) and len(entry) > 1_000_000
    assert answers[1] == orjson.dumps(doc)  # one JSON document, as orjson writes it
