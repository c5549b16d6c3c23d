"""API-key authentication: ``Authorization: Bearer <key>`` on ``/v1*`` and ``/inference*`` paths
(on ``/v1/messages*`` also Anthropic's ``x-api-key: <key>``).

As ``vllm launch render`` with ``--api-key``: only those path prefixes are guarded, ``OPTIONS``
is never guarded, and ``/health``, ``/ready``, ``/metrics``, ``/tokenize``, ``/detokenize`` stay
open. Keys are compared as SHA-256 digests in constant time; several keys may be configured at once
(rotation). A refusal is a 401 in the upstream error shape.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Mapping

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import Unauthorized
from ..settings import Settings
from .limits import send_error

logger = logging.getLogger(__name__)

GUARDED_PREFIXES = ("/v1", "/inference")
#: Paths where Anthropic's own header ``x-api-key: <key>`` is accepted too (the ``anthropic`` SDK
#: sends its key there); vLLM 0.33 reads only ``Authorization``, so this is a superset.
ANTHROPIC_PREFIX = "/v1/messages"


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


class ApiKeyAuth:
    """ASGI middleware refusing guarded paths without a valid bearer key (401)."""

    def __init__(self, app: ASGIApp, keys: tuple[str, ...]) -> None:
        self.app = app
        self.digests = [_digest(k) for k in keys]

    def authorized(self, headers: Mapping[str, str], path: str = "") -> bool:
        """True when ``Authorization`` is ``Bearer <one of the keys>`` (scheme case-insensitive),
        or, on Anthropic's paths (``/v1/messages*``), ``x-api-key`` is one of the keys."""
        scheme, _, token = headers.get("authorization", "").partition(" ")
        given = [token.strip()] if scheme.lower() == "bearer" and token else []
        if path.startswith(ANTHROPIC_PREFIX) and headers.get("x-api-key"):
            given.append(headers["x-api-key"])
        match = False
        for key in given:
            for digest in self.digests:
                match |= secrets.compare_digest(_digest(key), digest)
        return match

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.digests or scope.get("method") == "OPTIONS":
            await self.app(scope, receive, send)
            return
        path = scope["path"].removeprefix(scope.get("root_path", ""))
        if path.startswith(GUARDED_PREFIXES) and not self.authorized(Headers(scope=scope), path):
            await send_error(send, Unauthorized("Unauthorized: missing or invalid API key "
                                                 "(Authorization: Bearer <key>)."))
            return
        await self.app(scope, receive, send)


def ensure_stream_state_keys(settings: Settings) -> Settings:
    """Log which stream-state signing mode is on; the settings are returned unchanged.

    The policy itself is :func:`render_service.derender.pipeline.state_keys`: configured keys
    (``--stream-state-key`` / ``RENDER_SERVICE_STREAM_STATE_KEYS`` / key file) sign and verify;
    ``allow_unsigned_stream_state`` → unsigned; neither → a key derived from the configuration
    fingerprint, the same on every identically configured replica and worker process, so streams
    move between replicas without setup, but a caller who knows the configuration can forge a state.
    """
    if settings.stream_state_keys:
        logger.info("stream_state: signed with %d configured key(s)", len(settings.stream_state_keys))
    elif settings.allow_unsigned_stream_state:
        logger.warning("stream_state: UNSIGNED (--allow-unsigned-stream-state); use only on a "
                       "trusted network")
    else:
        logger.warning(
            "stream_state: no --stream-state-key configured, signing with a key derived from the "
            "configuration fingerprint: replicas with the same model, template and parser flags accept "
            "each other's states, but the key is not secret, so a caller can forge a state for its own "
            "stream. For untrusted callers configure a shared secret key (--stream-state-key, "
            "RENDER_SERVICE_STREAM_STATE_KEYS or --stream-state-key-file)."
        )
    return settings

