"""Logging: one JSON object per line (default) or plain text, for the service and uvicorn alike.

The access log is written by the app's request middleware on the ``render_service.access``
logger, one line per request with ``request_id``, ``method``, ``path``, ``status``,
``duration_ms`` (uvicorn's own access log is turned off to avoid doubles).
"""

from __future__ import annotations

import logging
import logging.config
import time
from typing import Any

import orjson

ACCESS_LOGGER = "render_service.access"
_RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime",
                                                                             "color_message"}


class JsonFormatter(logging.Formatter):
    """Format a record as one JSON line: ``ts``, ``level``, ``logger``, ``msg`` plus ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


def configure_logging(level: str = "info", fmt: str = "json") -> None:
    """Send every logger (ours, uvicorn's) to stderr in ``fmt`` (``"json"`` or ``"text"``)."""
    logging.config.dictConfig(uvicorn_log_config(level, fmt))


def uvicorn_log_config(level: str = "info", fmt: str = "json") -> dict[str, Any]:
    """A ``logging.config`` dict for uvicorn worker processes equivalent to :func:`configure_logging`."""
    formatter: dict[str, Any] = (
        {"()": f"{__name__}.JsonFormatter"} if fmt == "json"
        else {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter},
        "handlers": {"default": {"class": "logging.StreamHandler", "formatter": "default"}},
        "root": {"handlers": ["default"], "level": level.upper()},
        "loggers": {
            "uvicorn": {"handlers": [], "propagate": True},
            "uvicorn.error": {"handlers": [], "propagate": True},
            "uvicorn.access": {"handlers": [], "propagate": False},  # ours replaces it
        },
    }
