"""Shared fixtures: paths to ../shared, and real uvicorn servers on 127.0.0.1.

``serve(**settings)`` starts the app in a background thread on a free port and yields an
``httpx.Client`` bound to it; servers are cached per settings for the whole session.
"""

from __future__ import annotations

import gc
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from render_service.serving.app import create_app
from render_service.settings import Settings

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("RENDER_SERVICE_SHARED", REPO.parent / "shared"))
MODELS = SHARED / "models"


def shared_path(*parts: str) -> Path:
    """A path under ../shared; the test is skipped (and CI fails on such skips) when absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"needs ../shared: {path} not found")
    return path


def model_dir(name: str) -> str:
    """Folder of one of the real tokenizers in ../shared/models (e.g. ``Qwen--Qwen3-0.6B``)."""
    return str(shared_path("models", name))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Server:
    def __init__(self, settings: Settings) -> None:
        port = _free_port()
        self.settings = settings
        self.base_url = f"http://127.0.0.1:{port}"
        config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.05)
        self.client = httpx.Client(base_url=self.base_url, timeout=60)

    def stop(self) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(timeout=10)


_SERVERS: dict[str, _Server] = {}
MAX_LIVE_SERVERS = 3
"""Servers are cached per settings, least recently used stopped beyond this: each holds a loaded
model (tokenizer, fast encoder, caches), and keeping every configuration of the session alive
grew one pytest process past 11 GB."""


@pytest.fixture(scope="session")
def serve() -> Iterator:
    """Factory: ``serve(model=..., reasoning_parser=...)`` -> httpx.Client on a live server."""

    def start(**kwargs) -> httpx.Client:
        kwargs.setdefault("host", "127.0.0.1")
        for key in ("served_model_name",):
            if key in kwargs and isinstance(kwargs[key], list):
                kwargs[key] = tuple(kwargs[key])
        settings = Settings(**kwargs)
        key = repr(settings)
        server = _SERVERS.pop(key, None) or _Server(settings)
        _SERVERS[key] = server  # most recently used last
        while len(_SERVERS) > MAX_LIVE_SERVERS:
            _SERVERS.pop(next(iter(_SERVERS))).stop()
            gc.collect()
        return server.client

    yield start
    for server in _SERVERS.values():
        server.stop()
    _SERVERS.clear()
