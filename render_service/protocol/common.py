"""Base wire model and shared request fields (OpenAI / vLLM 0.33 names)."""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

logger = logging.getLogger(__name__)


class OpenAIBaseModel(BaseModel):
    """Requests accept unknown fields (logged at debug level), as vLLM's ``OpenAIBaseModel``."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    @model_validator(mode="after")
    def _log_extra(self) -> OpenAIBaseModel:
        if self.model_extra:
            logger.debug("ignored request fields: %s", sorted(self.model_extra))
        return self


class StreamOptions(OpenAIBaseModel):
    """``stream_options``: usage reporting switches."""

    include_usage: bool = False
    continuous_usage_stats: bool = False


class SamplingRequestFields(OpenAIBaseModel):
    """Sampling fields shared by chat and completions requests (OpenAI + vLLM extras)."""

    model: str | None = None
    request_id: str | None = None
    n: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = None
    min_p: float | None = Field(default=None, ge=0, le=1)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    repetition_penalty: float | None = Field(default=None, gt=0)
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    min_tokens: int = Field(default=0, ge=0)
    max_tokens: int | None = Field(default=None, ge=1)
    prompt_logprobs: int | None = None
    logit_bias: dict[str, float] | None = None
    allowed_token_ids: list[int] | None = None
    bad_words: list[str] | None = None
    skip_special_tokens: bool | None = None
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    structured_outputs: dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    vllm_xargs: dict[str, Any] | None = None
    thinking_token_budget: int | None = None
    stream_interval: int | None = Field(default=None, ge=1)
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    use_beam_search: bool = False
    return_token_ids: bool | None = None
    cache_salt: str | None = Field(default=None, min_length=1, max_length=1024)
    priority: int = 0
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: dict[str, Any] | None = None
    truncate_prompt_tokens: int | None = Field(default=None, ge=-1)
    truncation_side: Literal["left", "right"] | None = None


def asks_structured_output(response_format: Any, structured_outputs: Any) -> bool:
    """Whether a request constrains its output's shape: ``response_format`` of type
    ``json_object``/``json_schema``/``structural_tag`` (OpenAI), or a vLLM ``structured_outputs``
    with any constraint set (``json``, ``regex``, ``choice``, ``grammar``, ``json_object``,
    ``structural_tag``). Feeds ``parsers.types.ParseContext.structured_output``."""
    if isinstance(response_format, dict) and response_format.get("type") not in (None, "text"):
        return True
    keys = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")
    return isinstance(structured_outputs, dict) and any(structured_outputs.get(k) for k in keys)
