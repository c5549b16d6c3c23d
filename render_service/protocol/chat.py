"""``ChatCompletionRequest``: the body of ``/v1/chat/completions/render`` (OpenAI + vLLM extras)."""

from __future__ import annotations

from typing import Any


from .common import SamplingRequestFields


class ChatCompletionRequest(SamplingRequestFields):
    """An OpenAI chat request. ``messages`` and ``tools`` stay plain JSON values here; their
    validation and normalisation live in :mod:`render_service.render.messages`."""

    messages: list[Any]
    tools: list[Any] | None = None
    tool_choice: Any = None  # checked by the render (vLLM 0.33 checks it before field validation)
    parallel_tool_calls: bool | None = True
    max_completion_tokens: int | None = None
    logprobs: bool | None = False
    top_logprobs: int | None = None
    reasoning_effort: str | None = None
    include_reasoning: bool = True
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    add_special_tokens: bool = False
    echo: bool = False
    documents: list[dict[str, Any]] | None = None
    chat_template: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None
