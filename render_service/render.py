"""Render: OpenAI chat / completions requests → ``GenerateRequest`` (token ids + sampling params).

Entry points (each takes the loaded bundle, the settings and the parsed JSON body):

* ``render_chat(bundle, settings, body) -> dict``: one ``GenerateRequest``.
* ``render_completion(bundle, settings, body) -> list[dict]``: one per prompt.
* ``tokenize(bundle, settings, body) -> dict`` and ``detokenize(...) -> dict``.
"""

from __future__ import annotations

from typing import Any

from .models import ModelBundle
from .settings import Settings


def render_chat(bundle: ModelBundle, settings: Settings, body: Any) -> dict[str, Any]:
    raise NotImplementedError("render_chat")


def render_completion(bundle: ModelBundle, settings: Settings, body: Any) -> list[dict[str, Any]]:
    raise NotImplementedError("render_completion")


def tokenize(bundle: ModelBundle, settings: Settings, body: Any) -> dict[str, Any]:
    raise NotImplementedError("tokenize")


def detokenize(bundle: ModelBundle, settings: Settings, body: Any) -> dict[str, Any]:
    raise NotImplementedError("detokenize")
