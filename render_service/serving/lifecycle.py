"""What the server processes share at their start and end: the settings handed to worker
processes (``RENDER_SERVICE_SETTINGS_JSON``), the SIGTERM drain, and exiting at once when
nothing is left to finish (a SIGTERM during start-up; a stop during the background build).

Imported by both :mod:`.server` (which starts workers) and :mod:`.app` (which each worker builds),
so that neither imports the other.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

import orjson

from ..settings import Settings
from .logging_setup import configure_logging

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

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore


def exit_at_once() -> None:
    """Exit the process with 0 now, without waiting for its other threads (a start-up model load,
    a background fast-encoder build: work that will never serve). The ``atexit`` handlers run and
    the standard streams are flushed first. ``os._exit`` skips interpreter finalisation, which is
    what stopped a daemon thread inside native code and aborted the process. Only for a process
    that has no request in flight (not yet ready, or after its graceful stop)."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(0)


def install_startup_exit() -> Callable[[], None]:
    """Until the returned function is called (at the end of start-up): a SIGTERM exits 0 at once
    (:func:`exit_at_once`) instead of letting the model load and start-up finish first (seconds of
    CPU per process, for a server that would stop right after). Nothing is served before start-up
    ends, so no request is cut. A stop signal uvicorn's own handler already took before this call
    (its ``Server.should_exit`` set) exits at once too. Only in the main thread (the server process
    or a worker); returns a function restoring the previous handler (uvicorn's, which then stops
    gracefully).
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGTERM)
    if getattr(getattr(previous, "__self__", None), "should_exit", False) is True:
        # uvicorn's handler (``Server.handle_exit``) already took a SIGTERM / SIGINT: in a worker
        # of ``--renderer-num-workers N`` one that came while ``Config.load`` imported and built
        # the app (~1 s; a replacement worker told to stop as it starts), which uvicorn would
        # act on only after the whole start-up
        logger.info("stop signal received before start-up: exiting now")
        exit_at_once()

    def stop_now(signum: int, frame: Any) -> None:
        logger.info("SIGTERM during start-up: exiting now")
        exit_at_once()

    signal.signal(signal.SIGTERM, stop_now)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore
