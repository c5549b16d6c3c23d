"""``/tokenize`` and ``/detokenize`` (vLLM 0.33 shapes): a prompt or chat messages → token ids, and
back. A chat tokenizes exactly as it renders.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest
from ..models import ModelBundle, check_model
from ..protocol.chat import ChatCompletionRequest
from ..settings import Settings
from ..tokens import tokenization
from . import messages
from .chat_prompt import chat_prompt, check_ids


def tokenize(bundle: ModelBundle, settings: Settings, body: Any) -> dict[str, Any]:
    """``/tokenize``: ``{prompt, add_special_tokens?}`` or ``{messages, ...chat options}`` →
    ``{count, max_model_len, tokens, token_strs}`` (``token_strs`` only with
    ``return_token_strs``).

    Raises:
        InvalidRequest: neither or both of ``prompt``/``messages``; chat errors as in render.
    """
    if not isinstance(body, dict) or ("prompt" in body) == ("messages" in body):
        raise InvalidRequest("give exactly one of `prompt` or `messages`", param="prompt")
    check_model(bundle, body.get("model"))
    if "prompt" in body:
        if not isinstance(body["prompt"], str):
            raise InvalidRequest("prompt must be a string", param="prompt")
        ids = tokenization.encode_text(
            bundle, body["prompt"], add_special_tokens=body.get("add_special_tokens", True) is not False
        )
    else:
        req = ChatCompletionRequest.model_validate(body)
        tools = messages.validate_tools(req.tools)
        ids = chat_prompt(bundle, settings, req, tools).token_ids
    strs = tokenization.token_strings(bundle, ids) if body.get("return_token_strs") else None
    return {"count": len(ids), "max_model_len": bundle.max_model_len, "tokens": ids, "token_strs": strs}


def detokenize(bundle: ModelBundle, settings: Settings, body: Any) -> dict[str, Any]:
    """``/detokenize``: ``{tokens}`` → ``{prompt}`` (special tokens kept).

    Raises:
        InvalidRequest: ``tokens`` missing, not a list of ints, or outside the vocabulary.
    """
    if not isinstance(body, dict) or not isinstance(body.get("tokens"), list):
        raise InvalidRequest("`tokens` must be a list of token ids", param="tokens")
    check_model(bundle, body.get("model"))
    ids = check_ids(bundle, body["tokens"], "tokens")
    return {"prompt": tokenization.decode(bundle, ids)}
