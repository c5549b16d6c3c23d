"""``render-service health``: probe the local server's ``/health`` on the address it really uses.

A container's HEALTHCHECK runs as a separate process and sees neither the server's flags nor the
settings it resolved. It reads them the way the server did: the server's own command line (the
container's PID 1, ``/proc/1/cmdline``, when that is a ``render-service serve`` command) parsed by
the same CLI parser, whose defaults come from the same ``RENDER_SERVICE_*`` environment variables
(environment first, flags override). So ``-e RENDER_SERVICE_PORT=9000`` and ``serve --port 9000``
are both probed on 9000.

Exit status: 0 when ``/health`` answers 200 within the timeout, 1 otherwise (Docker's contract).
"""

from __future__ import annotations

import argparse
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

#: Wildcard bind addresses are probed on the loopback address of the same family.
_LOOPBACK = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1", "[::]": "::1"}


def serve_argv(cmdline: Sequence[str]) -> list[str] | None:
    """The arguments after ``serve`` when ``cmdline`` (argv of a process) runs ``render-service
    serve`` (the console script, or ``python -m render_service serve``), else ``None``."""
    args = list(cmdline)
    for i, arg in enumerate(args[:-1]):
        name = Path(arg).name
        if name == "render-service" or (arg == "render_service" and i > 0 and args[i - 1] == "-m"):
            return args[i + 2 :] if args[i + 1] == "serve" else None
    return None


def read_cmdline(pid: int = 1) -> list[str]:
    """argv of process ``pid`` from ``/proc`` (empty when unreadable, e.g. not on Linux)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def health_url(server_args: Sequence[str] | None, parser: argparse.ArgumentParser,
               host: str | None = None, port: int | None = None) -> str:
    """``http://HOST:PORT/health`` for a server started with ``serve *server_args`` (``None``:
    environment and defaults only). ``parser`` is the CLI's parser (environment defaults applied);
    ``host`` / ``port`` (``render-service health --host/--port``) replace the discovered ones."""
    ns, _ = parser.parse_known_args(["serve", *(server_args or ())])
    host = host if host is not None else ns.host
    port = port if port is not None else ns.port
    host = _LOOPBACK.get(host, host)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}/health"


def probe(url: str, timeout: float = 2.0) -> bool:
    """Whether ``url`` answers 200 within ``timeout`` seconds."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (local URL)
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def main(parser: argparse.ArgumentParser, url: str | None, timeout: float,
         host: str | None = None, port: int | None = None) -> int:
    """Run the probe; prints the URL on failure. Returns the exit status."""
    target = url or health_url(serve_argv(read_cmdline()), parser, host, port)
    if probe(target, timeout):
        return 0
    print(f"render-service health: {target} did not answer 200")
    return 1
