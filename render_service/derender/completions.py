"""Completions derender (``/v1/completions/derender``), batch and streaming; never parses.

Upstream §6.3/§6.4: batch takes one generate response per prompt and flattens their choices
with a running ``index``; logprobs use the completions parallel-list shape with ``text_offset``
carried across stream chunks in the state.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from ..errors import InvalidRequest
from ..models import ModelBundle, check_model
from ..protocol.derender import (
    DERENDER_COMPLETION_BODY,
    CompletionRequestFields,
    DerenderCompletionRequest,
    DerenderCompletionStreamRequest,
    GenerateChoice,
    StreamState,
)
from ..settings import Settings
from . import logprobs
from .flow import (
    LiveStream,
    check_choice,
    check_count,
    check_prompt_ids,
    initial_state,
    is_stream,
    metrics_block,
    run_stream,
    union_failure,
    usage_block,
)
from .pipeline import Pipeline, StepOutput, advance, pipeline_for

# --- completions --------------------------------------------------------------------------------


def _plain(pipe: Pipeline) -> Pipeline:
    return replace(pipe, parser=None)


def _completion_lp_limit(opts: CompletionRequestFields | None) -> int | None:
    return (
        None if opts is None else logprobs.completion_top_limit(opts.logprobs, bool(opts.logprob_token_ids))
    )


def _completion_choice(
    out: StepOutput, index: int, choice: GenerateChoice, st: StreamState
) -> dict[str, Any]:
    lp = None
    if out.logprobs is not None and choice.logprobs is not None and choice.logprobs.content is not None:
        lp, st.off = logprobs.to_completion(out.logprobs, choice.logprobs.content, st.off)
    return {
        "index": index,
        "text": out.content,
        "logprobs": lp,
        "finish_reason": out.finish_reason,
        "stop_reason": out.stop_reason,
        "prompt_logprobs": None,
        "prompt_token_ids": None,
        "token_ids": choice.token_ids if st.ret_ids else None,
        "routed_experts": None,
        "weight_versions": None,
    }


def completion_batch(
    bundle: ModelBundle, settings: Settings, req: DerenderCompletionRequest
) -> dict[str, Any]:
    name = check_model(bundle, req.model)
    pipe = _plain(pipeline_for(bundle, settings))
    n = len(req.generate_responses)
    check_count(n, "generate_responses")
    for gen in req.generate_responses:
        check_count(len(gen.choices), "choices")
    for what, given in (("prompt_tokens", req.prompt_tokens), ("prompt_token_ids", req.prompt_token_ids)):
        if given is not None and len(given) != n:
            raise InvalidRequest(
                f"{what} must have one entry per generate response ({len(given)} != {n})", param=what
            )
    choices: list[dict[str, Any]] = []
    prompt_total, completion_total = 0, 0
    for i, gen in enumerate(req.generate_responses):
        given = req.prompt_token_ids[i] if req.prompt_token_ids else None
        prompt_ids = given if given is not None else gen.prompt_token_ids
        check_prompt_ids(bundle, settings, prompt_ids)
        start = initial_state(
            pipe,
            settings,
            rid=gen.request_id,
            model=name,
            opts=req.completion_request,
            prompt_ids=prompt_ids,
            lp_limit=_completion_lp_limit(req.completion_request),
        )
        for choice in gen.choices:
            check_choice(bundle, settings, choice, batch=True)
            out, st = advance(
                pipe,
                start,
                choice.token_ids or (),
                final=True,
                finish_reason=choice.finish_reason,
                stop_reason=choice.stop_reason,
                logprob_content=choice.logprobs.content if choice.logprobs else None,
            )
            item = _completion_choice(out, len(choices), choice, st)
            if st.ret_ids:
                item["prompt_token_ids"] = gen.prompt_token_ids
            choices.append(item)
            completion_total += len(choice.token_ids or ())
        # vLLM 0.33: ``prompt_tokens`` only counts what the caller sent (0 without it)
        prompt_total += req.prompt_tokens[i] if req.prompt_tokens else 0
    kv = [g.kv_transfer_params for g in req.generate_responses]
    return {
        "id": req.generate_responses[0].request_id,
        "object": "text_completion",
        "created": int(time.time()),
        "model": name,
        "choices": choices,
        "service_tier": None,
        "system_fingerprint": None,
        "usage": usage_block(prompt_total, completion_total),
        "kv_transfer_params": kv[0] if all(k == kv[0] for k in kv) else None,
        "ec_transfer_params": None,
        "metrics": metrics_block(req.generate_responses[0].metrics) if n == 1 else None,
    }


def _stream_choice(out: StepOutput, choice: GenerateChoice, state: StreamState) -> dict[str, Any]:
    item = _completion_choice(out, choice.index, choice, state)
    for key in ("prompt_logprobs", "routed_experts"):
        del item[key]
    return item


def completion_stream(
    bundle: ModelBundle, settings: Settings, req: DerenderCompletionStreamRequest
) -> dict[str, Any]:
    check_model(bundle, req.model)
    pipe = _plain(pipeline_for(bundle, settings))
    opts = req.completion_request
    return run_stream(bundle, settings, pipe, req, opts, _completion_lp_limit(opts),
                      object_name="text_completion", shape=_stream_choice, extra={})


def derender_completion(bundle: ModelBundle, settings: Settings, body: Any) -> dict[str, Any]:
    """Completions derender (never parses); dispatches on ``body["stream"]``: a
    ``CompletionResponse``, or ``{"chunk", "stream_state", "stop_generation"}`` when streaming.

    Raises:
        InvalidRequest: validation, more than one choice per stream chunk, token lists over
            ``max_model_len``; InvalidStreamState: a bad ``stream_state``; UnknownModel (404).
    """
    try:
        req = (DerenderCompletionStreamRequest.model_validate(body) if is_stream(body)
               else DerenderCompletionRequest.model_validate(body))
    except ValidationError:
        raise union_failure(DERENDER_COMPLETION_BODY, body) from None
    if isinstance(req, DerenderCompletionStreamRequest):
        return completion_stream(bundle, settings, req)
    return completion_batch(bundle, settings, req)


def open_completion_stream(
    bundle: ModelBundle, settings: Settings, completion_request: Any, prompt_token_ids: list[int], rid: str
) -> LiveStream:
    """An in-memory completions stream (:class:`~render_service.derender.flow.LiveStream`) for
    one rendered prompt (no parsing); arguments as :func:`~render_service.derender.chat.open_chat_stream`.

    Raises:
        UnknownModel: ``model`` is not served. ValidationError: a malformed request.
    """
    opts = CompletionRequestFields.model_validate(completion_request)
    name = check_model(bundle, opts.model)
    pipe = _plain(pipeline_for(bundle, settings))
    check_prompt_ids(bundle, settings, prompt_token_ids)
    start = initial_state(pipe, settings, rid=rid, model=name, opts=opts, prompt_ids=prompt_token_ids,
                          lp_limit=_completion_lp_limit(opts))
    return LiveStream(bundle, settings, pipe, start, "text_completion", _stream_choice, {})
