"""API-key authentication: ``Authorization: Bearer <key>`` on ``/v1*`` and ``/inference*`` paths.

As ``vllm launch render`` with ``--api-key``: only those path prefixes are guarded, ``OPTIONS``
is never guarded, and ``/health``, ``/ready``, ``/metrics``, ``/tokenize``, ``/detokenize`` stay
open. Keys are compared as SHA-256 digests in constant time; several keys may be configured at once
(rotation). A refusal is a 401 in the upstream error shape.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import replace

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import Unauthorized
from ..settings import Settings
from .limits import send_error

logger = logging.getLogger(__name__)

GUARDED_PREFIXES = ("/v1", "/inference")


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


class ApiKeyAuth:
    """ASGI middleware refusing guarded paths without a valid bearer key (401)."""

    def __init__(self, app: ASGIApp, keys: tuple[str, ...]) -> None:
        self.app = app
        self.digests = [_digest(k) for k in keys]

    def authorized(self, headers: Headers) -> bool:
        """True when ``Authorization`` is ``Bearer <one of the keys>`` (scheme case-insensitive)."""
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return False
        given = _digest(token.strip())
        match = False
        for digest in self.digests:
            match |= secrets.compare_digest(given, digest)
        return match

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.digests or scope.get("method") == "OPTIONS":
            await self.app(scope, receive, send)
            return
        path = scope["path"].removeprefix(scope.get("root_path", ""))
        if path.startswith(GUARDED_PREFIXES) and not self.authorized(Headers(scope=scope)):
            await send_error(send, Unauthorized("Unauthorized: missing or invalid API key "
                                                 "(Authorization: Bearer <key>)."))
            return
        await self.app(scope, receive, send)


def ensure_stream_state_keys(settings: Settings) -> Settings:
    """Apply the stream-state signing policy: never unsigned unless explicitly allowed.

    Keys configured → unchanged. None configured and ``allow_unsigned_stream_state`` → unchanged
    (the stream-state code emits and accepts unsigned states). None configured otherwise → a random
    per-process key is generated and a warning logged: states then verify only on this process
    (the CLI generates one key for all its workers), so replicas behind a load balancer must share
    configured keys (``--stream-state-key`` / ``RENDER_SERVICE_STREAM_STATE_KEYS`` / key file).
    """
    if settings.stream_state_keys or settings.allow_unsigned_stream_state:
        return settings
    logger.warning(
        "no --stream-state-key configured: signing stream_state with a random key generated at "
        "start-up; streams cannot move to another replica or survive a restart. Configure a shared "
        "key (--stream-state-key, RENDER_SERVICE_STREAM_STATE_KEYS or --stream-state-key-file) "
        "for multi-replica deployments."
    )
    return replace(settings, stream_state_keys=(generate_key(),))


def generate_key() -> str:
    """A fresh random signing key (256 bits, URL-safe text)."""
    return secrets.token_urlsafe(32)
