"""``ChatCompletionRequest``: the body of ``/v1/chat/completions/render`` (OpenAI + vLLM extras)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, TypeAdapter

from .common import OpenAIBaseModel, SamplingRequestFields


class FunctionDefinition(OpenAIBaseModel):
    """A tool's ``function`` as vLLM 0.33 types it (``name`` required)."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    defer_loading: bool | None = None


class ChatCompletionToolsParam(OpenAIBaseModel):
    """One entry of a chat request's ``tools`` as vLLM 0.33 types it."""

    type: Literal["function"] = "function"
    function: FunctionDefinition
    defer_loading: bool | None = None


_TOOLS = TypeAdapter(list[ChatCompletionToolsParam])


def check_tools(tools: list[Any] | None) -> list[Any] | None:
    """Validate ``tools`` against vLLM 0.33's shape, returning the list unchanged (the render
    reads the plain dicts, key order kept for the templates).

    Raises:
        pydantic.ValidationError: vLLM's field errors (``tools.0.function.name`` missing, ...).
    """
    if tools is not None:
        _TOOLS.validate_python(tools)
    return tools


class ChatCompletionRequest(SamplingRequestFields):
    """An OpenAI chat request. ``messages`` and ``tools`` stay plain JSON values here; their
    validation and normalisation live in :mod:`render_service.render.messages`."""

    messages: list[Any]
    tools: Annotated[list[Any] | None, AfterValidator(check_tools)] = None
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
