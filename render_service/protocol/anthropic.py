"""Anthropic Messages wire models: the body of ``/v1/messages/render`` (field names as Anthropic's
API and vLLM 0.33 ``entrypoints/anthropic/protocol.py``), and the ``messages_request`` of
``/v1/messages/derender``.

Unknown fields are accepted and ignored (as vLLM's request model). Content blocks keep every
field optional except ``type``; what a block type needs is checked by the converter.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from .common import OpenAIBaseModel
from .derender import GenerateTokensResponse, WireModel, _DerenderStreamRequest

BlockType = Literal[
    "text",
    "image",
    "tool_use",
    "tool_result",
    "tool_reference",
    "thinking",
    "redacted_thinking",
    "tool_addition",
    "tool_removal",
]


class AnthropicContentBlock(OpenAIBaseModel):
    """One content block (``text``, ``image``, ``tool_use``, ``tool_result``, ``thinking``,
    ``redacted_thinking`` ...)."""

    type: BlockType
    text: str | None = None
    source: dict[str, Any] | None = None
    id: str | None = None
    tool_use_id: str | None = None
    name: str | None = None
    input: dict[str, Any] | None = None
    content: str | list[dict[str, Any]] | None = None
    is_error: bool | None = None
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None


class AnthropicMessage(OpenAIBaseModel):
    """A message: ``role`` user/assistant (vLLM also accepts inline ``system``)."""

    role: Literal["user", "assistant", "system"]
    content: str | list[AnthropicContentBlock]


class AnthropicTool(OpenAIBaseModel):
    """A client tool: ``input_schema`` is the JSON schema of its input (``type`` defaults to
    ``object``, as vLLM)."""

    name: str
    description: str | None = None
    input_schema: dict[str, Any]
    strict: bool | None = None

    @field_validator("input_schema")
    @classmethod
    def _default_type(cls, v: dict[str, Any]) -> dict[str, Any]:
        return v if "type" in v else {**v, "type": "object"}


class AnthropicToolChoice(OpenAIBaseModel):
    """``tool_choice``: auto / any / tool (with ``name``) / none."""

    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None

    @model_validator(mode="after")
    def _name_for_tool(self) -> AnthropicToolChoice:
        if self.type == "tool" and not self.name:
            raise ValueError("tool_choice.name is required when type is 'tool'")
        return self


class ThinkingEnabled(OpenAIBaseModel):
    type: Literal["enabled"]
    budget_tokens: int = Field(ge=1024)
    display: str | None = None


class ThinkingDisabled(OpenAIBaseModel):
    type: Literal["disabled"]


class ThinkingAdaptive(OpenAIBaseModel):
    type: Literal["adaptive"]
    display: str | None = None


ThinkingConfig = Annotated[ThinkingEnabled | ThinkingDisabled | ThinkingAdaptive, Field(discriminator="type")]


class AnthropicOutputFormat(OpenAIBaseModel):
    type: Literal["json_schema"] = "json_schema"
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")


class AnthropicOutputConfig(OpenAIBaseModel):
    """``output_config``: structured output format and effort (vLLM maps them to
    ``response_format`` / ``reasoning_effort``)."""

    format: AnthropicOutputFormat | None = None
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None


class AnthropicMessagesRequest(OpenAIBaseModel):
    """``POST /v1/messages`` body (plus vLLM's extras)."""

    model: str = Field(min_length=1)
    messages: list[AnthropicMessage]
    max_tokens: int
    metadata: dict[str, Any] | None = None
    output_config: AnthropicOutputConfig | None = None
    thinking: ThinkingConfig | None = None
    stop_sequences: list[str] | None = None
    stream: bool | None = False
    system: str | list[AnthropicContentBlock] | None = None
    temperature: float | None = None
    tool_choice: AnthropicToolChoice | None = None
    tools: list[AnthropicTool] | None = None
    top_k: int | None = None
    top_p: float | None = None
    request_id: str | None = None
    cache_salt: str | None = Field(default=None, min_length=1, max_length=1024)
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: dict[str, Any] | None = None
    vllm_xargs: dict[str, Any] | None = None
    chat_template_kwargs: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _budget_below_max(self) -> AnthropicMessagesRequest:
        """vLLM 0.33: ``budget_tokens`` must be below ``max_tokens`` (except on a P/D prefill leg)."""
        if self.kv_transfer_params and self.kv_transfer_params.get("do_remote_decode"):
            return self
        if isinstance(self.thinking, ThinkingEnabled) and self.thinking.budget_tokens >= self.max_tokens:
            raise ValueError("thinking.budget_tokens must be less than max_tokens")
        return self


# --- /v1/messages/derender ---------------------------------------------------------------------


class DerenderMessagesRequest(WireModel):
    """``POST /v1/messages/derender`` with ``stream`` false: the engine's whole output and the
    original Anthropic request (required when a parser is configured)."""

    stream: Literal[False] = False
    model: str | None = None
    generate_response: GenerateTokensResponse
    prompt_tokens: int | None = Field(default=None, ge=0)
    prompt_token_ids: list[int] | None = None
    messages_request: AnthropicMessagesRequest | None = None


class DerenderMessagesStreamRequest(_DerenderStreamRequest):
    """``POST /v1/messages/derender`` with ``stream`` true: one engine chunk per call;
    ``messages_request`` and ``prompt_token_ids`` are read on the first call only."""

    messages_request: AnthropicMessagesRequest | None = None


# --- errors ------------------------------------------------------------------------------------

#: HTTP status → Anthropic ``error.type`` (Anthropic's error docs; vLLM 0.33
#: ``_ANTHROPIC_ERROR_TYPE_BY_STATUS``, plus 402 and 504, which the ``anthropic`` SDK knows).
ERROR_TYPE_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",  # vLLM reports overload (a full queue) as 503
    504: "timeout_error",
    529: "overloaded_error",
}


def error_type(status: int) -> str:
    """Anthropic's ``error.type`` for an HTTP status: the table above, else ``api_error`` for
    5xx and ``invalid_request_error`` for any other status (vLLM 0.33 ``translate_error_type``)."""
    return ERROR_TYPE_BY_STATUS.get(status) or ("api_error" if status >= 500 else "invalid_request_error")
