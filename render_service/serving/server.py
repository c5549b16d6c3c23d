"""Process management: one process, or N uvicorn worker processes sharing one socket.

* ``renderer_num_workers == 1``: the app runs in this process.
* ``> 1``: uvicorn's multi-process supervisor spawns N workers, each building the app with
  :func:`render_service.serving.app.app_from_env` from the settings passed in
  ``RENDER_SERVICE_SETTINGS_JSON``; a worker that dies is replaced while the others keep
  serving. Prometheus runs in multiprocess mode over a fresh temporary folder
  (``PROMETHEUS_MULTIPROC_DIR``) unless one is given.
* A writable temporary directory is required (:func:`check_temp_dir`): on a read-only root
  filesystem, mount a tmpfs at ``/tmp``.
* SIGTERM / SIGINT: stop accepting, finish in-flight requests, exit 0. With ``shutdown_delay`` the
  worker first answers ``/ready`` with 503 for that many seconds while still serving, so load
  balancers stop sending before the listener closes. A process stopped before its background
  fast-encoder build is done exits without finishing it (:func:`exit_unless_building_done`).
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import signal
import tempfile
import threading
from typing import Any

from ..settings import Settings
from .lifecycle import SETTINGS_ENV, exit_at_once, settings_to_json
from .logging_setup import configure_logging, uvicorn_log_config

logger = logging.getLogger(__name__)

TMP_NEEDED = (
    "render-service needs a writable temporary directory (worker metrics, tokenizer caches): none "
    "of TMPDIR, /tmp, /var/tmp, /usr/tmp or the working directory is writable. On a read-only root "
    "filesystem mount one, e.g. `docker run --read-only --tmpfs /tmp ...` (the Helm chart mounts an "
    "emptyDir at /tmp)."
)


def check_temp_dir() -> str:
    """The writable temporary directory, found as :mod:`tempfile` finds it.

    Raises:
        SystemExit: none is writable (:data:`TMP_NEEDED`), before any worker starts.
    """
    try:
        with tempfile.TemporaryFile():
            return tempfile.gettempdir()
    except (FileNotFoundError, PermissionError, OSError):
        tempfile.tempdir = None  # let a later mount be found on the next try
        raise SystemExit(TMP_NEEDED) from None


def serve(settings: Settings, log_level: str = "info") -> int:
    """Run the service until SIGTERM/SIGINT; returns the exit code (0 after a graceful stop).

    Raises:
        SystemExit: no writable temporary directory (:func:`check_temp_dir`).
    """
    import uvicorn

    check_temp_dir()
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

        try:
            uvicorn.run(create_app(settings), **common)
        except SystemExit as stop:  # _exit_0: SIGTERM before uvicorn took over, or re-raised after
            if stop.code in (0, None):
                exit_unless_building_done()
            raise
        exit_unless_building_done()
        return 0
    folder = _metrics_dir()  # several processes: metrics in multiprocess mode
    os.environ[SETTINGS_ENV] = settings_to_json(settings)
    os.environ["RENDER_SERVICE_LOG_LEVEL"] = log_level
    try:
        uvicorn.run("render_service.serving.app:app_from_env", factory=True,
                    workers=settings.renderer_num_workers, **common)
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


def exit_unless_building_done() -> None:
    """After a graceful stop of a single-process server: when a start-up fast-encoder build
    (:data:`~render_service.tokens.prefix_cache.BUILD_THREAD`) is still running, exit 0 at once
    instead of letting the interpreter wait for a build whose encoder will never serve (1-3 CPU-s
    and seconds of wall for a server stopped soon after ``/ready``); returns when there is none.

    A worker process of ``--renderer-num-workers N`` already exits so: uvicorn re-raises the SIGTERM
    after its graceful stop and the default action ends the process. Requests were all answered
    before this point; see :func:`~.lifecycle.exit_at_once`.
    """
    from ..tokens.prefix_cache import BUILD_THREAD

    if not any(t.name == BUILD_THREAD and t.is_alive() for t in threading.enumerate()):
        return
    logger.info("stopped during the start-up fast-encoder build: exiting without waiting for it")
    exit_at_once()


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
