"""Write ``render_service/serving/vllm_render_flags.json``: every option of ``vllm launch render``
with how it takes values, so ``render-service serve`` accepts each one a deployment may carry.

Run by hand with vLLM 0.33 installed (its own venv)::

    VLLM_TARGET_DEVICE=cpu python tools/list_vllm_render_flags.py --vllm ~/vllm/bin/vllm

Each entry maps an option string (``--max-num-seqs``, ``-dp``, ``--no-trust-remote-code``) to
``"flag"`` (no value), ``"value"`` (one value) or ``"list"`` (one or more values), read from the
option lines of ``--help=all``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
from pathlib import Path

TARGET = Path(__file__).resolve().parents[1] / "render_service" / "serving" / "vllm_render_flags.json"
_OPTION = re.compile(r"^(-{1,2}[A-Za-z0-9][A-Za-z0-9-]*)(?: (.*))?$")


def parse_help(text: str) -> dict[str, str]:
    """Option string → ``flag`` / ``value`` / ``list`` from argparse help output."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not re.match(r"^  -", line):
            continue
        spec = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        for entry in spec.split(", "):
            m = _OPTION.match(entry.strip())
            if not m:
                continue
            name, metavar = m.group(1), (m.group(2) or "").strip()
            if not metavar:
                kind = "flag"
            elif "..." in metavar:
                kind = "list"
            else:
                kind = "value"
            out.setdefault(name, kind)
    out.pop("-h", None)
    out.pop("--help", None)
    return dict(sorted(out.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vllm", default="vllm")
    args = ap.parse_args()
    env = {**os.environ, "VLLM_TARGET_DEVICE": os.environ.get("VLLM_TARGET_DEVICE", "cpu")}
    text = subprocess.run(
        [args.vllm, "launch", "render", "--help=all"], env=env, capture_output=True, text=True, check=True
    ).stdout
    flags = parse_help(text)
    TARGET.write_text(json.dumps(flags, indent=1) + "\n", encoding="utf-8")
    print(f"{len(flags)} options → {TARGET}")


if __name__ == "__main__":
    main()
