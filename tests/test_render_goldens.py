"""Render answers equal vLLM 0.33's, recorded as golden files by ``tools/record_render_goldens.py``
(cases in ``tools/render_golden_cases.py``): the whole ``GenerateRequest`` (token ids, sampling
params, parse context, reasoning verdict...) for each model configuration, or the same 4xx status.

Fields left out of the comparison are the README's deliberate differences (listed in ``IGNORED``).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from conftest import REPO, model_dir

sys.path.insert(0, str(REPO / "tools"))
from render_golden_cases import CONFIGS, START_DATE, cases  # noqa: E402

GOLDENS = REPO / "tests" / "goldens"


def _rows(config: str) -> list[dict[str, Any]]:
    path = GOLDENS / f"render_{config}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else []


CASES = [(config, row) for config in CONFIGS for row in _rows(config)]


def _settings(config: str) -> dict[str, Any]:
    flags = CONFIGS[config]["flags"]
    kw: dict[str, Any] = {
        "model": model_dir(CONFIGS[config]["folder"]),
        "served_model_name": (f"../shared/models/{CONFIGS[config]['folder']}",),
        "system_start_date": START_DATE,
        "enable_auto_tool_choice": "--enable-auto-tool-choice" in flags,
    }
    for flag, key in (("--reasoning-parser", "reasoning_parser"), ("--tool-call-parser", "tool_call_parser")):
        if flag in flags:
            kw[key] = flags[flags.index(flag) + 1]
    return kw


def _diff(ours: Any, theirs: Any, where: str = "") -> list[str]:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out = []
        for key in sorted(set(ours) | set(theirs)):
            if key not in ours or key not in theirs:
                out.append(
                    f"{where}.{key}: ours {ours.get(key, '<absent>')!r} vLLM {theirs.get(key, '<absent>')!r}"
                )
            else:
                out += _diff(ours[key], theirs[key], f"{where}.{key}")
        return out
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [d for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) for d in _diff(a, b, f"{where}[{i}]")]
    return [] if ours == theirs else [f"{where}: ours {ours!r} vLLM {theirs!r}"]


@pytest.mark.parametrize(("config", "row"), CASES, ids=[f"{c}-{r['name']}" for c, r in CASES])
def test_render_equals_vllm(serve, config: str, row: dict[str, Any]) -> None:
    client = serve(**_settings(config))
    # the request as sent to vLLM (the golden file stores it with sorted keys; key order matters
    # to templates that print tool schemas)
    sent = {name: body for name, _, body in cases(config)}.get(row["name"], row["body"])
    body = {"model": f"../shared/models/{CONFIGS[config]['folder']}", **sent}
    r = client.post(row["path"], json=body, headers={"X-Request-Id": "golden"})
    if row["status"] != 200:
        assert r.status_code == row["status"], r.text
        return
    assert r.status_code == 200, r.text
    diffs = _diff(r.json(), row["response"])
    assert not diffs, "\n".join(diffs)
