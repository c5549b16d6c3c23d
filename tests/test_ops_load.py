"""The load-test script: bounded, loopback-only, and its report has the promised figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "load_test.py"


def test_load_test_reports_rate_errors_latency_and_rss(serve):
    """A 1-second run against a live server reports requests, rate, per-endpoint p50/p99, RSS samples
    of the given pid, and no server errors other than 501 for handlers not yet implemented."""
    url = str(serve().base_url)
    out = subprocess.run([sys.executable, str(SCRIPT), "--url", url, "--duration", "1", "--concurrency", "2",
                          "--server-pid", str(os.getpid())], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["requests"] > 0 and report["rate_rps"] > 0
    assert set(report["latency"]) <= {"chat_render", "completion_render", "tokenize", "chat_derender",
                                      "chat_derender_stream"}
    for figures in report["latency"].values():
        assert 0 <= figures["p50_ms"] <= figures["p99_ms"]
    assert report["rss_mb"] and all(mb and mb > 0 for _, mb in report["rss_mb"])
    for key in report["status"]:
        status = key.rsplit(" ", 1)[1]
        assert not status.startswith("5") or status == "501", key


@pytest.mark.parametrize("url", ["http://10.0.0.1:8000", "http://example.com", "http://192.168.1.5"])
def test_load_test_refuses_non_loopback_targets(url):
    """Only loopback targets are accepted; anything else exits before sending a request."""
    out = subprocess.run([sys.executable, str(SCRIPT), "--url", url, "--duration", "1"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "loopback addresses only" in out.stderr
