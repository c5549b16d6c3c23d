"""The load-test script: bounded, loopback-only, and its report has the promised figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import shared_path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "load_test.py"


PARSER_FLAGS = ["--reasoning-parser", "qwen3", "--tool-call-parser", "hermes", "--enable-auto-tool-choice"]
#: RSS growth allowed between the middle and the end of the short run (warm-up happens before).
RSS_GROWTH_MB = 64


@pytest.mark.slow
@pytest.mark.shared
@pytest.mark.parametrize("workers", ["1", "2"])
def test_short_mixed_load_has_zero_errors_and_flat_rss(workers):
    """A 5-second run against a spawned server (parsers on, real chat requests from
    ../shared/data/chat_requests.jsonl, batch and streaming derender with a carried state):
    every answer is a 200, the report has rate, per-endpoint p50 <= p99 and RSS samples of the
    server's process tree, and RSS does not grow by more than RSS_GROWTH_MB after warm-up."""
    out = subprocess.run([sys.executable, str(SCRIPT), "--spawn", "--duration", "5", "--concurrency", "4",
                          "--requests", str(shared_path("data", "chat_requests.jsonl")), "--",
                          "--renderer-num-workers", workers, *PARSER_FLAGS],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["errors"] == 0, report["error_kinds"]
    assert report["requests"] > 0 and report["rate_rps"] > 0
    assert all(key.endswith(" 200") for key in report["status"]), report["status"]
    assert set(report["latency"]) == {"chat_render", "completion_render", "tokenize", "chat_derender",
                                      "chat_derender_stream"}
    for figures in report["latency"].values():
        assert 0 <= figures["p50_ms"] <= figures["p99_ms"]
    start, middle, end = report["rss_start_mid_end_mb"]
    assert start and middle and end
    assert end - middle <= RSS_GROWTH_MB, report["rss_mb"]


@pytest.mark.parametrize("url", ["http://10.0.0.1:8000", "http://example.com", "http://192.168.1.5"])
def test_load_test_refuses_non_loopback_targets(url):
    """Only loopback targets are accepted; anything else exits before sending a request."""
    out = subprocess.run([sys.executable, str(SCRIPT), "--url", url, "--duration", "1"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "loopback addresses only" in out.stderr
