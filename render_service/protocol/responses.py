"""OpenAI Responses wire models: the body of ``/v1/responses/render`` (OpenAI field names, vLLM
0.33 ``entrypoints/openai/responses/protocol.py`` extras) and the ``responses_request`` of
``/v1/responses/derender``.

Input items stay plain JSON objects (``message``, ``function_call``, ``function_call_output``,
``reasoning``); their shape is checked by the converter. Unknown fields are accepted.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .common import OpenAIBaseModel
from .derender import GenerateTokensResponse, WireModel, _DerenderStreamRequest


class Reasoning(OpenAIBaseModel):
    """``reasoning``: ``effort``, one of vLLM 0.33's (the OpenAI SDK's) values."""

    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None
    summary: str | None = None


class _SdkModel(BaseModel):
    """A member of an OpenAI SDK union: unknown fields kept, and no model validator (an
    ``OpenAIBaseModel``'s would name the member ``function-after[...]`` in error locations, where
    vLLM 0.33's, the SDK's own models, show the class name)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ResponseFormatText(_SdkModel):
    """``text.format`` ``{"type": "text"}`` (the OpenAI SDK's ``ResponseFormatText``)."""

    type: Literal["text"]


class ResponseFormatTextJSONSchemaConfig(_SdkModel):
    """``text.format`` ``json_schema``: ``name`` and ``schema`` required, as in the OpenAI SDK's
    type of that name, which vLLM 0.33 validates with (a format without them is its 400)."""

    name: str
    schema_: dict[str, Any] = Field(alias="schema")
    type: Literal["json_schema"]
    description: str | None = None
    strict: bool | None = None


class ResponseFormatJSONObject(_SdkModel):
    """``text.format`` ``{"type": "json_object"}`` (the OpenAI SDK's ``ResponseFormatJSONObject``)."""

    type: Literal["json_object"]


#: ``text.format``: the OpenAI SDK's union in its order, so a bad format lists every member's
#: errors under the member's name, as vLLM 0.33's 400 does.
TextFormat = ResponseFormatText | ResponseFormatTextJSONSchemaConfig | ResponseFormatJSONObject


class TextConfig(OpenAIBaseModel):
    format: TextFormat | None = None


class ResponsesRequest(OpenAIBaseModel):
    """``POST /v1/responses`` body, as far as the stateless render reads it."""

    model: str | None = None
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    include: list[str] | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    metadata: dict[str, Any] | None = None
    parallel_tool_calls: bool | None = True
    previous_response_id: str | None = None
    reasoning: Reasoning | None = None
    include_reasoning: bool = True
    stream: bool | None = False
    temperature: float | None = None
    text: TextConfig | None = None
    tool_choice: str | dict[str, Any] = "auto"
    tools: list[dict[str, Any]] = Field(default_factory=list)
    top_logprobs: int | None = 0
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    truncation: Literal["auto", "disabled"] | None = "disabled"
    skip_special_tokens: bool | None = None
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    logit_bias: dict[str, float] | None = None
    structured_outputs: dict[str, Any] | None = None
    request_id: str | None = None
    priority: int = 0
    cache_salt: str | None = Field(default=None, min_length=1, max_length=1024)
    vllm_xargs: dict[str, Any] | None = None
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: dict[str, Any] | None = None
    chat_template_kwargs: dict[str, Any] | None = None


# --- /v1/responses/derender --------------------------------------------------------------------


class DerenderResponsesRequest(WireModel):
    """``POST /v1/responses/derender`` with ``stream`` false: the engine's whole output and the
    original Responses request (required when a parser is configured)."""

    stream: Literal[False] = False
    model: str | None = None
    generate_response: GenerateTokensResponse
    prompt_tokens: int | None = Field(default=None, ge=0)
    prompt_token_ids: list[int] | None = None
    responses_request: ResponsesRequest | None = None


class DerenderResponsesStreamRequest(_DerenderStreamRequest):
    """``POST /v1/responses/derender`` with ``stream`` true: one engine chunk per call;
    ``responses_request`` and ``prompt_token_ids`` are read on the first call only."""

    responses_request: ResponsesRequest | None = None
