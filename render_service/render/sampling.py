"""OpenAI / vLLM request sampling fields → the ``sampling_params`` JSON of a ``GenerateRequest``.

Mirrors vLLM 0.33 ``ChatCompletionRequest.to_sampling_params`` / ``CompletionRequest.to_sampling_params``
and ``get_max_tokens``, with three deliberate differences:

* ``max_tokens`` is always emitted (upstream drops it when it equals 16 and the engine then
  generates up to the context limit; upstream-render-api.md §10 obs. 2).
* an explicit ``max_tokens`` / ``max_completion_tokens`` that does not fit beside the prompt is a
  400 naming both numbers (vLLM #33418 / BR61) instead of being silently cut.
* ``stop`` strings are left out (``"stop": []``) unless ``Settings.keep_stop_strings`` (tokens-only
  engines reject them; derender enforces them).

Normalised as vLLM's ``SamplingParams`` (recorded in ``tests/goldens/render_*.json``): ``seed: -1``
dropped, ``stop_token_ids`` / ``bad_words`` de-duplicated in order, greedy (``temperature`` 0)
omits ``top_p``/``top_k``/``min_p``, ``prompt_logprobs`` kept when 0 and then
``skip_reading_prefix_cache: true``.

Serialisation follows the upstream capture (§10 obs. 1): float fields always, int/bool fields only
when they differ from the ``SamplingParams`` struct default, ``max_tokens`` always.
"""

from __future__ import annotations

from typing import Any

from ..errors import ContextLengthExceeded, InvalidRequest, vllm_error
from ..models import ModelBundle
from ..protocol.common import CONSTRAINTS, SamplingRequestFields
from ..settings import Settings
from .adjust import empty_structured_outputs

#: Request field → OpenAI default when neither the request nor generation_config sets it.
FLOAT_DEFAULTS = {
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "repetition_penalty": 1.0,
    "temperature": 1.0,
    "top_p": 1.0,
    "min_p": 0.0,
}

#: vLLM ``_SAMPLING_EPS``: a temperature below this is greedy sampling.
GREEDY_EPSILON = 1e-5

OUTPUT_KIND_DELTA = 1
OUTPUT_KIND_FINAL_ONLY = 2


def check_prompt_length(prompt_len: int, max_model_len: int) -> None:
    """Raise :class:`ContextLengthExceeded` (upstream message) when the prompt leaves no room."""
    if prompt_len >= max_model_len:
        raise ContextLengthExceeded(
            f"Input length ({prompt_len}) exceeds model's maximum context length ({max_model_len}).",
            param="messages",
        )


def resolve_max_tokens(
    requested: int | None, prompt_len: int, bundle: ModelBundle, *, clamp: bool = False
) -> int:
    """``max_tokens`` for the engine: the request's value, else generation_config ``max_new_tokens``,
    each bounded by ``max_model_len - prompt_len``. ``clamp`` cuts a requested value that does not
    fit instead of refusing it (for a value the client did not send, e.g. completions' default 16).

    Raises:
        ContextLengthExceeded: the prompt alone fills the context, or an explicit request value
            does not fit beside it (message names context, prompt and completion sizes).
    """
    check_prompt_length(prompt_len, bundle.max_model_len)
    room = bundle.max_model_len - prompt_len
    if requested is not None:
        if requested > room and not clamp:
            raise ContextLengthExceeded(
                f"This model's maximum context length is {bundle.max_model_len} tokens. However, you "
                f"requested {prompt_len + requested} tokens ({prompt_len} in the messages, {requested} in "
                f"the completion). Please reduce the length of the messages or completion.",
                param="max_tokens",
            )
        return min(requested, room)
    default = bundle.generation_defaults.get("max_new_tokens")
    return min(room, default) if isinstance(default, int) and default > 0 else room


def structured_outputs(req: SamplingRequestFields) -> dict[str, Any] | None:
    """``structured_outputs`` with ``response_format`` applied (vLLM
    ``structured_outputs_from_response_format``).

    Raises:
        InvalidRequest: ``json_schema`` without its schema, an unknown ``response_format.type``, or
            more than one of ``json``/``regex``/``choice``.
    """
    if req.structured_outputs is not None and all(req.structured_outputs.get(k) is None for k in CONSTRAINTS):
        raise InvalidRequest(  # vLLM 0.33 ``StructuredOutputsParams.__post_init__``
            "You must use one kind of structured outputs constraint but none are specified: "
            f"structured_outputs has none of {', '.join(CONSTRAINTS)}"
        )
    so = dict(req.structured_outputs) if req.structured_outputs else None
    if so and sum(so.get(k) is not None for k in ("json", "regex", "choice")) > 1:
        raise InvalidRequest(
            "You can only use one kind of constraints for structured outputs ('json', 'regex' or 'choice').",
            param="structured_outputs",
        )
    rf = req.response_format
    if not rf or rf.get("type") == "text":
        return so
    kind = rf.get("type")
    if kind == "json_object":
        override: dict[str, Any] = {"json_object": True}
    elif kind == "json_schema":
        schema = rf.get("json_schema")
        if not isinstance(schema, dict):
            raise InvalidRequest(
                "When response_format type is 'json_schema', the 'json_schema' field must be provided.",
                param="response_format",
            )
        override = {"json": schema.get("schema", schema.get("json_schema"))}
        if override["json"] is None:  # vLLM: ``StructuredOutputsParams`` with no constraint
            raise InvalidRequest(
                "You must use one kind of structured outputs constraint but none are specified: "
                "response_format.json_schema has no `schema`"
            )
    elif kind in ("structural_tag", "structural_tags"):
        import json

        if kind == "structural_tag" and not _structural_tag_shape(rf):
            raise InvalidRequest(
                "Invalid response_format structural_tag specification.", param="response_format"
            )
        override = {"structural_tag": json.dumps(rf)}
    else:
        raise InvalidRequest(f"Unsupported response_format type: {kind!r}", param="response_format.type")
    return {**(so or {}), **override}


#: vLLM 0.33 ``SamplingParams.from_optional`` clamps every ``logit_bias`` value to this range.
LOGIT_BIAS_BOUND = 100.0


def logit_bias(bias: dict[str, float] | None) -> dict[str, float] | None:
    """``logit_bias`` as vLLM 0.33's ``SamplingParams.from_optional`` makes it: each key read as
    an integer token id with Python's ``int`` (``" 5"`` and ``"+5"`` are id 5; the answer's keys
    are the ids written back as strings), each value clamped to ``[-100, 100]``. Ids are not
    bounded by the vocabulary here (the engine's ``SamplingParams.verify`` does that, as upstream).

    Raises:
        InvalidRequest: a key that is no integer (upstream wording, ``param`` ``logit_bias``).
    """
    if bias is None:
        return None
    out: dict[str, float] = {}
    invalid: list[str] = []
    for token, value in bias.items():
        try:
            out[str(int(token))] = min(LOGIT_BIAS_BOUND, max(-LOGIT_BIAS_BOUND, value))
        except ValueError:
            invalid.append(token)
    if invalid:
        raise vllm_error(f"logit_bias contains key(s) that cannot be converted to integer token IDs: {invalid!r}",
                         "logit_bias", invalid)
    return out


def _structural_tag_shape(rf: dict[str, Any]) -> bool:
    """Whether a ``structural_tag`` ``response_format`` has one of vLLM 0.33's two shapes: a
    ``format`` (``StructuralTagResponseFormat``), or ``structures`` (each ``begin``/``end``
    strings, ``schema`` an object or absent) with ``triggers`` strings (the legacy one). vLLM
    then also compiles it with xgrammar, which this service does not."""
    if "format" in rf:
        return True
    structures, triggers = rf.get("structures"), rf.get("triggers")
    return (
        isinstance(structures, list)
        and isinstance(triggers, list)
        and all(isinstance(t, str) for t in triggers)
        and all(
            isinstance(x, dict)
            and isinstance(x.get("begin"), str)
            and isinstance(x.get("end"), str)
            and isinstance(x.get("schema", {}), (dict, type(None)))
            for x in structures
        )
    )


def _whole(so: dict[str, Any] | None) -> dict[str, Any] | None:
    """vLLM 0.33 sends ``structured_outputs`` as its whole ``StructuredOutputsParams`` (every
    field, unset ones ``null`` / ``false``), also when only ``response_format`` asked for it."""
    return None if so is None else {**empty_structured_outputs(), **so}


def _server_default(name: str, req: SamplingRequestFields, bundle: ModelBundle, default: Any) -> Any:
    value = getattr(req, name)
    if value is not None:
        return value
    return bundle.generation_defaults.get(name, default)


def _extra_args(req: SamplingRequestFields) -> dict[str, Any] | None:
    extra = dict(req.vllm_xargs or {})
    extra.update(dict(req.model_extra or {}).get("extra_args") or {})
    return extra or None


def build(
    req: SamplingRequestFields,
    *,
    max_tokens: int,
    logprobs: int | None,
    bundle: ModelBundle,
    settings: Settings,
    skip_special_tokens_default: bool = True,
) -> dict[str, Any]:
    """The ``sampling_params`` dict (see module docstring for what is emitted)."""
    sp: dict[str, Any] = {
        name: float(_server_default(name, req, bundle, d)) for name, d in FLOAT_DEFAULTS.items()
    }
    top_k = _server_default("top_k", req, bundle, 0)
    optional = {
        "n": (req.n, 1),
        "top_k": (top_k, 0),
        "seed": (req.seed, None),
        "ignore_eos": (req.ignore_eos, False),
        "min_tokens": (req.min_tokens, 0),
        "logprobs": (logprobs, None),
        "prompt_logprobs": (req.prompt_logprobs, None),
        "spaces_between_special_tokens": (req.spaces_between_special_tokens, True),
        "include_stop_str_in_output": (req.include_stop_str_in_output, False),
        "logit_bias": (logit_bias(req.logit_bias), None),
        "logprob_token_ids": (req.logprob_token_ids or None, None),
        "allowed_token_ids": (req.allowed_token_ids, None),
        "thinking_token_budget": (req.thinking_token_budget, None),
        "stream_interval": (req.stream_interval or settings.stream_interval, None),
        "structured_outputs": (_whole(structured_outputs(req)), None),
        "extra_args": (_extra_args(req), None),
    }
    skip = req.skip_special_tokens if req.skip_special_tokens is not None else skip_special_tokens_default
    optional["skip_special_tokens"] = (skip, True)
    if req.seed == -1:  # vLLM: seed -1 means "no seed"
        optional["seed"] = (None, None)
    for name, (value, default) in optional.items():
        if value is not None and value != default:
            sp[name] = value
    if sp["temperature"] < GREEDY_EPSILON:  # greedy: vLLM resets and omits top_p/top_k/min_p
        for name in ("top_p", "top_k", "min_p"):
            sp.pop(name, None)
        if sp.get("n", 1) > 1:  # vLLM ``SamplingParams._verify_greedy_sampling``
            raise InvalidRequest(f"n must be 1 when using greedy sampling, got {sp['n']}.")
    stop = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    sp["stop"] = stop if settings.keep_stop_strings else []
    sp["stop_token_ids"] = list(dict.fromkeys(req.stop_token_ids or []))
    sp["max_tokens"] = max_tokens
    sp["output_kind"] = OUTPUT_KIND_DELTA if req.stream else OUTPUT_KIND_FINAL_ONLY
    sp["skip_clone"] = True
    sp["bad_words"] = list(dict.fromkeys(req.bad_words or []))
    # prompt logprobs need every prompt token computed: vLLM skips reading the prefix cache
    sp["skip_reading_prefix_cache"] = req.prompt_logprobs is not None
    return sp
