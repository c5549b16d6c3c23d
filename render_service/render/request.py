"""What chat and completions render share: request-level checks and the ``GenerateRequest`` shape.

Sources: vLLM 0.33 ``OpenAIServing`` request checks (beam search, ``stream_options``, logprob
bounds) and its ``GenerateRequest`` (upstream-render-api.md §5).
"""

from __future__ import annotations

import uuid
from typing import Any

from ..errors import InvalidRequest
from ..protocol.common import SamplingRequestFields
from ..protocol.generate import GenerateRequest
from ..settings import Settings


def base_id(body: dict[str, Any]) -> str:
    """The request id base: the body's ``request_id`` (set from ``X-Request-Id``), else a fresh uuid4 hex."""
    rid = body.get("request_id")
    return rid if isinstance(rid, str) and rid else uuid.uuid4().hex


def check_common(req: SamplingRequestFields, body: dict[str, Any]) -> None:
    """Checks every render makes (upstream wording).

    Raises:
        InvalidRequest: ``use_beam_search``; ``stream_options`` without ``stream``.
    """
    if req.use_beam_search:
        raise InvalidRequest("Beam search is not supported by the render endpoint", param="use_beam_search")
    if body.get("stream_options") and not req.stream:
        raise InvalidRequest("Stream options can only be defined when `stream=True`.", param="stream_options")


def check_logprobs(k: int | None, settings: Settings, param: str) -> None:
    """Bound a logprobs count ``k`` (``-1`` = all).

    Raises:
        InvalidRequest: ``k < -1`` or ``k > --max-logprobs`` (upstream wording, ``param`` named).
    """
    if k is None:
        return
    if k < -1:
        raise InvalidRequest(f"`{param}` must be a positive value or -1.", param=param)
    if k > settings.max_logprobs:
        raise InvalidRequest(
            f"Requested {param} of {k}, which is greater than max allowed: {settings.max_logprobs}",
            param=param,
        )


def generate_request(
    req: SamplingRequestFields,
    *,
    request_id: str,
    token_ids: list[int],
    sampling_params: dict[str, Any],
    model: str | None,
    **extra: Any,
) -> dict[str, Any]:
    """The ``GenerateRequest`` dict a tokens-only engine accepts (vLLM 0.33 field names): the request's
    pass-through fields plus ``token_ids``, ``sampling_params`` and endpoint-specific ``extra``.

    ``token_ids`` (the encoder's ints) skip pydantic: validating and dumping 9k ids cost 0.2 ms
    per request; the model builds every other key, in its order, and the ids are put in place.
    ``sampling_params`` and ``parse_context.tools`` (plain JSON values we built, typed ``Any``
    there) are put in place the same way: dumping would only copy them (the request's tool
    schemas, ~30 µs for six tools)."""
    context = extra.get("parse_context")
    tools = None
    if isinstance(context, dict) and isinstance(context.get("tools"), list):
        tools = context["tools"]
        extra["parse_context"] = {**context, "tools": []}
    out = GenerateRequest(
        request_id=request_id,
        token_ids=[],
        sampling_params={},
        model=model,
        return_token_ids=req.return_token_ids,
        stream=req.stream,
        stream_options=req.stream_options if req.stream else None,
        cache_salt=req.cache_salt,
        priority=req.priority,
        kv_transfer_params=req.kv_transfer_params,
        ec_transfer_params=req.ec_transfer_params,
        **extra,
    ).model_dump()
    out["token_ids"] = token_ids if type(token_ids) is list else list(token_ids)
    out["sampling_params"] = sampling_params
    if tools is not None:
        out["parse_context"]["tools"] = tools
    return out
