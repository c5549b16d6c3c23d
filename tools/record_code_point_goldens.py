"""Record the Hugging Face reference ids of the exhaustive code-point texts as per-batch digests for
``tests/test_fast_tokenizer.py::test_exhaustive_code_points_match_hf``.

Run by hand from the repository root (no vLLM needed; ../shared beside the checkout)::

    python tools/record_code_point_goldens.py [MODEL_FOLDER ...]

For each model (default: :data:`MODELS`) it builds :func:`code_point_texts` (every code point,
surrogates excluded, in several contexts), encodes them in batches of :data:`BATCH` with the
reference call, ``tokenizer(batch, add_special_tokens=False)["input_ids"]`` of
``AutoTokenizer.from_pretrained(../shared/models/<folder>)``, and writes
``tests/goldens/code_point_ids.json``::

    {folder: {"key": {...}, "texts_sha256": [one per batch], "ids_sha256": [one per batch]}}

``key`` names what the reference depends on: the sha256 of the folder's tokenizer files and the
``tokenizers`` / ``transformers`` versions. The test trusts a batch's digest only when the key and
the batch's texts digest are the same as recorded; otherwise (or when our ids' digest differs) it
runs the reference on that batch itself and compares id by id, so a stale golden can make the test
slower, never wrong.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from array import array
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "goldens" / "code_point_ids.json"
MODELS_DIR = REPO.parent / "shared" / "models"

#: One tokenizer per family (Qwen, Llama-3, o200k, tekken).
MODELS = ("Qwen--Qwen3-0.6B", "meta-llama--Llama-3.1-8B-Instruct", "openai--gpt-oss-20b",
          "mistralai--Mistral-Nemo-Instruct-2407")
#: Texts per reference call (HF's batch encodings are large).
BATCH = 16
#: Combining marks of classes 1, 220, 230 and 240 appended after each code point.
PROBES = "\u0334\u0316\u0301\u0345"
#: Files of a model folder that define its tokenizer.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                   "merges.txt", "tekken.json", "tokenizer.model")


def code_point_texts() -> list[str]:
    """Every code point (surrogates excluded), 512 per text, each after a letter, doubled, after a
    space and a digit, followed by combining marks (:data:`PROBES`), then the block HF-NFD-decomposed."""
    from tokenizers.normalizers import NFD

    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    texts = []
    for start in range(0, len(chars), 512):
        block = chars[start:start + 512]
        nfd = NFD().normalize_str("\n".join(block))
        pieces = [f"x{c}{c} {c}1{c}{c}" + "".join(c + p for p in PROBES) for c in block]
        texts.append("\n".join(pieces) + "\n" + nfd)
    return texts


def batches(texts: list[str]) -> list[list[str]]:
    """``texts`` cut into consecutive batches of :data:`BATCH`."""
    return [texts[i:i + BATCH] for i in range(0, len(texts), BATCH)]


def texts_digest(batch: list[str]) -> str:
    """sha256 hex of a batch of texts (each UTF-8 encoded with ``surrogatepass``, NUL separated)."""
    h = hashlib.sha256()
    for text in batch:
        h.update(text.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()


def ids_digest(ids_per_text: list[list[int]]) -> str:
    """sha256 hex of a batch's ids: per text its length then its ids, as unsigned 32-bit integers."""
    h = hashlib.sha256()
    for ids in ids_per_text:
        h.update(array("I", [len(ids)]).tobytes())
        h.update(array("I", ids).tobytes())
    return h.hexdigest()


def reference_key(folder: Path) -> dict[str, Any]:
    """What the reference ids depend on: the tokenizer files' sha256 and the library versions."""
    import tokenizers
    import transformers

    files = {name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
             for name in TOKENIZER_FILES if (folder / name).is_file()}
    return {"files": files, "tokenizers": tokenizers.__version__, "transformers": transformers.__version__}


def reference_ids(tokenizer: Any, batch: list[str]) -> list[list[int]]:
    """The reference: HF ``tokenizer(batch, add_special_tokens=False)["input_ids"]``."""
    return [list(ids) for ids in tokenizer(batch, add_special_tokens=False)["input_ids"]]


def record(folder: Path) -> dict[str, Any]:
    """The golden entry of one model folder (see the module docstring)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    chunks = batches(code_point_texts())
    return {
        "key": reference_key(folder),
        "texts_sha256": [texts_digest(chunk) for chunk in chunks],
        "ids_sha256": [ids_digest(reference_ids(tokenizer, chunk)) for chunk in chunks],
    }


def main(argv: list[str] | None = None) -> int:
    """Record the chosen models (default all of :data:`MODELS`) into :data:`OUT`, keeping the others."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="*", default=list(MODELS), help="model folders under ../shared/models")
    p.add_argument("--models-dir", type=Path, default=MODELS_DIR)
    args = p.parse_args(argv)
    golden = json.loads(OUT.read_text(encoding="utf-8")) if OUT.is_file() else {}
    for name in args.models:
        print(f"recording {name} ...", file=sys.stderr, flush=True)
        golden[name] = record(args.models_dir / name)
    OUT.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
