"""``CompletionRequest``: the body of ``/v1/completions/render``."""

from __future__ import annotations

from pydantic import NonNegativeInt

from .common import SamplingRequestFields


class CompletionRequest(SamplingRequestFields):
    """An OpenAI completions request: ``prompt`` is a string, a list of strings, a list of ids or a
    list of id lists. ``max_tokens`` defaults to 16 (OpenAI)."""

    # vLLM 0.33's union, in its order (a wrong prompt's errors list the members in this order)
    prompt: list[NonNegativeInt] | list[list[NonNegativeInt]] | str | list[str]
    max_tokens: int | None = 16
    logprobs: int | None = None
    echo: bool = False
    suffix: str | None = None
    add_special_tokens: bool = True
    best_of: int | None = None
