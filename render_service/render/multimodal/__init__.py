"""Multimodal render: images and video for vision-language models, as vLLM 0.33's render sends
them to a tokens-only engine (``features``: hashes, placeholders, processed uint8 patches).

Modules: :mod:`.registry` (families), :mod:`.media` (URL loading, SSRF-safe fetch),
:mod:`.image` / :mod:`.video` (decode, resize, patches), :mod:`.hashing` (item hashes),
:mod:`.serde` (msgpack/base64 items and their decoder), :mod:`.cache` (processed items),
:mod:`.prompt` (collect parts, process, expand placeholders, build ``features``).
"""

from .media import MediaFetchFailed
from .prompt import (
    MediaCollector,
    MediaResult,
    NeedsWorker,
    cached_only,
    collector,
    expand,
    features,
    is_cached_only,
    is_loading_only,
    loading_only,
    plan_parts,
    process_parts,
    reusing_plan,
    state_for,
)

__all__ = [
    "MediaCollector",
    "MediaFetchFailed",
    "MediaResult",
    "NeedsWorker",
    "cached_only",
    "collector",
    "expand",
    "features",
    "is_cached_only",
    "is_loading_only",
    "loading_only",
    "plan_parts",
    "process_parts",
    "reusing_plan",
    "state_for",
]
