"""Helpers shared by the render tests: bundles per model folder, the transformers reference, a
readable token-list assertion and a pinned clock for date-dependent templates."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from conftest import model_dir, shared_bundle

from render_service.models import ModelBundle
from render_service.render import messages
from render_service.settings import Settings

MODEL_FOLDERS = (
    "Qwen--Qwen3-0.6B",
    "Qwen--Qwen2.5-7B-Instruct",
    "Qwen--Qwen3-Coder-30B-A3B-Instruct",
    "deepseek-ai--DeepSeek-R1-Distill-Qwen-7B",
    "meta-llama--Llama-3.1-8B-Instruct",
    "mistralai--Mistral-Nemo-Instruct-2407",
    "openai--gpt-oss-20b",
)
#: Folders whose prompts come from their chat template (gpt-oss is rendered through harmony as
#: vLLM does: tests/test_render_goldens.py pins it against vLLM's recorded ids).
TEMPLATE_MODEL_FOLDERS = tuple(f for f in MODEL_FOLDERS if f != "openai--gpt-oss-20b")


def bundle_for(folder: str) -> ModelBundle:
    """The loaded bundle of a ../shared/models folder (max_model_len raised so no case is cut)."""
    return shared_bundle(Settings(model=model_dir(folder), max_model_len=1_000_000))


def settings_for(folder: str, **kw: Any) -> Settings:
    """Settings matching :func:`bundle_for`."""
    return Settings(model=model_dir(folder), max_model_len=1_000_000, **kw)


def reference_ids(
    bundle: ModelBundle,
    conv: messages.Conversation,
    tools: Any,
    kwargs: dict[str, Any],
    add_generation_prompt: bool = True,
    continue_final_message: bool = False,
) -> list[int]:
    """transformers' ``apply_chat_template(..., tokenize=True)`` on the same normalised messages."""
    return list(
        bundle.tokenizer.apply_chat_template(
            conv.primary,
            tools=tools,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final_message,
            tokenize=True,
            return_dict=False,
            **kwargs,
        )
    )


def assert_tokens_eq(bundle: ModelBundle, ours: list[int], ref: list[int]) -> None:
    """Equal id lists; on failure show where they diverge, as ids and decoded text."""
    if ours == ref:
        return
    i = next((k for k, (a, b) in enumerate(zip(ours, ref, strict=False)) if a != b), min(len(ours), len(ref)))
    dec = bundle.tokenizer.decode
    raise AssertionError(
        f"token ids differ at {i} (ours {len(ours)}, ref {len(ref)})\n"
        f"ours: {ours[max(0, i - 5) : i + 10]} {dec(ours[max(0, i - 5) : i + 10])!r}\n"
        f"ref:  {ref[max(0, i - 5) : i + 10]} {dec(ref[max(0, i - 5) : i + 10])!r}"
    )


class FixedDatetime(_dt.datetime):
    """``datetime`` whose ``now()`` is 2026-01-15 (for templates that render today's date)."""

    @classmethod
    def now(cls, tz: Any = None) -> FixedDatetime:  # type: ignore[override]
        return cls(2026, 1, 15, 12, 0, 0)


def pin_clock(monkeypatch: Any) -> None:
    """Pin ``strftime_now`` in both our environment and transformers'."""
    import transformers.utils.chat_template_utils as hf

    from render_service import chat_template

    monkeypatch.setattr(chat_template, "datetime", FixedDatetime)
    monkeypatch.setattr(hf, "datetime", FixedDatetime)
