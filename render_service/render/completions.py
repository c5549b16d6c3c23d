"""Completions render: an OpenAI completions request → one ``GenerateRequest`` per prompt (vLLM 0.33
``/v1/completions/render``; upstream-render-api.md §5, §9).
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest, not_an_object, vllm_error
from ..models import ModelBundle, check_model
from ..protocol.completion import CompletionRequest
from ..settings import Settings
from ..tokens import tokenization
from . import sampling
from .chat_prompt import check_ids
from .request import base_id, check_common, check_logprobs, generate_request, pre_check, verify_sampling


def _completion_prompts(bundle: ModelBundle, req: CompletionRequest) -> list[list[int]]:
    prompts = _completion_prompt_ids(bundle, req)
    return [
        tokenization.truncate(ids, req.truncate_prompt_tokens, req.truncation_side, bundle.max_model_len)
        for ids in prompts
    ]


def _completion_prompt_ids(bundle: ModelBundle, req: CompletionRequest) -> list[list[int]]:
    prompt = req.prompt
    if isinstance(prompt, str):
        if not prompt:  # vLLM refuses an empty text prompt before tokenizing (no BOS-only prompt)
            raise vllm_error("Either prompt or prompt_embeds must be provided and non-empty.", "prompt")
        return [tokenization.encode_text(bundle, prompt, add_special_tokens=req.add_special_tokens)]
    if not prompt:
        raise vllm_error("You must pass at least one prompt", "prompt")
    if all(isinstance(p, int) for p in prompt):
        return [check_ids(bundle, prompt, "prompt")]
    out = []
    for i, p in enumerate(prompt):
        if isinstance(p, str):
            out.append(tokenization.encode_text(bundle, p, add_special_tokens=req.add_special_tokens))
        else:
            out.append(check_ids(bundle, p, f"prompt.{i}"))
    return out


def _offsets(bundle: ModelBundle, req: CompletionRequest, i: int) -> list[tuple[int, int]] | None:
    """``return_token_offsets``: each prompt token's ``[start, end)`` character span in a text
    prompt (special tokens added by the tokenizer span ``[0, 0]``), as vLLM; ``None`` for id prompts
    or a truncated prompt."""
    prompt = req.prompt
    text = prompt if isinstance(prompt, str) else prompt[i] if isinstance(prompt, list) else ""
    if not isinstance(text, str) or req.truncate_prompt_tokens is not None:
        return None
    return tokenization.encode_prompt_with_offsets(bundle, text, add_special_tokens=req.add_special_tokens)[1]


def render_completion(bundle: ModelBundle, settings: Settings, body: Any) -> list[dict[str, Any]]:
    """One ``GenerateRequest`` per prompt of an OpenAI completions request (upstream §5, §9).

    Raises:
        InvalidRequest: beam search, ``stream_options`` without ``stream``, ``suffix`` (no FIM
            rendering here), ``prompt_embeds``, empty prompt, ids outside the vocabulary,
            prompt too long, logprobs over ``--max-logprobs``.
        UnknownModel: ``model`` is not served.
    """
    if not isinstance(body, dict):
        raise not_an_object(body)
    if body.get("prompt_embeds") is not None:
        raise InvalidRequest("prompt_embeds is not supported by this render service", param="prompt_embeds")
    pre_check(body, "completion")
    req = CompletionRequest.model_validate(body, from_attributes=True)
    check_model(bundle, req.model)
    verify_sampling(req, req.max_tokens)
    model = req.model  # copied from the request, as upstream (null when absent)
    check_common(req, body)
    if req.suffix is not None:
        raise InvalidRequest("suffix is not supported for this model", param="suffix")
    check_logprobs(req.logprobs, settings, "logprobs")
    check_logprobs(req.prompt_logprobs, settings, "prompt_logprobs")
    if req.logprob_token_ids and req.logprobs is None:  # vLLM 0.33 ``CompletionRequest`` wording
        raise InvalidRequest(
            "when using `logprob_token_ids`, `logprobs` must be set.", param="logprob_token_ids"
        )
    prompts = _completion_prompts(bundle, req)
    base = f"cmpl-{base_id(body)}"
    out = []
    for i, ids in enumerate(prompts):
        if not ids:
            raise InvalidRequest("No token_ids rendered: the prompt is empty", param="prompt")
        max_tokens = sampling.resolve_max_tokens(
            req.max_tokens, len(ids), bundle, clamp="max_tokens" not in body
        )
        prompt_logprobs_req = req
        if req.echo and req.prompt_logprobs is None and req.logprobs is not None:
            prompt_logprobs_req = req.model_copy(update={"prompt_logprobs": req.logprobs})
        sp = sampling.build(
            prompt_logprobs_req,
            max_tokens=max_tokens,
            logprobs=None if req.logprob_token_ids else req.logprobs,
            bundle=bundle,
            settings=settings,
        )
        rid = base if len(prompts) == 1 else f"{base}-{i}"
        want_offsets = (req.model_extra or {}).get("return_token_offsets") is True
        offsets = _offsets(bundle, req, i) if want_offsets else None
        out.append(
            generate_request(
                req, request_id=rid, token_ids=ids, sampling_params=sp, model=model, token_offsets=offsets
            )
        )
    return out
