"""Media tensors sent without a copy: :func:`serde.encode_payload` writes the same base64 as
:func:`serde.encode_item`, and the answer's body pieces (:mod:`render_service.serving.media_body`)
join to exactly the ordinary JSON of the result. Over HTTP the goldens of ``test_multimodal.py``
check the sent bytes (sha256 of every ``kwargs_data`` entry)."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pybase64
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from render_service.render.multimodal import serde
from render_service.serving import media_body

SIZES = [0, 1, 2, 3, 4, serde.SPLICE_BYTES - 1, serde.SPLICE_BYTES, serde.B64_STEP - 1, serde.B64_STEP,
         serde.B64_STEP + 1, 2 * serde.B64_STEP + 2]


def _fields(n: int, band: int | None, seed: int) -> dict[str, serde.Field]:
    """Fields with ``n`` rows of 3-byte pixels, as an array or (``band`` not None) a Pending
    tensor written ``band`` rows at a time (0: whole)."""
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(n, 3), dtype=np.uint8)
    data: Any = pixels
    if band is not None:
        def write(out: np.ndarray, start: int) -> None:
            if band == 0:
                assert start == 0 and len(out) == n
            else:  # whole bands, the last one possibly short
                assert start % band == 0 and (len(out) % band == 0 or start + len(out) == n)
            out[...] = pixels[start:start + len(out)]

        data = serde.Pending((n, 3), write, band)
    return {
        "pixel_values": serde.Field(data, "flat", False, [[[0, n, None]]]),
        "image_grid_thw": serde.Field(np.array([1, 2, 3], dtype=np.int64), "batched", True),
        "timestamps": serde.Field([0.5, 1.5], "batched", True),
    }


@settings(max_examples=25, deadline=None)
@given(n=st.one_of(st.sampled_from(SIZES), st.integers(0, serde.B64_STEP)),
       band=st.one_of(st.none(), st.sampled_from([0, 1, 7, 500, 70_000])), seed=st.integers(0, 2**16))
def test_payload_is_the_same_base64_as_the_string(n: int, band: int | None, seed: int) -> None:
    want = serde.encode_item(_fields(n, None, seed))
    assert serde.encode_item(_fields(n, band, seed)) == want
    got = serde.encode_payload(_fields(n, band, seed))
    assert len(got) == len(want)
    assert str(got) == want
    assert bytes(got.view()) == want.encode()
    banded = serde.encode_payload(_fields(n, band, seed), whole_bytes=0)  # the large items' path
    assert bytes(banded.view()) == want.encode()
    assert serde.decode_item(str(got)).keys() == {"pixel_values", "image_grid_thw", "timestamps"}


def _payload(text: bytes) -> serde.B64Payload:
    return serde.B64Payload(np.frombuffer(pybase64.b64encode(text), dtype=np.uint8).copy())


def _result(payloads: dict[str, list[Any]], echo: str) -> dict[str, Any]:
    return {
        "request_id": "chatcmpl-x",
        "token_ids": [1, 2, 3],
        "features": {
            "mm_hashes": {m: [f"h{i}" for i in range(len(v))] for m, v in payloads.items()},
            "mm_placeholders": {m: [{"offset": 0, "length": 1}] for m in payloads},
            "kwargs_data": payloads,
            "mm_metadata": None,
        },
        "parse_context": {"echo": echo},  # request text comes back in the answer
        "sampling_params": {"max_tokens": 8},
    }


@settings(max_examples=40, deadline=None)
@given(
    images=st.lists(st.binary(max_size=64), max_size=4),
    videos=st.lists(st.one_of(st.none(), st.binary(max_size=64)), max_size=3),
    echo=st.text(max_size=40),
)
def test_pieces_join_to_the_ordinary_json(images: list[bytes], videos: list[bytes | None], echo: str) -> None:
    payloads: dict[str, list[Any]] = {}
    if images:
        payloads["image"] = [_payload(b) for b in images]
    if videos:
        payloads["video"] = [None if b is None else _payload(b) for b in videos]
    result = _result(payloads, echo + media_body._MARK[:20] + '-0"')
    want = orjson.dumps(result, option=orjson.OPT_NON_STR_KEYS, default=serde.json_default)
    pieces = media_body.body_pieces(result)
    if not any(isinstance(p, serde.B64Payload) for v in payloads.values() for p in v):
        assert pieces is None
        return
    assert pieces is not None
    assert b"".join(bytes(p) for p in pieces) == want
    assert orjson.loads(want)["features"]["kwargs_data"]["image" if images else "video"]


def test_results_without_payloads_take_the_ordinary_path() -> None:
    assert media_body.body_pieces({"token_ids": [1], "features": None}) is None
    assert media_body.body_pieces(_result({"image": ["plain-string"]}, "")) is None
    assert media_body.body_pieces([1, 2]) is None


def test_response_headers_count_every_piece() -> None:
    result = _result({"image": [_payload(b"x" * 1000), _payload(b"y")]}, "")
    pieces = media_body.body_pieces(result)
    assert pieces is not None
    response = media_body.PiecesResponse(pieces)
    headers = dict(response.raw_headers)
    want = orjson.dumps(result, default=serde.json_default)
    assert headers[b"content-length"] == str(len(want)).encode()
    assert headers[b"content-type"] == b"application/json"


@settings(max_examples=15, deadline=None)
@given(w=st.integers(1, 700), h=st.integers(1, 300), seed=st.integers(0, 2**16))
def test_colour_planes_are_the_bands_pixels(w: int, h: int, seed: int) -> None:
    """Both ways of reading a band (a view of Pillow's memory, or one paste into numpy) give
    ``np.asarray``'s pixels, and the view stays valid after the band itself is gone."""
    from PIL import Image

    from render_service.render.multimodal import image

    rgb = np.random.default_rng(seed).integers(0, 256, size=(h, w, 3), dtype=np.uint8)
    bands = Image.fromarray(rgb).split()
    for c, band in enumerate(bands):
        assert np.array_equal(image._pasted(band), rgb[:, :, c])
    view = image._arrow_view(bands[1], w * h)
    assert view is not None  # Pillow >= 11.2 exports an L image as one uint8 buffer
    del bands
    _churn = [Image.new("L", (w, h), 7) for _ in range(4)]
    assert np.array_equal(view.reshape(h, w), rgb[:, :, 1])
    assert [np.array_equal(p, rgb[:, :, c]) for c, p in enumerate(image.resize_planes(
        Image.fromarray(rgb), h, w))] == [True] * 3


def test_gateway_sends_the_engine_the_same_features_as_render(serve: Any) -> None:
    """The gateway serialises a rendered request itself (``json_default``): the engine gets the
    ``features`` the render route answers, tensors as base64 strings."""
    import base64

    from conftest import model_dir, shared_path

    from render_service.testing.engine import create_engine_app, serve_in_thread

    folder = "Qwen--Qwen3-VL-2B-Instruct"
    engine = create_engine_app(lambda request: [[9707, 13]], role="both")
    url, stop = serve_in_thread(engine)
    try:
        client = serve(model=model_dir(folder), engine_urls=(url,))
        png = (shared_path("data", "media") / "rgb_224x224.png").read_bytes()
        data_url = "data:image/png;base64," + base64.b64encode(png).decode()
        part = {"type": "image_url", "image_url": {"url": data_url}}
        chat = {"model": model_dir(folder), "max_tokens": 4,
                "messages": [{"role": "user", "content": [part, {"type": "text", "text": "What?"}]}]}
        rendered = client.post("/v1/chat/completions/render", json=chat)
        assert rendered.status_code == 200, rendered.text[:300]
        answer = client.post("/v1/chat/completions", json=chat)
        assert answer.status_code == 200, answer.text[:300]
        sent = engine.state.requests[-1]
        assert sent["features"] == rendered.json()["features"]
        assert isinstance(sent["features"]["kwargs_data"]["image"][0], str)
    finally:
        stop()


def test_pybase64_is_the_standard_base64_on_every_media_file() -> None:
    """pybase64 (SIMD) encodes and decodes every media file exactly as the standard library
    (the payloads and the data URLs go through it)."""
    import base64

    from conftest import shared_path

    files = sorted(shared_path("data", "media").iterdir())
    assert len(files) >= 10
    for path in files:
        raw = path.read_bytes()
        text = base64.b64encode(raw)
        assert pybase64.b64encode(raw) == text, path.name
        assert pybase64.b64decode(text, validate=True) == raw, path.name


@settings(max_examples=60, deadline=None)
@given(raw=st.binary(max_size=3000))
def test_pybase64_is_the_standard_base64_on_random_bytes(raw: bytes) -> None:
    import base64
    import binascii

    text = base64.b64encode(raw)
    assert pybase64.b64encode(raw) == text
    assert pybase64.b64decode(text, validate=True) == raw
    bad = text[:-1] + b"*" if text else b"*"  # a non-base64 digit: both refuse it
    with pytest.raises((binascii.Error, ValueError)):
        pybase64.b64decode(bad, validate=True)
    with pytest.raises((binascii.Error, ValueError)):
        base64.b64decode(bad, validate=True)
