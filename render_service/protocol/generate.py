"""``GenerateRequest``: the output of render, input of ``/inference/v1/generate`` (vLLM 0.33)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from .common import StreamOptions


class ParseContextModel(BaseModel):
    """``parse_context``: what derender needs to parse this request's output."""

    model_config = ConfigDict(extra="allow")

    tools: list[Any] | None = None
    tool_choice: str | dict[str, Any] = "none"
    parallel_tool_calls: bool = True
    include_reasoning: bool = True
    chat_template_kwargs: dict[str, Any] = {}
    history_tool_call_cnt: int = 0


class ReasoningParserKwargs(BaseModel):
    """``reasoning_parser_kwargs`` (``extra="forbid"`` upstream)."""

    model_config = ConfigDict(extra="forbid")

    chat_template_kwargs: dict[str, Any] = {}


class GenerateRequest(BaseModel):
    """Every upstream key is emitted (``model_dump()``), ``null`` where unset."""

    model_config = ConfigDict(extra="ignore")

    request_id: str
    token_ids: list[int]
    token_offsets: list[tuple[int, int]] | None = None
    features: dict[str, Any] | None = None
    content_parts: list[dict[str, Any]] | None = None
    sampling_params: dict[str, Any]
    model: str | None = None
    reasoning_ended: bool | None = None
    reasoning_parser_kwargs: ReasoningParserKwargs | None = None
    return_token_ids: bool | None = None
    output_mode: Literal["tokens", "text", "derender"] = "tokens"
    parse_context: ParseContextModel | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    cache_salt: str | None = None
    priority: int = 0
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: dict[str, Any] | None = None
