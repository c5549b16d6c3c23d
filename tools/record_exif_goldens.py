"""Record what a running vLLM 0.33 render server makes of images carrying an EXIF (or XMP)
Orientation tag, and of PNGs whose transparency is a tRNS colour (RGB, L):
``tests/goldens/multimodal/exif.json`` (``tests/test_multimodal_exif.py``).

vLLM turns every image upright before its RGB conversion (``normalize_image``:
``ImageOps.exif_transpose``), so an Orientation of 5-8 swaps the grid's height and width and every
orientation other than 1 moves the pixels; the hash stays that of the file bytes.

    PYTHONPATH=. python tools/record_exif_goldens.py --url http://127.0.0.1:8300 \\
        --model /tmp/shared/models/Qwen--Qwen3-VL-2B-Instruct

``--model`` is the peer's model path as given on its command line (it enters every hash). The
images are made here with Pillow (:func:`make_image`) and stored in the goldens as base64, so the
test reads the very bytes the peer was sent. Per case: the peer's ``mm_hashes``, ``mm_metadata``
and the sha256 of its ``kwargs_data`` item (the test checks that one only where no resize is
needed: the resized items differ by a level in a few values, README "Multimodal render").
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import httpx
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
import record_multimodal_goldens as rec  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "tests" / "goldens" / "multimodal" / "exif.json"
MIME = {"JPEG": "image/jpeg", "PNG": "image/png", "WEBP": "image/webp"}
SIZES = {"resized": (200, 120), "kept": (256, 128)}
"""``kept``: both sides multiples of 32 (Qwen3-VL's factor) and within the pixel bounds, so the
item is the unresized pixels, byte for byte."""


def make_image(fmt: str, size: tuple[int, int], orientation: int | None, mode: str = "RGB",
               xmp: bool = False, transparent: bool = False) -> bytes:
    """A ``size`` image of eight coloured blocks (4 × 2, so every turn and flip moves them), in
    ``fmt`` with ``orientation`` as its EXIF Orientation (``None``: no EXIF; ``xmp``: the
    orientation in an XMP packet instead; ``transparent``: the first block's colour is the PNG's
    tRNS transparent colour)."""
    w, h = size
    img = Image.new(mode, size)
    colours = [(230, 20, 20), (20, 230, 20), (20, 20, 230), (230, 230, 20),
               (20, 230, 230), (230, 20, 230), (128, 64, 0), (250, 250, 250)]
    for i, c in enumerate(colours):
        x, y = i % 4 * w // 4, i // 4 * h // 2
        fill = c[0] if mode == "L" else (*c, 255 if i % 2 else 96)[:len(mode)]
        img.paste(fill, (x, y, x + w // 4, y + h // 2))
    kwargs: dict[str, Any] = {}
    if transparent:
        kwargs["transparency"] = colours[0][0] if mode == "L" else colours[0]
    if orientation is not None and not xmp:
        exif = Image.Exif()
        exif[0x0112] = orientation
        kwargs["exif"] = exif.tobytes()
    if orientation is not None and xmp:
        kwargs["xmp"] = (
            '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/'
            '22-rdf-syntax-ns#"><rdf:Description xmlns:tiff="http://ns.adobe.com/tiff/1.0/" '
            f'tiff:Orientation="{orientation}"/></rdf:RDF></x:xmpmeta>'
        ).encode()
    if fmt == "WEBP":
        kwargs["lossless"] = True
    buf = io.BytesIO()
    img.save(buf, fmt, **kwargs)
    return buf.getvalue()


def cases() -> dict[str, bytes]:
    """name → image bytes: JPEG at both sizes with no EXIF and Orientation 1-8; PNG and WebP with
    2, 6 and 8; an RGBA PNG with 6 (turned and composited: the hash's io_config); a JPEG with
    its orientation (6) in XMP only; RGB and L PNGs with a tRNS colour (vLLM composites them onto
    white as it does RGBA), the RGB one also with 6."""
    out: dict[str, bytes] = {}
    for label, size in SIZES.items():
        out[f"jpeg_{label}_none"] = make_image("JPEG", size, None)
        for o in range(1, 9):
            out[f"jpeg_{label}_{o}"] = make_image("JPEG", size, o)
    for fmt in ("PNG", "WEBP"):
        for o in (2, 6, 8):
            out[f"{fmt.lower()}_kept_{o}"] = make_image(fmt, SIZES["kept"], o)
    out["png_rgba_kept_6"] = make_image("PNG", SIZES["kept"], 6, mode="RGBA")
    out["jpeg_xmp_kept_6"] = make_image("JPEG", SIZES["kept"], 6, xmp=True)
    out["png_trns_rgb_kept_none"] = make_image("PNG", SIZES["kept"], None, transparent=True)
    out["png_trns_rgb_kept_6"] = make_image("PNG", SIZES["kept"], 6, transparent=True)
    out["png_trns_l_kept_none"] = make_image("PNG", SIZES["kept"], None, mode="L", transparent=True)
    return out


def mime_of(name: str) -> str:
    return MIME[name.split("_", 1)[0].upper()]


def body(name: str, data: bytes) -> dict[str, Any]:
    url = f"data:{mime_of(name)};base64," + base64.b64encode(data).decode()
    return rec.chat({"type": "image_url", "image_url": {"url": url}})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True, help="the peer's model path as given (enters the hashes)")
    args = ap.parse_args()
    client = httpx.Client(base_url=args.url, timeout=120)
    out: dict[str, Any] = {"model_id": args.model, "cases": {}}
    for name, data in cases().items():
        resp = client.post("/v1/chat/completions/render", json=body(name, data))
        resp.raise_for_status()
        feats = resp.json()["features"]
        item = feats["kwargs_data"]["image"][0]
        out["cases"][name] = {
            "file_b64": base64.b64encode(data).decode(),
            "mm_hash": feats["mm_hashes"]["image"][0],
            "mm_metadata": feats["mm_metadata"]["image"][0],
            "placeholder_length": feats["mm_placeholders"]["image"][0]["length"],
            "kwargs_sha256": hashlib.sha256(item.encode()).hexdigest(),
        }
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {len(out['cases'])} cases to {OUT}")


if __name__ == "__main__":
    main()
