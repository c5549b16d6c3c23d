"""Wire models of the derender endpoints and of the engine's tokens-mode generate output.

Field names follow vLLM 0.33 (``token_in_token_out/protocol.py``, ``scale_out/derender``).
Requests ignore unknown fields (OpenAI compatibility, as vLLM's ``OpenAIBaseModel``); the
decoded :class:`StreamState` forbids them and is validated strictly.
Only the fields derender reads are modelled on the embedded OpenAI requests.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, TypeAdapter, field_validator, model_validator

from .common import ResponseFormatField


class WireModel(BaseModel):
    """Request-side base: unknown keys are accepted and ignored."""

    model_config = ConfigDict(extra="ignore")


# --- engine output: /inference/v1/generate, output_mode "tokens" -------------------------------


class GenerateLogProb(WireModel):
    """One candidate: ``{"token_id", "logprob", "rank"}`` (``rank`` null when NaN)."""

    token_id: NonNegativeInt
    logprob: float = -9999.0
    rank: int | None = None


class GenerateLogProbsContent(GenerateLogProb):
    """One position: the sampled token and its candidates in engine order (sampled first)."""

    top_logprobs: list[GenerateLogProb] = Field(default_factory=list)


class GenerateLogProbs(WireModel):
    """``GenerateLogProbs`` (integer ids, no strings; vLLM #58181)."""

    content: list[GenerateLogProbsContent] | None = None


class GenerateChoice(WireModel):
    """A choice of a (batch) generate response; ``finish_reason`` defaults to ``"stop"``;
    ``index`` is required (vLLM 0.33 ``GenerateChoiceBase``: a choice without it is a 400)."""

    index: NonNegativeInt
    finish_reason: str | None = "stop"
    stop_reason: int | str | None = None
    token_ids: list[int] | None = None
    logprobs: GenerateLogProbs | None = None

    @field_validator("token_ids")
    @classmethod
    def _non_negative(cls, ids: list[int] | None) -> list[int] | None:
        """vLLM 0.33's check and wording (one ``value_error`` for the list, not one per id)."""
        if ids is not None and any(t < 0 for t in ids):
            raise ValueError("token_ids must not contain negative values")
        return ids


class GenerateStreamChoice(GenerateChoice):
    """A choice of one streamed generate event; ``finish_reason`` null until the last."""

    finish_reason: str | None = None


class Usage(WireModel):
    """OpenAI usage block."""

    prompt_tokens: int = 0
    completion_tokens: int | None = 0
    total_tokens: int = 0
    prompt_tokens_details: Any = None
    completion_tokens_details: Any = None


class SpeculativeDecodingMetrics(BaseModel):
    """vLLM 0.33 ``SpeculativeDecodingMetrics`` (experimental; every field required)."""

    model_config = ConfigDict(extra="allow")

    mean_acceptance_length: float
    draft_acceptance_rate: float
    acceptance_histogram: list[int]
    num_spec_steps: int
    num_accepted_draft_tokens: int
    num_draft_tokens: int


class PerRequestMetrics(BaseModel):
    """vLLM 0.33 ``PerRequestMetrics`` of a generate response: the timing fields (null when
    absent) plus any other key the engine sent (kept, as vLLM's ``extra="allow"`` does); echoed
    whole in the derendered ``metrics``."""

    model_config = ConfigDict(extra="allow")

    time_to_first_token_ms: float | None = None
    generation_time_ms: float | None = None
    queue_time_ms: float | None = None
    mean_itl_ms: float | None = None
    tokens_per_second: float | None = None
    speculative_decoding: SpeculativeDecodingMetrics | None = None


class GenerateTokensResponse(WireModel):
    """Non-streaming generate response (``output_mode`` must be ``"tokens"``: re-decoding a
    ``text``/``derender`` response would undo the engine's stop-string cut)."""

    request_id: str = ""
    model: str | None = None
    created: int | None = None
    usage: Usage | None = None
    prompt_logprobs: Any = None
    prompt_token_ids: list[NonNegativeInt] | None = None
    kv_transfer_params: dict[str, Any] | None = None
    metrics: PerRequestMetrics | None = None
    output_mode: Literal["tokens"] = "tokens"
    choices: list[GenerateChoice]


class GenerateTokensStreamResponse(WireModel):
    """One parsed SSE ``data:`` object of a streaming generate (at most one choice; a
    usage-only event has ``choices: []``)."""

    request_id: str = ""
    usage: Usage | None = None
    output_mode: Literal["tokens"] = "tokens"
    choices: list[GenerateStreamChoice] = Field(default_factory=list)
    prompt_token_ids: list[NonNegativeInt] | None = None
    metrics: PerRequestMetrics | None = None
    kv_transfer_params: dict[str, Any] | None = None


# --- the OpenAI requests, as far as derender reads them ------------------------------------


class OutputOptions(WireModel):
    """Fields shared by chat and completion requests that change derendered output."""

    model: str | None = None
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    stop: str | list[str] | None = None
    include_stop_str_in_output: bool = False
    min_tokens: NonNegativeInt = 0
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    logprob_token_ids: list[int] | None = None
    return_token_ids: bool | None = None


class ChatRequestFields(OutputOptions):
    """``ChatCompletionRequest`` fields derender reads (``messages`` only counts history tool
    calls for Kimi-style ids)."""

    messages: list[Any] = Field(default_factory=list)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = True
    include_reasoning: bool = True
    chat_template_kwargs: dict[str, Any] | None = None
    reasoning_effort: str | None = None
    logprobs: bool | None = False
    top_logprobs: int | None = None
    response_format: ResponseFormatField = None  # checked as vLLM checks the whole chat request
    structured_outputs: dict[str, Any] | None = None


class CompletionRequestFields(OutputOptions):
    """``CompletionRequest`` fields derender reads."""

    logprobs: int | None = None


# --- derender requests ------------------------------------------------------------------------


class DerenderChatRequest(WireModel):
    """``POST /v1/chat/completions/derender`` with ``stream`` false (upstream §6.1)."""

    stream: Literal[False] = False
    model: str | None = None
    generate_response: GenerateTokensResponse
    prompt_tokens: NonNegativeInt | None = None
    prompt_token_ids: list[NonNegativeInt] | None = None
    chat_request: ChatRequestFields | None = None


class _DerenderStreamRequest(WireModel):
    """Fields shared by the chat and completions streaming derender bodies: one generate chunk
    per call; ``stream_state`` is null on the first call, then the previous response's opaque
    string; ``prompt_token_ids`` is read on the first call only."""

    stream: Literal[True]
    model: str | None = None
    generate_chunk: GenerateTokensStreamResponse
    stream_state: str | None = None
    prompt_tokens: NonNegativeInt | None = None
    prompt_token_ids: list[NonNegativeInt] | None = None


class DerenderChatStreamRequest(_DerenderStreamRequest):
    """``POST /v1/chat/completions/derender`` with ``stream`` true (upstream §6.2).

    ``chat_request`` and ``prompt_token_ids`` are read on the first call only (later calls may
    omit them; the state carries what later chunks need).
    """

    chat_request: ChatRequestFields | None = None


class DerenderCompletionRequest(WireModel):
    """``POST /v1/completions/derender`` with ``stream`` false (upstream §6.3)."""

    stream: Literal[False] = False
    model: str | None = None
    generate_responses: list[GenerateTokensResponse] = Field(min_length=1)
    prompt_tokens: list[NonNegativeInt] | None = None
    prompt_token_ids: list[list[NonNegativeInt] | None] | None = None
    completion_request: CompletionRequestFields | None = None

    @model_validator(mode="after")
    def _prompt_tokens_length(self) -> DerenderCompletionRequest:
        """vLLM 0.33 ``DerenderCompletionRequest._validate_prompt_tokens_length`` (its wording)."""
        if self.prompt_tokens is not None and len(self.prompt_tokens) != len(self.generate_responses):
            raise ValueError(f"prompt_tokens length ({len(self.prompt_tokens)}) must equal "
                             f"generate_responses length ({len(self.generate_responses)})")
        return self


class DerenderCompletionStreamRequest(_DerenderStreamRequest):
    """``POST /v1/completions/derender`` with ``stream`` true (upstream §6.4)."""

    completion_request: CompletionRequestFields | None = None


# --- the carried stream state -----------------------------------------------------------------


class StreamState(BaseModel):
    """Decoded ``stream_state`` (strict; unknown keys rejected). Keys are short because the
    state travels with every chunk; defaults are left out of the encoding.

    Size: constant in the output length, except ``parser`` while a tool call is open (it holds
    the call's unsent arguments) and a Responses stream's ``items`` (the output text so far).
    Per-chunk cost of using it: O(new tokens), plus O(output) for a Responses state.

    Attributes:
        cfg: configuration fingerprint prefix (:func:`render_service.fingerprint.config_fingerprint`).
        rid: request id the chunk ids and tool-call ids derive from.
        ci: the choice index this state is for (set by its first chunk with a choice).
        model: echoed model name. created: echoed ``created`` (seconds).
        role: ``role: "assistant"`` already sent. done: the output ended (finish or stop string);
            later chunks produce no choices.
        pend: held bytes ending inside a character (≤ 16). win/pre/rd: window detokenizer ids and
            offsets (only for tokenizers that are not byte-level BPE).
        held: text held back because it may start a stop string.
        stops, incl: the request's ``stop`` and ``include_stop_str_in_output``.
        min_tok: ``min_tokens``; ntok: output tokens seen so far, capped at ``min_tok``.
        stop_ids, ignore_eos: the request's ``stop_token_ids`` / ``ignore_eos`` (stop-token drop).
        skip: ``skip_special_tokens`` (only used without a parser).
        lp_k: logprob candidate cut (-1 keeps all); lp_ctx: last sampled ids (≤ 4);
            off: completions ``text_offset`` so far.
        hide: hide logprobs and token ids (parser + ``include_reasoning: false``).
        ret_ids: ``return_token_ids``. named: ``tool_choice`` names a function.
        ptoks: ``prompt_tokens`` given on the first call.
        tools: a tool-call delta was sent. calls: number of tool calls started.
        parser: the parser library's state dict (``None`` without a parser).
        blk: Messages/Responses: kind of the open content block / output item (``thinking``,
            ``text``, ``tool``; empty when none is open). nblk: blocks / items started so far
            (the open one is ``nblk - 1``). nout: output tokens so far. seq: Responses' next
            ``sequence_number``. items: Responses only: per output item so far ``[blk, text]``,
            or ``[blk, arguments, name, call_id]`` for a call (the done events and the terminal
            ``response.output`` repeat the whole output, so this part grows with the output;
            empty, and left out of the encoding, for chat, completions and Messages).
        rtok, rhdr: Responses only: the reasoning-token counter (a few ints) and, for harmony,
            the ids of the open message header (≤ 64) (:mod:`render_service.derender.reasoning_tokens`).
        api: the route family that made the state (``""`` chat, ``"c"`` completions, ``"m"``
            Messages, ``"r"`` Responses): a state is refused on another family's route.
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    cfg: str
    rid: str = ""
    ci: int | None = None
    model: str = ""
    created: int = 0
    role: bool = False
    done: bool = False
    pend: list[int] = Field(default_factory=list, max_length=16)
    win: list[int] = Field(default_factory=list, max_length=16)
    pre: int = 0
    rd: int = 0
    held: str = ""
    stops: list[str] = Field(default_factory=list)
    incl: bool = False
    min_tok: int = 0
    ntok: int = 0
    stop_ids: list[int] = Field(default_factory=list)
    ignore_eos: bool = False
    skip: bool = True
    lp_k: int = -1
    lp_ctx: list[int] = Field(default_factory=list, max_length=4)
    off: int = 0
    hide: bool = False
    ret_ids: bool = False
    named: bool = False
    ptoks: int | None = None
    tools: bool = False
    calls: int = 0
    parser: dict[str, Any] | None = None
    # Anthropic Messages / OpenAI Responses streams (derender/anthropic.py, derender/responses.py):
    blk: str = ""
    nblk: int = 0
    nout: int = 0
    seq: int = 0
    items: list[list[str]] = Field(default_factory=list)
    rtok: list[int] = Field(default_factory=list, max_length=3)
    rhdr: list[int] = Field(default_factory=list, max_length=64)
    api: str = ""


#: The body of each derender route as vLLM 0.33 types it, batch | stream: a body that fails the
#: member it asks for (``stream``) is answered with every member's errors, as vLLM's union answers.
DERENDER_CHAT_BODY: TypeAdapter[Any] = TypeAdapter(DerenderChatRequest | DerenderChatStreamRequest)
DERENDER_COMPLETION_BODY: TypeAdapter[Any] = TypeAdapter(DerenderCompletionRequest | DerenderCompletionStreamRequest)
