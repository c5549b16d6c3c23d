"""Process management: one process, or N uvicorn worker processes sharing one socket.

* ``renderer_num_workers == 1``: the app runs in this process.
* ``> 1``: uvicorn's multi-process supervisor spawns N workers, each building the app with
  :func:`render_service.app.app_from_env` from the settings passed in ``RENDER_SERVICE_SETTINGS_JSON``;
  a worker that dies is replaced while the others keep serving. Prometheus runs in multiprocess mode
  over a fresh temporary folder (``PROMETHEUS_MULTIPROC_DIR``) unless one is given.
* SIGTERM / SIGINT: stop accepting, finish in-flight requests, exit 0. With ``shutdown_delay`` the
  worker first answers ``/ready`` with 503 for that many seconds while still serving, so load
  balancers stop sending before the listener closes.
"""

from __future__ import annotations

import dataclasses
import glob
import logging
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable
from typing import Any

import orjson

from .logging_setup import configure_logging, uvicorn_log_config
from .settings import Settings

logger = logging.getLogger(__name__)

SETTINGS_ENV = "RENDER_SERVICE_SETTINGS_JSON"


def settings_to_json(settings: Settings) -> str:
    """Serialize settings for worker processes (tuples become lists)."""
    return orjson.dumps(dataclasses.asdict(settings)).decode()


def settings_from_json(text: str) -> Settings:
    """Inverse of :func:`settings_to_json`."""
    data: dict[str, Any] = orjson.loads(text)
    for f in dataclasses.fields(Settings):
        if isinstance(data.get(f.name), list):
            data[f.name] = tuple(data[f.name])
    return Settings(**data)


def settings_from_env() -> Settings:
    """Settings from ``RENDER_SERVICE_SETTINGS_JSON``; logging configured from them.

    Raises:
        RuntimeError: the variable is not set (the factory is only for CLI-started workers).
    """
    text = os.environ.get(SETTINGS_ENV)
    if not text:
        raise RuntimeError(f"{SETTINGS_ENV} is not set; start workers with `render-service serve`")
    settings = settings_from_json(text)
    configure_logging(os.environ.get("RENDER_SERVICE_LOG_LEVEL", "info"), settings.log_format)
    return settings


def install_drain_handler(state: Any, delay: float) -> Callable[[], None]:
    """On SIGTERM, set ``state.draining`` (``/ready`` → 503), then after ``delay`` s hand the signal
    to the server's own handler (stop accepting, finish in-flight, exit).

    Only in the main thread with ``delay > 0``; returns a function restoring the previous handler.
    """
    if delay <= 0 or threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGTERM)

    def drain(signum: int, frame: Any) -> None:
        if state.draining:
            return
        state.draining = True
        logger.info("SIGTERM: draining for %.1f s before shutdown", delay)
        if callable(previous):
            threading.Timer(delay, previous, args=(signum, None)).start()

    signal.signal(signal.SIGTERM, drain)
    return lambda: signal.signal(signal.SIGTERM, previous)


def serve(settings: Settings, log_level: str = "info") -> int:
    """Run the service until SIGTERM/SIGINT; returns the exit code (0 after a graceful stop)."""
    import uvicorn

    configure_logging(log_level, settings.log_format)
    common: dict[str, Any] = {
        "host": settings.host, "port": settings.port, "log_level": log_level, "access_log": False,
        "log_config": uvicorn_log_config(log_level, settings.log_format),
        "timeout_keep_alive": settings.timeout_keep_alive,
    }
    # Before uvicorn takes over, and when it re-raises SIGTERM after a graceful stop: exit 0.
    signal.signal(signal.SIGTERM, _exit_0)
    if settings.renderer_num_workers <= 1:
        from .app import create_app

        uvicorn.run(create_app(settings), **common)
        return 0
    folder = _metrics_dir()  # several processes: metrics in multiprocess mode
    os.environ[SETTINGS_ENV] = settings_to_json(settings)
    os.environ["RENDER_SERVICE_LOG_LEVEL"] = log_level
    try:
        uvicorn.run("render_service.app:app_from_env", factory=True,
                    workers=settings.renderer_num_workers, **common)
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


def _exit_0(signum: int, frame: Any) -> None:
    raise SystemExit(0)


def _metrics_dir() -> str | None:
    """Prepare ``PROMETHEUS_MULTIPROC_DIR``: wipe a given one, else create a temporary one
    (returned, to be removed at exit)."""
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if given:
        os.makedirs(given, exist_ok=True)
        for path in glob.glob(os.path.join(given, "*.db")):
            os.remove(path)
        return None
    folder = tempfile.mkdtemp(prefix="render-service-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = folder
    return folder
