"""The configuration fingerprint: one hash of everything that changes how an output derenders.

Both wings need it: derender binds every ``stream_state`` to it, serving publishes it
(``X-Render-Config-Fingerprint``, ``/v1/models``, ``/ready``) so that replicas that disagree are
visible before a stream breaks.
"""

from __future__ import annotations

import hashlib
import hmac

import orjson

from .models import ModelBundle
from .settings import Settings

#: Characters of the fingerprint carried in a stream state (96 bits; tampering is HMAC's job).
FINGERPRINT_CHARS = 24


def config_fingerprint(bundle: ModelBundle, settings: Settings) -> str:
    """sha256 hex over everything that changes how an output derenders: model names,
    vocab size and added tokens, chat template, parser names, ``enable_auto_tool_choice``, default template
    kwargs. Two replicas agree on it exactly when a state made by one is valid on the other."""
    facts = {
        "names": list(bundle.names),
        "vocab_size": bundle.vocab_size,
        "added_vocab": bundle.added_vocab,
        "chat_template": bundle.chat_template,
        "reasoning_parser": settings.reasoning_parser,
        "tool_call_parser": settings.tool_call_parser,
        "enable_auto_tool_choice": settings.enable_auto_tool_choice,
        "default_chat_template_kwargs": settings.default_chat_template_kwargs,
    }
    blob = orjson.dumps(facts, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return hashlib.sha256(blob).hexdigest()


#: Label mixed into the fingerprint-derived signing key (a new label invalidates old states).
_KEY_LABEL = b"render-service stream_state key v1"


def fingerprint_key(fingerprint: str) -> str:
    """The stream-state signing key used when none is configured: 64 hex characters,
    HMAC-SHA256(label, full fingerprint). Deterministic, so identically configured replicas and
    worker processes share it without coordination; it is **not secret** (the fingerprint is
    published in ``X-Render-Config-Fingerprint``), so it binds a state to a configuration and
    detects corruption, but does not stop a caller from forging states (README, "Stream-state
    keys")."""
    return hmac.new(_KEY_LABEL, fingerprint.encode("ascii"), hashlib.sha256).hexdigest()
