"""Derender: engine output token ids → OpenAI responses, batch and one chunk per call, through one
per-choice pipeline (detokenizer, stop strings, parsers, logprobs) and a signed ``stream_state``.

May import the base (``protocol``, ``settings``, ``errors``, ``models``, ``fingerprint``,
``parsing``) and ``tokens``; never ``render`` or ``serving``.

Entry points (each takes the loaded bundle, the settings and the parsed JSON body):
:func:`derender_chat`, :func:`derender_completion`, :func:`derender_messages` (Anthropic),
:func:`derender_responses` (OpenAI Responses).
"""

from .anthropic import derender_messages
from .chat import derender_chat
from .completions import derender_completion
from .responses import derender_responses

__all__ = ["derender_chat", "derender_completion", "derender_messages", "derender_responses"]
