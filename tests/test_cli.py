"""Start-up refuses configurations that would fail every request later (newcomer finding F1)."""

import subprocess
import sys

import pytest

from render_service.serving.cli import check_parser_names


@pytest.mark.parametrize("flags", [("--reasoning-parser", "bogus"), ("--tool-call-parser", "nope")])
def test_unknown_parser_name_fails_start_up_with_the_known_names(flags):
    """`render-service serve --reasoning-parser bogus` exits non-zero at once, naming the flag and
    listing accepted names, instead of starting and answering 500 on every derender."""
    argv = [sys.executable, "-m", "render_service", "serve", *flags]
    if flags[0] == "--tool-call-parser":
        argv.append("--enable-auto-tool-choice")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert flags[0] in done.stderr and repr(flags[1]) in done.stderr and "choose one of: " in done.stderr


def test_every_registered_vllm_name_is_accepted():
    """The names the issue lists (vLLM's) pass the start-up check."""
    for name in ("qwen3", "deepseek_r1", "deepseek_v3", "glm45", "kimi_k2", "gpt-oss", "nemotron_v3"):
        check_parser_names(name, None)
    for name in ("hermes", "qwen3_coder", "llama3_json", "mistral", "openai", "kimi_k2", "pythonic"):
        check_parser_names(None, name)
