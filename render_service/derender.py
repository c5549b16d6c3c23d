"""Derender: engine output token ids → OpenAI responses, batch and one-chunk-per-call streaming.

Entry points (each takes the loaded bundle, the settings and the parsed JSON body):

* ``derender_chat(bundle, settings, body)``: ``ChatCompletionResponse`` when ``stream`` is
  false, ``{"chunk": ChatCompletionStreamResponse, "stream_state": str}`` when true.
* ``derender_completion(bundle, settings, body)``: the completions analogue.
"""

from __future__ import annotations

from typing import Any

from .models import ModelBundle
from .settings import Settings


def derender_chat(bundle: ModelBundle, settings: Settings, body: Any) -> dict[str, Any]:
    raise NotImplementedError("derender_chat")


def derender_completion(bundle: ModelBundle, settings: Settings, body: Any) -> dict[str, Any]:
    raise NotImplementedError("derender_completion")
