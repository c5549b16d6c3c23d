"""Record multimodal render goldens from a running vLLM 0.33 render server.

Start the peer from the repository root (the model path as given on its command line is the
``model_id`` that enters every media hash, so it must be the same relative path the tests use)::

    VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 ~/vllm/bin/vllm launch render \
        ../shared/models/Qwen--Qwen3-VL-2B-Instruct --port 8150 \
        --allowed-local-media-path MEDIA_COPY --limit-mm-per-prompt '{"image":3,"video":1}' \
        --max-model-len 32768
    python tools/record_multimodal_goldens.py --url http://127.0.0.1:8150 \
        --model ../shared/models/Qwen--Qwen3-VL-2B-Instruct --media-copy MEDIA_COPY --profile plain

and for Qwen2.5-VL add ``--trust-request-mm-kwargs --allowed-media-domains example.org`` to the
server and pass ``--profile trusted``. ``MEDIA_COPY`` is a copy of ``../shared/data/media`` (vLLM
must be allowed to read it; error messages naming it are stored with the folder replaced by
``{MEDIA}``).

The goldens stay small: token ids run-length encoded, each ``kwargs_data`` / ``mm_metadata`` item
decoded (msgpack, reference multimodal.md §3) into field name, factory, dtype, shape and the
sha256 of the raw tensor bytes (small tensors also by value), plus the sha256 of the whole base64
string (so a byte-identical encoding can be checked without storing megabytes).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import msgpack

MEDIA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "media"
OUT = Path(__file__).resolve().parents[1] / "tests" / "goldens" / "multimodal"

IMAGES = [
    "rgb_640x480.png",
    "rgb_640x480.jpg",
    "rgba_384x256.png",
    "gray_150x100.png",
    "rgb_tiny_1x1.png",
    "rgb_28x28.png",
    "rgb_224x224.png",
    "rgb_wide_1280x320.png",
    "rgb_tall_300x900.png",
    "rgb_large_4000x3000.jpg",
]
VIDEOS = ["video_16f_320x240.mp4", "video_16f_320x240.avi"]


def data_url(name: str) -> str:
    mime = {"png": "image/png", "jpg": "image/jpeg", "mp4": "video/mp4", "avi": "video/x-msvideo"}
    raw = (MEDIA / name).read_bytes()
    return f"data:{mime[name.rsplit('.', 1)[1]]};base64," + base64.b64encode(raw).decode()


def image_part(name: str, **extra: Any) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": data_url(name)}, **extra}


def video_part(name: str) -> dict[str, Any]:
    return {"type": "video_url", "video_url": {"url": data_url(name)}}


def chat(*parts: dict[str, Any], text: str = "Describe.", **extra: Any) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": [*parts, {"type": "text", "text": text}]}],
        "max_tokens": 8,
        **extra,
    }


def cases(profile: str, media_copy: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """name → (endpoint, body). Bodies refer to media by data URL; ``file://`` ones by
    ``{MEDIA}`` (the test substitutes its own allowed folder)."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for name in IMAGES:
        out[f"img_{name}"] = ("render", chat(image_part(name)))
    out["img_corrupt"] = ("render", chat(image_part("corrupt.png")))
    for name in VIDEOS:
        out[f"vid_{name}"] = ("render", chat(video_part(name)))
    out["two_images"] = ("render", chat(image_part("rgb_224x224.png"), image_part("rgb_wide_1280x320.png")))
    out["same_twice"] = ("render", chat(image_part("rgb_224x224.png"), image_part("rgb_224x224.png")))
    out["image_and_video"] = (
        "render",
        chat(image_part("rgb_224x224.png"), video_part("video_16f_320x240.mp4")),
    )
    out["uuid"] = ("render", chat(image_part("rgb_224x224.png", uuid="my-image-uuid-1")))
    out["mm_payload_none"] = ("render", chat(image_part("rgb_640x480.png"), mm_payload="none"))
    out["tokenize_image"] = ("tokenize", chat(image_part("rgb_640x480.png")))
    out["tokenize_two"] = (
        "tokenize",
        chat(image_part("rgb_224x224.png"), image_part("rgb_wide_1280x320.png")),
    )
    out["too_many_images"] = ("render", chat(*[image_part("rgb_28x28.png")] * 4))
    out["too_many_videos"] = (
        "render",
        chat(video_part("video_16f_320x240.mp4"), video_part("video_16f_320x240.mp4")),
    )
    out["audio_part"] = (
        "render",
        chat({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}),
    )
    out["bad_base64"] = (
        "render",
        chat({"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@@"}}),
    )
    out["file_allowed"] = (
        "render",
        chat({"type": "image_url", "image_url": {"url": "file://{MEDIA}/rgb_224x224.png"}}),
    )
    out["file_outside"] = (
        "render",
        chat({"type": "image_url", "image_url": {"url": "file:///etc/hostname"}}),
    )
    out["file_traversal"] = (
        "render",
        chat({"type": "image_url", "image_url": {"url": "file://{MEDIA}/../../etc/hostname"}}),
    )
    # bad input vLLM 0.33 refuses with a 400 (the tests compare status, type and param: its
    # messages are a processor or pydantic dump; ``OWN_WORDING`` in tests/test_multimodal.py)
    out["png_as_video"] = (
        "render",
        chat({"type": "video_url", "video_url": {"url": data_url("rgb_224x224.png")}}),
    )
    out["image_url_string"] = ("render", chat({"type": "image_url", "image_url": data_url("rgb_28x28.png")}))
    out["video_url_string"] = (
        "render",
        chat({"type": "video_url", "video_url": data_url("video_16f_320x240.mp4")}),
    )
    out["multi_turn"] = (
        "render",
        {
            "messages": [
                {
                    "role": "user",
                    "content": [image_part("rgb_640x480.png"), {"type": "text", "text": "What is it?"}],
                },
                {"role": "assistant", "content": "A picture."},
                {"role": "user", "content": [{"type": "text", "text": "And the colour?"}]},
            ],
            "max_tokens": 8,
        },
    )
    if profile == "plain":
        out["untrusted_mm_kwargs"] = (
            "render",
            chat(image_part("rgb_640x480.png"), mm_processor_kwargs={"max_pixels": 50176}),
        )
    else:
        out["trusted_max_pixels"] = (
            "render",
            chat(image_part("rgb_640x480.png"), mm_processor_kwargs={"max_pixels": 50176}),
        )
        out["trusted_media_io_num_frames"] = (
            "render",
            chat(video_part("video_16f_320x240.mp4"), media_io_kwargs={"video": {"num_frames": 4}}),
        )
        out["domain_not_allowed"] = (
            "render",
            chat({"type": "image_url", "image_url": {"url": "http://example.com/a.png"}}),
        )
    return out


def substitute(value: Any, media: str) -> Any:
    if isinstance(value, str):
        return value.replace("{MEDIA}", media)
    if isinstance(value, list):
        return [substitute(v, media) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, media) for k, v in value.items()}
    return value


def rle(ids: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for t in ids:
        if out and out[-1][0] == t:
            out[-1][1] += 1
        else:
            out.append([t, 1])
    return out


def describe_data(data: Any) -> Any:
    if (
        isinstance(data, list)
        and len(data) == 3
        and isinstance(data[0], str)
        and isinstance(data[2], msgpack.ExtType)
    ):
        raw = data[2].data
        entry: dict[str, Any] = {
            "dtype": data[0],
            "shape": data[1],
            "sha256": hashlib.sha256(raw).hexdigest(),
            "nbytes": len(raw),
        }
        if len(raw) <= 64:
            entry["hex"] = raw.hex()
        return entry
    if isinstance(data, list):
        return [describe_data(d) for d in data]
    return data


def describe_item(b64: str | None) -> Any:
    if b64 is None:
        return None
    doc = msgpack.unpackb(base64.b64decode(b64), raw=False, strict_map_key=False)
    fields = {
        name: {"field": spec["field"], "data": describe_data(spec["data"])} for name, spec in doc.items()
    }
    return {"b64_sha256": hashlib.sha256(b64.encode()).hexdigest(), "b64_len": len(b64), "fields": fields}


def describe(endpoint: str, status: int, body: Any, media_copy: str) -> dict[str, Any]:
    if status != 200:
        text = json.dumps(body).replace(media_copy, "{MEDIA}")
        error = json.loads(text)["error"]
        if len(error["message"]) > 2000:  # a processor's dump of the decoded frames
            error["message"] = error["message"][:2000]
        return {"status": status, "error": error}
    if endpoint == "tokenize":
        return {"status": 200, "count": body["count"], "tokens_rle": rle(body["tokens"])}
    feats = body.get("features")
    out: dict[str, Any] = {"status": 200, "tokens_rle": rle(body["token_ids"])}
    if feats is None:
        out["features"] = None
        return out
    out["features"] = {
        "mm_hashes": feats["mm_hashes"],
        "mm_placeholders": feats["mm_placeholders"],
        "kwargs_data": None
        if feats.get("kwargs_data") is None
        else {m: [describe_item(x) for x in v] for m, v in feats["kwargs_data"].items()},
        "mm_metadata": None
        if feats.get("mm_metadata") is None
        else {m: [describe_item(x) for x in v] for m, v in feats["mm_metadata"].items()},
        "mm_metadata_b64": feats.get("mm_metadata"),
    }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True, help="model path exactly as given to the peer")
    ap.add_argument("--media-copy", required=True, help="the peer's --allowed-local-media-path")
    ap.add_argument("--profile", choices=["plain", "trusted"], required=True)
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    folder = Path(args.model).name
    out_path = OUT / f"{folder}.json"
    golden: dict[str, Any] = json.loads(out_path.read_text()) if args.only and out_path.exists() else {}
    golden["model_id"] = args.model
    golden["profile"] = args.profile
    recorded = golden.setdefault("cases", {})
    client = httpx.Client(base_url=args.url, timeout=120)
    for name, (endpoint, body) in cases(args.profile, args.media_copy).items():
        if args.only and name not in args.only:
            continue
        path = "/tokenize" if endpoint == "tokenize" else "/v1/chat/completions/render"
        resp = client.post(path, json=substitute(body, args.media_copy))
        recorded[name] = {
            "endpoint": endpoint,
            **describe(endpoint, resp.status_code, resp.json(), args.media_copy),
        }
        print(name, resp.status_code, file=sys.stderr)
    out_path.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
