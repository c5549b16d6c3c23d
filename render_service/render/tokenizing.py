"""``/tokenize`` and ``/detokenize`` (vLLM 0.33 shapes): a prompt or chat messages → token ids, and
back. A chat tokenizes exactly as it renders.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..errors import not_an_object, union_errors
from ..models import ModelBundle, check_model, token_id_limit
from ..protocol.tokenize import DetokenizeRequest, TokenizeChatRequest, TokenizeCompletionRequest
from ..settings import Settings
from ..tokens import tokenization
from . import messages
from .chat_prompt import chat_prompt


def _tokenize_request(body: Any) -> TokenizeCompletionRequest | TokenizeChatRequest:
    """``body`` as vLLM 0.33's ``TokenizeRequest`` union reads it: a chat request when it holds
    ``messages`` and validates as one, else a completion request; when both fail, every
    member's errors (completion first)."""
    if not isinstance(body, dict):
        raise not_an_object(body, (), ())
    members: tuple[type[TokenizeCompletionRequest] | type[TokenizeChatRequest], ...] = (
        (TokenizeChatRequest, TokenizeCompletionRequest) if "messages" in body
        else (TokenizeCompletionRequest, TokenizeChatRequest))
    failures = {}
    for member in members:
        try:
            return member.model_validate(body, from_attributes=True)
        except ValidationError as exc:
            failures[member] = exc
    raise union_errors(failures[TokenizeCompletionRequest], failures[TokenizeChatRequest])


def tokenize(bundle: ModelBundle, settings: Settings, body: Any) -> dict[str, Any]:
    """``/tokenize``: ``{prompt, add_special_tokens?}`` or ``{messages, ...chat options}`` →
    ``{count, max_model_len, tokens, token_strs}`` (``token_strs`` only with
    ``return_token_strs``).

    Raises:
        RequestErrors: the body is neither request (both members' pydantic errors, vLLM 0.33's
            union); chat errors as in render.
    """
    req = _tokenize_request(body)
    check_model(bundle, req.model)
    if isinstance(req, TokenizeCompletionRequest):
        ids = tokenization.encode_text(bundle, req.prompt, add_special_tokens=req.add_special_tokens)
    else:
        tools = messages.validate_tools(req.tools)
        ids = chat_prompt(bundle, settings, req, tools).token_ids
    strs = tokenization.token_strings(bundle, ids) if req.return_token_strs else None
    return {"count": len(ids), "max_model_len": bundle.max_model_len, "tokens": ids, "token_strs": strs}


def detokenize(bundle: ModelBundle, settings: Settings, body: Any) -> dict[str, Any]:
    """``/detokenize``: ``{tokens}`` → ``{prompt}`` (special tokens kept). Ids past the model's
    vocabulary (:func:`render_service.models.token_id_limit`) are dropped, as vLLM 0.33's
    detokenizer drops them (``[9707, 151936]`` → ``"Hello"`` on Qwen3); a boolean is the integer
    pydantic's lax mode makes of it (``true`` → 1), as vLLM's ``list[NonNegativeInt]`` field.

    Raises:
        pydantic.ValidationError: ``tokens`` missing, not a list, or an item that is no
            non-negative integer (vLLM's field errors).
    """
    if not isinstance(body, dict):
        raise not_an_object(body)
    req = DetokenizeRequest.model_validate(body, from_attributes=True)
    check_model(bundle, req.model)
    limit = token_id_limit(bundle)
    return {"prompt": tokenization.decode(bundle, [t for t in req.tokens if t < limit])}
