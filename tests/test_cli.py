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


def test_every_vllm_launch_render_flag_is_accepted() -> None:
    """Each option of ``vllm launch render`` 0.33 (``render_service/serving/vllm_render_flags.json``,
    written by ``tools/list_vllm_render_flags.py``) parses; unused ones are reported for the log."""
    import json

    from render_service.serving.cli import (
        VLLM_FLAGS_FILE,
        build_parser,
        ignored_vllm_flags,
        settings_from_args,
    )

    flags = json.loads(VLLM_FLAGS_FILE.read_text(encoding="utf-8"))
    assert len(flags) > 300 and flags["--max-num-seqs"] == "value" and flags["--trust-remote-code"] == "flag"
    argv = ["serve", "MODEL"]
    for name, kind in flags.items():
        if name in ("--help", "--model", "--config", "--tool-call-parser", "--reasoning-parser", "--api-key",
                    "--served-model-name", "--enable-auto-tool-choice", "--disable-auto-tool-choice"):
            continue
        argv += [name] if kind == "flag" else [name, "1"] if kind == "value" else [name, "a", "b"]
    # known flags that take typed values get valid ones
    typed = {"--port": "8000", "--max-model-len": "128", "--max-logprobs": "5",
             "--default-chat-template-kwargs": "{}",
             "--chat-template-content-format": "auto", "--reasoning-effort-map": "{}", "--log-format": "json"}
    for i, tok in enumerate(argv):
        if tok in typed and i + 1 < len(argv):
            argv[i + 1] = typed[tok]
    args = build_parser().parse_args(argv)
    assert args.model == "MODEL"
    ignored = set(ignored_vllm_flags(args))
    assert {"--max-num-seqs", "--trust-remote-code", "--tokenizer-mode", "-dp"} <= ignored
    settings = settings_from_args(
        build_parser().parse_args(
            ["serve", "M", "--tokenizer", "T", "--revision", "r1", "--max-num-seqs", "4"]
        )
    )
    assert (settings.model, settings.tokenizer, settings.revision) == ("M", "T", "r1")


def test_gpt_oss_gets_its_default_reasoning_parser() -> None:
    """As vLLM: gpt-oss without ``--reasoning-parser`` parses reasoning with ``openai_gptoss``;
    ``none`` or an explicit name wins; other models get none."""
    from conftest import model_dir

    from render_service.serving.cli import build_parser, settings_from_args

    gpt = model_dir("openai--gpt-oss-20b")
    parse = build_parser().parse_args
    assert settings_from_args(parse(["serve", gpt])).reasoning_parser == "openai_gptoss"
    assert settings_from_args(parse(["serve", gpt, "--reasoning-parser", "none"])).reasoning_parser is None
    assert settings_from_args(parse(["serve", model_dir("Qwen--Qwen3-0.6B")])).reasoning_parser is None
