"""Record the Hugging Face reference ids of the real rendered prompts (Qwen3's chat template on
``../shared/data/chat_requests.jsonl``) as digests, for the tests that compare our encoders with HF
on them (``tests/test_prefix_cache.py``, ``tests/test_fast_tokenizer_real.py``, through
``fast_tokenizer_support.reference_ids``).

Run by hand from the repository root (no vLLM needed; ../shared beside the checkout)::

    python tools/record_prompt_goldens.py

Each group of texts (every turn of one multi-turn conversation; each of the 745 requests alone,
:func:`fast_tokenizer_support.prompt_groups`) is encoded with the reference call,
``tokenizer.encode(text, add_special_tokens=False)`` of
``AutoTokenizer.from_pretrained(../shared/models/<folder>)``, and written to
``tests/goldens/prompt_ids.json``::

    {folder: {"key": {...}, "groups": {texts_sha256: ids_sha256}}}

with the digests and ``key`` (tokenizer files' sha256, ``tokenizers`` / ``transformers`` versions)
of ``tools/record_code_point_goldens.py``. A test trusts a group's digest only when the key and the
group's texts digest are recorded and our ids' digest equals it; any other group is encoded by HF
in the test itself, so a stale golden makes the tests slower, never wrong.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "goldens" / "prompt_ids.json"
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tools"))


def main() -> int:
    """Record every group of :func:`fast_tokenizer_support.prompt_groups` into :data:`OUT`."""
    import record_code_point_goldens as digests
    from fast_tokenizer_support import hf_ids, prompt_groups

    from conftest import MODELS

    golden: dict[str, dict] = {}
    for name, groups in prompt_groups().items():
        print(f"recording {name}: {len(groups)} groups ...", file=sys.stderr, flush=True)
        golden[name] = {
            "key": digests.reference_key(MODELS / name),
            "groups": {digests.texts_digest(texts): digests.ids_digest([hf_ids(name, t) for t in texts])
                       for texts in groups},
        }
    OUT.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
