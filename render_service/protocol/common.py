"""Base wire model and shared request fields (OpenAI / vLLM 0.33 names)."""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, model_validator

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


class JsonSchemaResponseFormat(OpenAIBaseModel):
    """``response_format.json_schema`` (vLLM 0.33 ``JsonSchemaResponseFormat``: ``name`` required,
    ``schema`` an object or absent)."""

    name: str
    description: str | None = None
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(OpenAIBaseModel):
    """``response_format`` of type ``text`` / ``json_object`` / ``json_schema`` (vLLM 0.33
    ``ResponseFormat``). ``structural_tag`` formats are checked by the render
    (:func:`render_service.render.sampling.structured_outputs`), as vLLM checks them before
    field validation."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaResponseFormat | None = None


class StructuralTagResponseFormat(OpenAIBaseModel):
    """``response_format`` ``{"type": "structural_tag", "format": ...}`` (vLLM 0.33), a member of
    its union here only for the errors a wrong ``response_format`` gets."""

    type: Literal["structural_tag"]
    format: Any


class LegacyStructuralTagResponseFormat(OpenAIBaseModel):
    """``response_format`` ``{"type": "structural_tag", "structures", "triggers"}`` (vLLM 0.33's
    legacy shape), for the errors as :class:`StructuralTagResponseFormat`."""

    type: Literal["structural_tag"]
    structures: list[Any]
    triggers: list[str]


#: vLLM 0.33's ``AnyResponseFormat`` union, in its order.
_RESPONSE_FORMAT: TypeAdapter[Any] = TypeAdapter(
    ResponseFormat | StructuralTagResponseFormat | LegacyStructuralTagResponseFormat)


def check_response_format(value: Any) -> dict[str, Any] | None:
    """Validate a ``response_format`` against vLLM 0.33's union of shapes, returning it unchanged
    (the render reads the plain dict). A ``structural_tag`` one is left to the render.

    Raises:
        pydantic.ValidationError: no object, wrong ``type``, ``json_schema`` not an object, no
            ``name``, ``schema`` not an object: every union member's errors, as vLLM answers
            (its FastAPI body reads objects ``from_attributes``).
    """
    if isinstance(value, dict) and value.get("type") in ("text", "json_object") \
            and value.get("json_schema") is None:
        return value  # what the union's first member certainly accepts (extra keys allowed)
    if value is not None and not (isinstance(value, dict) and value.get("type") == "structural_tag"):
        _RESPONSE_FORMAT.validate_python(value, from_attributes=True)
    return value


#: A ``response_format`` field: the plain dict, checked by :func:`check_response_format`.
ResponseFormatField = Annotated[Any, AfterValidator(check_response_format)]


class SamplingRequestFields(OpenAIBaseModel):
    """Sampling fields shared by chat and completions requests (OpenAI + vLLM extras). Ranges
    are checked by :func:`render_service.render.request.verify_sampling` (vLLM 0.33 checks them
    in ``SamplingParams``, with its own wording), not here."""

    model: str | None = None
    request_id: str | None = None
    n: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    min_tokens: int = 0
    max_tokens: int | None = None
    prompt_logprobs: int | None = None
    logprob_token_ids: list[int] | None = None
    logit_bias: dict[str, float] | None = None
    allowed_token_ids: list[int] | None = None
    bad_words: list[str] | None = None
    skip_special_tokens: bool | None = None
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    structured_outputs: dict[str, Any] | None = None
    response_format: ResponseFormatField = None
    vllm_xargs: dict[str, Any] | None = None
    thinking_token_budget: int | None = None
    stream_interval: int | None = None
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
    # typed as vLLM 0.33 types them (a wrong type is its 400), otherwise unused here
    user: str | None = None
    length_penalty: float | None = None
    return_tokens_as_token_ids: bool | None = None


#: The constraint fields of vLLM 0.33's ``StructuredOutputsParams`` (exactly one must be set).
CONSTRAINTS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")


def asks_structured_output(response_format: Any, structured_outputs: Any) -> bool:
    """Whether a request constrains its output's shape: ``response_format`` of type
    ``json_object``/``json_schema``/``structural_tag`` (OpenAI), or a vLLM ``structured_outputs``
    with any constraint set (``json``, ``regex``, ``choice``, ``grammar``, ``json_object``,
    ``structural_tag``). Feeds ``parsers.types.ParseContext.structured_output``."""
    if isinstance(response_format, dict) and response_format.get("type") not in (None, "text"):
        return True
    return isinstance(structured_outputs, dict) and any(structured_outputs.get(k) for k in CONSTRAINTS)
