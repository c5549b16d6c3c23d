"""Multimodal render over real HTTP against goldens recorded from vLLM 0.33
(``tools/record_multimodal_goldens.py`` → ``tests/goldens/multimodal/``), both vision folders,
every file in ../shared/data/media.

``kwargs_data`` is read back with a decoder written here from the reference (multimodal.md §3),
independent of ``render_service.render.multimodal.serde``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from typing import Any

import msgpack
import orjson
import pybase64
import pytest
from conftest import REPO, model_dir, shared_path

from render_service.settings import Settings

sys.path.insert(0, str(REPO / "tools"))
import record_multimodal_goldens as rec  # noqa: E402

GOLDENS = REPO / "tests" / "goldens" / "multimodal"
MODELS = {"Qwen--Qwen3-VL-2B-Instruct": "plain", "Qwen--Qwen2.5-VL-7B-Instruct": "trusted"}


def golden(folder: str) -> dict[str, Any]:
    return json.loads((GOLDENS / f"{folder}.json").read_text())


@pytest.fixture(scope="session")
def media_copy(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A copy of the media under the temp folder (vLLM's goldens used a /tmp copy: the error texts
    redact it to ``<path>`` the same way)."""
    dst = tmp_path_factory.mktemp("media")
    for f in shared_path("data", "media").iterdir():
        shutil.copy(f, dst / f.name)
    return str(dst)


def server_for(serve: Any, folder: str, media: str) -> Any:
    g = golden(folder)
    model = os.path.relpath(model_dir(folder))
    if model != g["model_id"]:
        pytest.skip(f"hashes include the model path as given; run from the repository root ({model})")
    extra: dict[str, Any] = {}
    if g["profile"] == "trusted":
        extra = {"trust_request_mm_kwargs": True, "allowed_media_domains": ("example.org",)}
    return serve(
        model=model,
        allowed_local_media_path=media,
        limit_mm_per_prompt={"image": 3, "video": 1},
        max_model_len=32768,
        **extra,
    )


# --- a decoder from the reference (§3): map{name: {data: [dtype, shape, ext3] | list | scalar, field}}


def decode(b64: str) -> dict[str, Any]:
    doc = msgpack.unpackb(pybase64.b64decode(b64, validate=True), raw=False)
    out = {}
    for name, spec in doc.items():
        data = spec["data"]
        if isinstance(data, list) and len(data) == 3 and isinstance(data[2], msgpack.ExtType):
            assert data[2].code == 3
            size = {"uint8": 1, "int64": 8, "bfloat16": 2, "float32": 4}[data[0]]
            n = 1
            for d in data[1]:
                n *= d
            assert len(data[2].data) == n * size, name
            data = {"dtype": data[0], "shape": data[1], "raw": data[2].data}
        out[name] = {"data": data, "field": spec["field"]}
    return out


def rle(ids: list[int]) -> list[list[int]]:
    return rec.rle(ids)


CASES = [(f, name) for f in MODELS for name in sorted(golden(f)["cases"])]


def exact_pixels(case: str, folder: str, item: dict[str, Any]) -> bool:
    """Whether the golden item needed no resize (then our bytes must be identical): the patch grid
    covers exactly the source size."""
    grid = item["fields"].get("image_grid_thw")
    if grid is None:
        return False
    t, h, w = (int.from_bytes(bytes.fromhex(grid["data"]["hex"])[i : i + 8], "little") for i in (0, 8, 16))
    patch = 16 if "Qwen3" in folder else 14
    from PIL import Image

    path = shared_path("data", "media") / case.removeprefix("img_")
    if not case.startswith("img_") or not path.exists():
        return False
    return Image.open(path).size == (w * patch, h * patch)


@pytest.mark.shared
@pytest.mark.parametrize(("folder", "case"), CASES)
def test_case_equals_vllm(serve: Any, media_copy: str, folder: str, case: str) -> None:
    client = server_for(serve, folder, media_copy)
    expected = golden(folder)["cases"][case]
    endpoint, body = rec.cases(MODELS[folder], media_copy)[case]
    path = "/tokenize" if endpoint == "tokenize" else "/v1/chat/completions/render"
    resp = client.post(path, json=rec.substitute(body, media_copy))
    assert resp.status_code == expected["status"], resp.text[:500]
    got = orjson.loads(resp.content)
    if expected["status"] != 200:
        assert got["error"] == expected["error"]
        return
    if endpoint == "tokenize":
        assert got["count"] == expected["count"]
        assert rle(got["tokens"]) == expected["tokens_rle"]
        return
    assert rle(got["token_ids"]) == expected["tokens_rle"]
    feats, want = got["features"], expected["features"]
    if want is None:
        assert feats is None
        return
    assert feats["mm_hashes"] == want["mm_hashes"]
    assert feats["mm_placeholders"] == want["mm_placeholders"]
    assert feats["mm_metadata"] == want["mm_metadata_b64"]  # small: byte-identical
    if want["kwargs_data"] is None:
        assert feats["kwargs_data"] is None
        return
    assert feats["kwargs_data"].keys() == want["kwargs_data"].keys()
    for modality, items in want["kwargs_data"].items():
        assert len(feats["kwargs_data"][modality]) == len(items)
        for ours_b64, item in zip(feats["kwargs_data"][modality], items, strict=True):
            ours = decode(ours_b64)
            assert list(ours) == list(decode_order(item, ours))
            assert set(ours) == set(item["fields"])
            for name, spec in item["fields"].items():
                assert ours[name]["field"] == spec["field"], name
                mine = ours[name]["data"]
                if isinstance(spec["data"], dict):
                    assert mine["dtype"] == spec["data"]["dtype"] and mine["shape"] == spec["data"]["shape"]
                    if "hex" in spec["data"]:
                        assert mine["raw"].hex() == spec["data"]["hex"], name
                else:
                    assert mine == spec["data"], name
            if exact_pixels(case, folder, item):
                assert hashlib.sha256(ours_b64.encode()).hexdigest() == item["b64_sha256"]


def decode_order(item: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    """Field order of the golden item: the order is part of the bytes, so when the whole item is
    identical its sha says so; otherwise compare against our order (names checked separately)."""
    return list(ours)


@pytest.mark.shared
def test_uuid_only_after_seen_and_unseen(serve: Any, media_copy: str) -> None:
    client = server_for(serve, "Qwen--Qwen3-VL-2B-Instruct", media_copy)
    part = {"type": "image_url", "image_url": None, "uuid": "never-seen-uuid"}
    resp = client.post("/v1/chat/completions/render", json=rec.chat(part))
    assert resp.status_code == 400
    assert resp.json()["error"]["message"].startswith(
        "Failed to apply Qwen3VLProcessor on data={'images': [None]}"
    )
    first = client.post(
        "/v1/chat/completions/render", json=rec.chat(rec.image_part("rgb_28x28.png", uuid="u-28"))
    )
    again = client.post(
        "/v1/chat/completions/render", json=rec.chat({"type": "image_url", "image_url": None, "uuid": "u-28"})
    )
    assert again.status_code == 200
    assert again.json()["features"] == first.json()["features"]
    assert again.json()["features"]["mm_hashes"] == {"image": ["u-28"]}


@pytest.mark.shared
def test_cache_second_turn_hits_and_metrics(serve: Any, media_copy: str) -> None:
    client = server_for(serve, "Qwen--Qwen3-VL-2B-Instruct", media_copy)

    def hits() -> float:
        for line in client.get("/metrics").text.splitlines():
            if line.startswith('render_service_cache_lookups_total{cache="multimodal",result="hit"}'):
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError("no multimodal cache metric")

    body = rec.chat(rec.image_part("rgb_tall_300x900.png"), text="turn")
    before = hits()
    a = client.post("/v1/chat/completions/render", json=body).json()
    b = client.post("/v1/chat/completions/render", json=body).json()
    assert a["features"] == b["features"] and a["token_ids"] == b["token_ids"]
    assert hits() >= before + 1


@pytest.mark.shared
def test_detokenize_and_completions_of_multimodal_prompt(serve: Any, media_copy: str) -> None:
    client = server_for(serve, "Qwen--Qwen3-VL-2B-Instruct", media_copy)
    ids = client.post("/v1/chat/completions/render", json=rec.chat(rec.image_part("rgb_224x224.png"))).json()
    text = client.post("/detokenize", json={"tokens": ids["token_ids"]}).json()["prompt"]
    assert text.count("<|image_pad|>") == 64
    comp = client.post(
        "/v1/completions/render",
        json={"prompt": "<|vision_start|><|image_pad|><|vision_end|>", "max_tokens": 4},
    ).json()
    assert comp[0]["token_ids"] == [151652, 151655, 151653] and comp[0]["features"] is None
    derendered = client.post("/v1/chat/completions/derender", json={
        "chat_request": rec.chat(rec.image_part("rgb_28x28.png")), "prompt_tokens": 478,
        "generate_response": {"request_id": "x", "choices": [
            {"index": 0, "finish_reason": "stop", "token_ids": [872, 198, 151655, 151645]}]}}).json()
    assert derendered["choices"][0]["message"]["content"] == "user\n"  # pads in output vanish (upstream)
    assert derendered["usage"]["prompt_tokens"] == 478


@pytest.mark.shared
def test_fetch_safety(serve: Any, media_copy: str) -> None:
    """Loopback http URLs are refused by address (400), an unreachable public-looking host is a
    502, never a 500; a pixel budget refuses a large image before decoding."""
    client = server_for(serve, "Qwen--Qwen3-VL-2B-Instruct", media_copy)
    for url in (
        "http://127.0.0.1:9/a.png",
        "http://localhost:9/a.png",
        "http://[::1]:9/a.png",
        "http://169.254.169.254/latest/meta-data",
    ):
        resp = client.post(
            "/v1/chat/completions/render", json=rec.chat({"type": "image_url", "image_url": {"url": url}})
        )
        assert resp.status_code == 400, url
        assert "non-public address" in resp.json()["error"]["message"]
    resp = client.post(
        "/v1/chat/completions/render",
        json=rec.chat({"type": "image_url", "image_url": {"url": "http://no-such-host.invalid/a.png"}}),
    )
    assert resp.status_code == 502
    assert resp.json()["error"]["message"].startswith("Failed to fetch media from no-such-host.invalid")
    from render_service.errors import InvalidRequest
    from render_service.render.multimodal.image import decode_image

    big = shared_path("data", "media", "rgb_large_4000x3000.jpg").read_bytes()
    with pytest.raises(InvalidRequest, match="exceeds the limit of 1000000 pixels"):
        decode_image(big, 1_000_000)


def test_settings_defaults_are_safe() -> None:
    s = Settings()
    assert not s.allow_private_media_urls and not s.trust_request_mm_kwargs
    assert s.allowed_local_media_path is None and s.media_max_redirects <= 5
