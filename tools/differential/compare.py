"""Field-by-field comparison of two JSON values and the kinds of difference."""

from __future__ import annotations

import re
from typing import Any


def diff_paths(a: Any, b: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every leaf path where ``a`` and ``b`` differ (missing key = ``<absent>``)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out += diff_paths(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            out += diff_paths(x, y, f"{path}[{i}]")
        return out
    if a == b and type(a) is type(b):
        return []
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool) and a == b:
        return []
    return [(path or ".", a, b)]


def kind_of(paths: list[tuple[str, Any, Any]]) -> str:
    """A stable name for a set of differing paths: list indices dropped, at most 4 paths."""
    names = sorted({re.sub(r"\[\d+\]", "[]", p) for p, _, _ in paths})
    return ", ".join(names[:4]) + (f" (+{len(names) - 4})" if len(names) > 4 else "")
