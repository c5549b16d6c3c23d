"""Configuration fingerprint: a short hash of everything that changes render/derender output.

Minimal stand-in for ``stream_state.config_fingerprint`` (to be reconciled on merge): replicas
whose model, template or parser flags drifted apart get different fingerprints, which the app
shows in ``/v1/models`` and in the ``X-Render-Config-Fingerprint`` header of every response.
"""

from __future__ import annotations

import hashlib

import orjson

from .models import ModelBundle
from .settings import Settings


def config_fingerprint(bundle: ModelBundle, settings: Settings) -> str:
    """``sha256:<16 hex>`` over model names and root, vocab size, chat template text, reasoning and
    tool parser names, ``enable_auto_tool_choice`` and the default chat template kwargs."""
    facts = {
        "names": list(bundle.names),
        "root": bundle.root,
        "vocab_size": bundle.vocab_size,
        "chat_template": bundle.chat_template or "",
        "reasoning_parser": settings.reasoning_parser,
        "tool_call_parser": settings.tool_call_parser,
        "enable_auto_tool_choice": settings.enable_auto_tool_choice,
        "default_chat_template_kwargs": settings.default_chat_template_kwargs,
    }
    blob = orjson.dumps(facts, option=orjson.OPT_SORT_KEYS, default=str)
    return "sha256:" + hashlib.sha256(blob).hexdigest()[:16]
