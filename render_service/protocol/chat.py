"""``ChatCompletionRequest``: the body of ``/v1/chat/completions/render`` (OpenAI + vLLM extras)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from collections.abc import Iterable

from pydantic import AfterValidator, TypeAdapter
from typing_extensions import Required, TypedDict

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
    if tools is not None and not _plainly_valid(tools):
        _TOOLS.validate_python(tools)
    return tools


_OPTIONAL_FIELDS = (("description", str), ("parameters", dict), ("strict", bool), ("defer_loading", bool))


def _plainly_valid(tools: list[Any]) -> bool:
    """Whether ``tools`` is a list of tools that :data:`_TOOLS` certainly accepts (exact types
    only: anything else, also what pydantic's lax mode would accept, goes to pydantic), so the
    common request skips the ~3 µs per tool its validation costs."""
    if not isinstance(tools, list):
        return False
    for tool in tools:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or tool.get("type", "function") != "function" or \
                not isinstance(fn.get("name"), str) or tool.get("defer_loading") is not None:
            return False
        for key, kind in _OPTIONAL_FIELDS:
            value = fn.get(key)
            if value is not None and type(value) is not kind:
                return False
    return True


# --- history tool calls: the OpenAI SDK's ``TypedDict`` param types vLLM 0.33 validates them with
# (names and field order matter: a wrong call's errors name the members and list them in order)


class Function(TypedDict, total=False):
    """A function tool call's ``function``."""

    arguments: Required[str]
    name: Required[str]


class ChatCompletionMessageFunctionToolCallParam(TypedDict, total=False):
    """A function tool call in an assistant message."""

    id: Required[str]
    function: Required[Function]
    type: Required[Literal["function"]]


class Custom(TypedDict, total=False):
    """A custom tool call's ``custom``."""

    input: Required[str]
    name: Required[str]


class ChatCompletionMessageCustomToolCallParam(TypedDict, total=False):
    """A custom tool call in an assistant message."""

    id: Required[str]
    custom: Required[Custom]
    type: Required[Literal["custom"]]


_TOOL_CALLS: TypeAdapter[Any] = TypeAdapter(
    Iterable[ChatCompletionMessageFunctionToolCallParam | ChatCompletionMessageCustomToolCallParam])


def check_tool_calls(calls: Any) -> None:
    """Validate an assistant message's ``tool_calls`` as vLLM 0.33 does (an iterable of the SDK's
    function | custom call types: a string iterates its characters), skipping plainly valid
    function calls.

    Raises:
        pydantic.ValidationError: vLLM's errors, ``loc`` from the call's index
            (``0.ChatCompletionMessageFunctionToolCallParam.type``).
    """
    if isinstance(calls, list) and all(
        isinstance(c, dict) and isinstance(c.get("id"), str) and c.get("type") == "function"
        and isinstance(c.get("function"), dict) and isinstance(c["function"].get("name"), str)
        and isinstance(c["function"].get("arguments"), str) for c in calls):
        return
    list(_TOOL_CALLS.validate_python(calls))


def history_tool_calls(messages: list[Any]) -> int:
    """The number of tool calls in a chat's assistant messages, each message's ``tool_calls``
    validated first (:func:`check_tool_calls`), as vLLM 0.33 reads them while it validates the
    request (render, and derender's ``history_tool_call_cnt``).

    Raises:
        pydantic.ValidationError: a ``tool_calls`` of a wrong shape (``true``, a number, a string).
    """
    count = 0
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "assistant" and message.get("tool_calls"):
            check_tool_calls(message["tool_calls"])
            count += len(message["tool_calls"])
    return count


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
