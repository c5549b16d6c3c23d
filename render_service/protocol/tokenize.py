"""``/tokenize`` and ``/detokenize`` request bodies (vLLM 0.33 names), for the OpenAPI spec.

The handlers (:func:`render_service.render.tokenize`, :func:`render_service.render.detokenize`)
validate the bodies with these models, as vLLM 0.33 does (its errors: the same ``loc`` and ``msg``).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from .chat import ChatCompletionRequest


class TokenizeCompletionRequest(BaseModel):
    """``{prompt, add_special_tokens?, return_token_strs?}``: tokenize a plain string."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    prompt: str
    add_special_tokens: bool = True
    return_token_strs: bool | None = False


class TokenizeChatRequest(ChatCompletionRequest):
    """A chat request (``messages`` + chat options): tokenize its rendered prompt."""

    return_token_strs: bool | None = False


TokenizeRequest = TokenizeCompletionRequest | TokenizeChatRequest


class DetokenizeRequest(BaseModel):
    """``{tokens}``: token ids to decode (special tokens kept)."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    tokens: list[Annotated[int, Field(ge=0, le=2**63 - 1)]]  # vLLM 0.33's bounds
