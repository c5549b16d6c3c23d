"""Render: OpenAI requests → ``GenerateRequest`` for a tokens-only engine (token ids, sampling
params, parse context). Messages, chat templates, sampling, tool choice, the entry points;
``multimodal/`` does images and video for vision-language models.

May import the base (``protocol``, ``settings``, ``errors``, ``models``, ``chat_template``,
``fingerprint``, ``parsing``) and ``tokens``; never ``derender`` or ``serving``.

Entry points (each takes the loaded bundle, the settings and the parsed JSON body):
:func:`render_chat`, :func:`render_completion`, :func:`render_messages` (Anthropic),
:func:`render_responses` (OpenAI Responses), :func:`tokenize`, :func:`detokenize`.
"""

from .anthropic import render_messages
from .chat import render_chat
from .completions import render_completion
from .responses import render_responses
from .tokenizing import detokenize, tokenize

__all__ = [
    "detokenize", "render_chat", "render_completion", "render_messages", "render_responses", "tokenize",
]
