"""``CompletionRequest``: the body of ``/v1/completions/render``."""

from __future__ import annotations

from pydantic import Field

from .common import SamplingRequestFields


class CompletionRequest(SamplingRequestFields):
    """An OpenAI completions request: ``prompt`` is a string, a list of strings, a list of ids or a
    list of id lists. ``max_tokens`` defaults to 16 (OpenAI)."""

    prompt: str | list[str] | list[int] | list[list[int]]
    max_tokens: int | None = Field(default=16, ge=1)
    logprobs: int | None = Field(default=None, ge=0)
    echo: bool = False
    suffix: str | None = None
    add_special_tokens: bool = True
    best_of: int | None = None
