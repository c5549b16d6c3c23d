"""`render-service health` (the container HEALTHCHECK) probes the address the server resolved from
the same settings: the environment first, the server's own flags over it; and start-up without a
writable temporary directory fails with a clear message."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from urllib.parse import urlparse

import pytest

from render_service.serving import healthcheck
from render_service.serving.cli import build_parser
from render_service.serving.server import TMP_NEEDED, check_temp_dir


@pytest.mark.parametrize(
    ("cmdline", "expected"),
    [
        (["/opt/venv/bin/python", "/opt/venv/bin/render-service", "serve", "--port", "9000"],
         ["--port", "9000"]),
        (["render-service", "serve"], []),
        (["python", "-m", "render_service", "serve", "M", "--host", "::"], ["M", "--host", "::"]),
        (["render-service", "health"], None),
        (["/usr/bin/python3", "app.py", "--port", "1"], None),
        ([], None),
    ],
)
def test_serve_argv_finds_the_serve_arguments(cmdline, expected):
    assert healthcheck.serve_argv(cmdline) == expected


def test_environment_first_then_flags(monkeypatch):
    """RENDER_SERVICE_PORT/HOST set the probed address; the server's --port/--host win over them;
    wildcard binds are probed on loopback."""
    monkeypatch.setenv("RENDER_SERVICE_PORT", "9001")
    monkeypatch.setenv("RENDER_SERVICE_HOST", "0.0.0.0")
    parser = build_parser()
    assert healthcheck.health_url(None, parser) == "http://127.0.0.1:9001/health"
    assert healthcheck.health_url(["--port", "9002"], parser) == "http://127.0.0.1:9002/health"
    assert healthcheck.health_url(["MODEL", "--host", "::", "--port", "7"], parser) == "http://[::1]:7/health"
    monkeypatch.delenv("RENDER_SERVICE_PORT")
    monkeypatch.delenv("RENDER_SERVICE_HOST")
    assert healthcheck.health_url(None, build_parser()) == "http://127.0.0.1:8000/health"


def test_health_flags_replace_the_discovered_address():
    """``render-service health --host H --port P`` probes H:P; either alone keeps the other part of
    the discovered address."""
    parser = build_parser()
    args = parser.parse_args(["health", "--port", "9003"])
    assert (args.host, args.port) == (None, 9003)
    assert healthcheck.health_url(["--port", "7"], parser, port=9003) == "http://127.0.0.1:9003/health"
    assert healthcheck.health_url(["--port", "7"], parser, host="::") == "http://[::1]:7/health"
    assert healthcheck.health_url(None, parser, "10.0.0.5", 81) == "http://10.0.0.5:81/health"


def _health(port: int, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RENDER_SERVICE_PORT": str(port), "RENDER_SERVICE_HOST": "0.0.0.0"}
    return subprocess.run([sys.executable, "-m", "render_service", "health", *flags], env=env,
                          capture_output=True, text=True, timeout=60)


def test_probe_of_a_live_server_succeeds_and_of_a_closed_port_fails(serve):
    """Over real HTTP: exit 0 against a serving port given by the environment, 1 (with the URL
    printed) against a port nothing listens on."""
    client = serve()
    port = urlparse(str(client.base_url)).port
    assert port is not None
    ok = _health(port)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens on it
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    bad = _health(closed)
    assert bad.returncode == 1
    assert f"http://127.0.0.1:{closed}/health did not answer 200" in bad.stdout
    assert _health(closed, "--port", str(port)).returncode == 0  # the flag wins over the environment


def test_start_up_without_a_writable_temp_dir_fails_clearly(monkeypatch, tmp_path):
    """With no usable temporary directory, start-up stops with the message that says what to mount."""
    assert check_temp_dir()  # writable here
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    with pytest.raises(SystemExit) as exc:
        check_temp_dir()
    assert exc.value.code == TMP_NEEDED
    assert "--tmpfs /tmp" in TMP_NEEDED
