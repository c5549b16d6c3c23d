"""The README's "Deliberate differences", one normaliser each, plus fields that vary per call.

A normaliser takes ``(area, ours, theirs)`` (JSON values, already copied) and returns them with
the deliberate difference removed. Each carries the README line it stands for, so a normaliser
exists only where the README says why we differ.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .compare import diff_paths

Json = Any


@dataclass(frozen=True)
class Normaliser:
    name: str
    readme: str  # the README line (section "Deliberate differences from vLLM 0.33") or reason
    areas: tuple[str, ...]
    apply: Callable[[Json, Json], tuple[Json, Json]]


def _walk(value: Json, fn: Callable[[dict[str, Any]], None]) -> None:
    if isinstance(value, dict):
        fn(value)
        for v in value.values():
            _walk(v, fn)
    elif isinstance(value, list):
        for v in value:
            _walk(v, fn)


def _volatile(ours: Json, theirs: Json) -> tuple[Json, Json]:
    def drop(d: dict[str, Any]) -> None:
        if "created" in d and isinstance(d.get("created"), int):
            d["created"] = 0
    _walk(ours, drop)
    _walk(theirs, drop)
    for side in (ours, theirs):
        if isinstance(side, dict) and isinstance(side.get("request_id"), str):
            side["request_id"] = "<random>"
        if isinstance(side, list):
            for item in side:
                if isinstance(item, dict) and isinstance(item.get("request_id"), str):
                    item["request_id"] = "<random>"
    return ours, theirs


def _tool_ids(ours: Json, theirs: Json) -> tuple[Json, Json]:
    def fix(d: dict[str, Any]) -> None:
        for call in d.get("tool_calls") or []:
            if isinstance(call, dict) and call.get("id") is not None:
                call["id"] = "<tool-call-id>"
    _walk(ours, fix)
    _walk(theirs, fix)
    return ours, theirs


def _sampling(side: Json) -> list[dict[str, Any]]:
    items = side if isinstance(side, list) else [side]
    return [i["sampling_params"] for i in items
            if isinstance(i, dict) and isinstance(i.get("sampling_params"), dict)]


def _max_tokens(ours: Json, theirs: Json) -> tuple[Json, Json]:
    for o, t in zip(_sampling(ours), _sampling(theirs), strict=False):
        if "max_tokens" in o and t.get("max_tokens") is None:
            o.pop("max_tokens")
            t.pop("max_tokens", None)
    return ours, theirs


def _stop_strings(ours: Json, theirs: Json) -> tuple[Json, Json]:
    for o, t in zip(_sampling(ours), _sampling(theirs), strict=False):
        if "stop" not in o or o.get("stop") in (None, []):
            o.pop("stop", None)
            t.pop("stop", None)
            # vLLM holds back max(len(stop)) - 1 characters for the stop strings it was sent
            if "output_text_buffer_length" not in o:
                t.pop("output_text_buffer_length", None)
    return ours, theirs


def _logprob_bytes(ours: Json, theirs: Json) -> tuple[Json, Json]:
    def entries(side: Json) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        _walk(side, lambda d: found.append(d) if "bytes" in d and "token" in d else None)
        return found
    for o, t in zip(entries(ours), entries(theirs), strict=False):
        if o.get("bytes") != t.get("bytes"):
            o.pop("bytes")
            t.pop("bytes")
    return ours, theirs


NORMALISERS: tuple[Normaliser, ...] = (
    Normaliser("volatile", "not a difference: `created` is the clock, render's `request_id` is "
               "random on both sides", ("render", "derender batch", "derender stream"), _volatile),
    Normaliser("tool_call_ids", "Tool-call ids are stable across retries and replicas (vLLM mints "
               "random ids, #57571).", ("derender batch", "derender stream"), _tool_ids),
    Normaliser("max_tokens", "`max_tokens` is always present in rendered `sampling_params` (vLLM "
               "drops it when it equals 16, ...)", ("render",), _max_tokens),
    Normaliser("stop_strings", "Stop strings work in streaming derender (vLLM refuses them with "
               "400) and are not sent to the engine.", ("render",), _stop_strings),
    Normaliser("strict_not_in_template", "A tool's `strict` (an OpenAI-only field) is not handed "
               "to the chat template (run.render_one compares the prompt with vLLM's prompt for the "
               "request without `strict`)", (), lambda o, t: (o, t)),
    Normaliser("calls_kept", "Because a stream cannot take back what it sent ... a tool call whose "
               "name was already emitted stays a call (run.calls_kept: vLLM's batch gives the whole "
               "output back as content)", (), lambda o, t: (o, t)),
    Normaliser("logprob_bytes", "Logprob `bytes` are each token's own raw bytes, ...",
               ("derender batch", "derender stream"), _logprob_bytes),
)

# Whole cases the README says we answer differently (checked on the raw inputs, not normalised).
STREAM_STOP_README = ("Stop strings work in streaming derender (vLLM refuses them with 400) and "
                      "are not sent to the engine.")


def normalise(area: str, ours: Json, theirs: Json) -> tuple[Json, Json, list[str]]:
    """Apply every normaliser of ``area``; returns the values and the names that changed
    something."""
    import copy

    ours, theirs = copy.deepcopy(ours), copy.deepcopy(theirs)
    used = []
    for n in NORMALISERS:
        if area not in n.areas:
            continue
        before = len(diff_paths(ours, theirs))
        ours, theirs = n.apply(ours, theirs)
        # used = it removed a real difference (not merely touched a field equal on both sides)
        if n.name != "volatile" and len(diff_paths(ours, theirs)) < before:
            used.append(n.name)
    return ours, theirs, used
