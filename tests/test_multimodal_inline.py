"""A vision model's render of cached media runs on the event loop (``serving/render_lane.py``,
``render/multimodal/prompt.py`` ``cached_only``), and answers exactly as on a worker thread.

Under ``cached_only`` a render may only look its media up: an item not cached, a URL to fetch or
read, a part that fails to load raise ``NeedsWorker`` before that work, with nothing cached or
counted. Through the app (in-process ASGI, the real lane and handlers; the handler of the lane is
the real ``render_chat`` wrapped to record the thread it ran on) the first turn of an image runs on
the loop, stops there, and is rendered on a worker thread; the second turn runs on the loop only;
both answers equal the full FastAPI stack's, which renders on the worker pool.
"""

from __future__ import annotations

import asyncio
import base64
import threading
from typing import Any

import httpx
import pytest
from conftest import model_dir, shared_bundle, shared_path
from fastapi import FastAPI

from render_service.errors import InvalidRequest
from render_service.render import render_chat
from render_service.render.multimodal import (
    NeedsWorker,
    cached_only,
    is_cached_only,
    plan_parts,
    reusing_plan,
    state_for,
)
from render_service.render.multimodal.prompt import _LOCAL, MediaPart
from render_service.serving import render_lane
from render_service.serving.app import call_counting, create_app, json_response
from render_service.serving.limits import BodyLimits
from render_service.serving.media_body import body_pieces, media_response
from render_service.settings import Settings

FOLDER = "Qwen--Qwen3-VL-2B-Instruct"
CHAT = "/v1/chat/completions/render"


def _settings() -> Settings:
    return Settings(model=model_dir(FOLDER))


def _image_url(nonce: str) -> str:
    """The 640×480 JPEG with ``nonce`` after its end (decoders ignore it): an item not cached yet."""
    data = shared_path("data", "media", "rgb_640x480.jpg").read_bytes() + nonce.encode()
    return "data:image/jpeg;base64," + base64.b64encode(data).decode()


def _body(url: str | None, uuid: str | None = None, text: str = "Describe.") -> dict[str, Any]:
    part: dict[str, Any] = {"type": "image_url", "image_url": {"url": url} if url is not None else None}
    if uuid is not None:
        part["uuid"] = uuid
    return {"request_id": "inline-1", "messages": [
        {"role": "user", "content": [part, {"type": "text", "text": text}]}]}


def _joined(result: Any) -> bytes:
    pieces = body_pieces(result)
    assert pieces is not None
    return b"".join(bytes(p) for p in pieces)


def test_cached_only_raises_before_any_work_and_serves_the_cached_item() -> None:
    settings = _settings()
    bundle = shared_bundle(settings)
    state = state_for(bundle, settings)
    assert state is not None
    body = _body(_image_url("inline-unit"), uuid="inline-unit-uuid")
    held, hits, misses = state.cache.nbytes, state.cache.hits, state.cache.misses
    with cached_only():
        assert is_cached_only()
        with pytest.raises(NeedsWorker):
            render_chat(bundle, settings, body)
    assert not is_cached_only()
    assert (state.cache.nbytes, state.cache.hits, state.cache.misses) == (held, hits, misses)
    first = render_chat(bundle, settings, body)  # processes and caches it
    assert state.cache.misses == misses + 1 and state.cache.nbytes > held
    with cached_only():
        again = render_chat(bundle, settings, body)
        by_uuid = render_chat(bundle, settings, _body(None, uuid="inline-unit-uuid"))
    assert state.cache.hits >= hits + 2 and state.cache.misses == misses + 1
    assert _joined(again) == _joined(first) and again["token_ids"] == first["token_ids"]
    assert by_uuid["features"]["mm_hashes"] == first["features"]["mm_hashes"]
    assert first["features"]["mm_hashes"] == {"image": ["inline-unit-uuid"]}
    assert by_uuid["features"]["kwargs_data"] == first["features"]["kwargs_data"]


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:9/picture.png",  # a fetch (would be refused as private: a 400 otherwise)
    "file:///etc/hostname",  # a file read (no --allowed-local-media-path: a 400 otherwise)
    "data:image/png;base64,@@not-base64@@",  # fails to load: the ordinary render's 400
])
def test_cached_only_leaves_fetches_reads_and_bad_parts_to_the_worker(url: str) -> None:
    settings = _settings()
    bundle = shared_bundle(settings)
    with cached_only(), pytest.raises(NeedsWorker):
        render_chat(bundle, settings, _body(url))
    with pytest.raises(InvalidRequest):
        render_chat(bundle, settings, _body(url))
    with cached_only(), pytest.raises(NeedsWorker):  # an unknown uuid-only item
        render_chat(bundle, settings, _body(None, uuid="inline-never-seen"))


def test_a_refused_attempt_hands_its_loaded_parts_to_the_worker_run() -> None:
    settings = _settings()
    bundle = shared_bundle(settings)
    body = _body(_image_url("inline-plan"))
    with cached_only(), pytest.raises(NeedsWorker) as refused:
        render_chat(bundle, settings, body)
    plan = refused.value.plan
    assert plan is not None and len(plan) == 1 and plan[0].spec is not None and plan[0].key is not None
    other = MediaPart("image", _image_url("inline-plan-other"), None, "messages[0].content[0]")
    with reusing_plan(plan):
        again = plan_parts(bundle, settings, [plan[0].part], {})
        assert again[0].spec is plan[0].spec and again[0].key == plan[0].key  # not loaded again
        loaded = plan_parts(bundle, settings, [other], {})  # another part: loaded as usual
        assert loaded[0].spec is not None and loaded[0].spec.data != plan[0].spec.data
        assert loaded[0].key != plan[0].key
        reused = render_chat(bundle, settings, body)
    assert getattr(_LOCAL, "plan", None) is None
    ordinary = render_chat(bundle, settings, _body(_image_url("inline-plan")))  # now from the cache
    assert _joined(reused) == _joined(ordinary) and reused["token_ids"] == ordinary["token_ids"]
    with cached_only(), pytest.raises(NeedsWorker) as failed:  # a part that fails to load: no plan
        render_chat(bundle, settings, _body("data:image/png;base64,@@not-base64@@"))
    assert failed.value.plan is None


def _app_with_recorder(settings: Settings) -> tuple[FastAPI, list[tuple[bool, bool, bool]]]:
    """The app, its lane's chat handler the real ``render_chat`` recording ``(on the calling
    loop's thread, under cached_only, reusing a refused attempt's plan)`` for every run."""
    app = create_app(settings, shared_bundle(settings))
    loop_thread = threading.get_ident()  # asyncio.run below runs the loop on this thread
    runs: list[tuple[bool, bool, bool]] = []

    def recording(bundle: Any, s: Settings, body: Any) -> Any:
        runs.append((threading.get_ident() == loop_thread, is_cached_only(),
                     getattr(_LOCAL, "plan", None) is not None))
        return render_chat(bundle, s, body)

    render_lane.install(app, {CHAT: recording}, settings, BodyLimits.from_settings(settings), call_counting,
                        lambda result: media_response(result) or json_response(result))
    return app, runs


def test_lane_renders_cached_media_on_the_loop_and_answers_as_the_full_stack() -> None:
    settings = _settings()
    app, runs = _app_with_recorder(settings)
    url = _image_url("inline-lane")
    small = _body(url)
    large = _body(url, text="Describe. " * 7000)  # over INLINE_SLOT_BYTES: never on the loop
    assert len(str(large)) > render_lane.INLINE_SLOT_BYTES > len(str(small))
    headers = {"X-Request-Id": "inline-lane-1"}

    async def full(scope: Any, receive: Any, send: Any) -> None:
        await FastAPI.__call__(app, scope, receive, send)

    async def run() -> list[tuple[list[tuple[bool, bool, bool]], httpx.Response]]:
        out = []
        async with app.router.lifespan_context(app):
            lane = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
            whole = httpx.AsyncClient(transport=httpx.ASGITransport(app=full), base_url="http://t")
            for client, body in ((lane, small), (lane, small), (whole, small), (lane, large), (lane, large)):
                runs.clear()
                answer = await client.post(CHAT, json=body, headers=headers)
                out.append((list(runs), answer))
        return out

    answers = asyncio.run(run())
    (cold_runs, cold), (warm_runs, warm), (full_runs, whole), (big_runs, big), (big2_runs, big2) = answers
    # tried on the loop, rendered on a worker with the parts the attempt loaded
    assert cold_runs == [(True, True, False), (False, False, True)]
    assert warm_runs == [(True, True, False)]  # the cached turn: on the loop only
    assert full_runs == []  # the full stack calls the app's own handler on its pool
    # over the inline bound: its media loaded on an I/O thread (off the pool), then rendered on a
    # worker with that plan
    assert big_runs == big2_runs == [(False, False, False), (False, False, True)]
    assert cold.status_code == warm.status_code == whole.status_code == big.status_code == 200
    assert cold.content == warm.content == whole.content
    assert len(cold.content) > 2_000_000 and big.content == big2.content
    assert sorted(cold.headers.items()) == sorted(warm.headers.items()) == sorted(whole.headers.items())
