"""Start-up refuses configurations that would fail every request later (newcomer finding F1)."""

import subprocess
import sys

import pytest

from render_service.serving.cli import check_model_source, check_parser_names


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


def test_a_missing_model_folder_fails_start_up_in_one_line(tmp_path):
    """`render-service serve /no/such/folder` exits non-zero with one line naming the model, not
    the loader's chained tracebacks (newcomer finding); an existing folder and a repo id pass."""
    missing = str(tmp_path / "no-such-model")
    argv = [sys.executable, "-m", "render_service", "serve", missing]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert done.stderr.strip() == f"{missing}: no such model folder, and not a Hugging Face repo id"
    check_model_source(str(tmp_path))
    check_model_source("Qwen/Qwen3-0.6B")
    check_model_source(None)


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
    # flags we define ourselves get valid values of their type (ints, choices, JSON objects)
    typed = {"--port": "8000", "--max-model-len": "128", "--max-logprobs": "5",
             "--default-chat-template-kwargs": "{}",
             "--chat-template-content-format": "auto", "--reasoning-effort-map": "{}", "--log-format": "json",
             "--anthropic-disabled-thinking-effort": "low", "--mm-hasher-algorithm": "sha256",
             "--limit-mm-per-prompt": '{"image": 2}', "--mm-processor-kwargs": "{}",
             "--media-io-kwargs": "{}", "--allowed-local-media-path": "."}
    for i, tok in enumerate(argv):
        if tok in typed and i + 1 < len(argv):
            argv[i + 1] = typed[tok]
    args = build_parser().parse_args(argv)
    assert args.model == "MODEL"
    ignored = set(ignored_vllm_flags(args))
    assert {"--max-num-seqs", "--trust-remote-code", "--tokenizer-mode", "-dp"} <= ignored
    # our own flags that vLLM also has are used, not ignored
    assert not ignored & set(typed) and "--allowed-media-domains" not in ignored
    used = settings_from_args(args)
    assert (used.anthropic_disabled_thinking_effort, used.mm_hasher_algorithm) == ("low", "sha256")
    assert used.limit_mm_per_prompt == {"image": 2} and used.allowed_media_domains == ("a", "b")
    settings = settings_from_args(
        build_parser().parse_args(
            ["serve", "M", "--tokenizer", "T", "--revision", "r1", "--max-num-seqs", "4"]
        )
    )
    assert (settings.model, settings.tokenizer, settings.revision) == ("M", "T", "r1")


def test_system_start_date_flag_and_vllm_environment_variable(monkeypatch) -> None:
    """harmony's ``Current date:`` from ``--system-start-date``, else ``VLLM_SYSTEM_START_DATE`` as vLLM."""
    from render_service.serving.cli import build_parser, settings_from_args

    monkeypatch.delenv("RENDER_SERVICE_SYSTEM_START_DATE", raising=False)
    monkeypatch.setenv("VLLM_SYSTEM_START_DATE", "2025-06-01")
    assert settings_from_args(build_parser().parse_args(["serve", "M"])).system_start_date == "2025-06-01"
    flag = ["serve", "M", "--system-start-date", "2024-01-02"]
    assert settings_from_args(build_parser().parse_args(flag)).system_start_date == "2024-01-02"
    monkeypatch.delenv("VLLM_SYSTEM_START_DATE")
    assert settings_from_args(build_parser().parse_args(["serve", "M"])).system_start_date is None


@pytest.mark.parametrize(
    "flag", ["--default-chat-template-kwargs", "--limit-mm-per-prompt", "--media-io-kwargs"]
)
def test_json_object_flags_refuse_other_json(flag, capsys) -> None:
    """A JSON-object flag given ``1`` or a list fails start-up (argparse exit 2) naming the flag."""
    from render_service.serving.cli import build_parser

    for bad in ("1", "[1]", "{"):
        with pytest.raises(SystemExit) as err:
            build_parser().parse_args(["serve", "M", flag, bad])
        assert err.value.code == 2 and flag in capsys.readouterr().err


def test_limit_mm_per_prompt_takes_vllm_option_objects(capsys) -> None:
    """``--limit-mm-per-prompt`` in vLLM 0.33's forms (``MultiModalConfig.limit_per_prompt``): a
    count, or an options object whose ``count`` (999 when absent) is the limit and whose profiling
    sizes are checked and unused. Both become counts (an options object reached the request path
    as a dict and failed every media request with a 500); what vLLM's config refuses (a negative
    count, a size of 0, an option the modality has not) fails start-up naming the flag."""
    from render_service.serving.cli import build_parser, settings_from_args

    def limits(raw: str) -> dict[str, int]:
        return settings_from_args(build_parser().parse_args(["serve", "M", "--limit-mm-per-prompt", raw])
                                  ).limit_mm_per_prompt

    assert limits('{"image": {"count": 2, "width": 512, "height": 512}, "video": 1}') == {"image": 2, "video": 1}
    assert limits('{"video": {"num_frames": 32}, "audio": {"count": 0, "length": 8}}') == {"video": 999, "audio": 0}
    for bad in ('{"image": -1}', '{"image": {"count": -1}}', '{"image": {"width": 0}}',
                '{"image": {"count": 2, "num_frames": 4}}', '{"video": "2"}', '{"image": true}'):
        with pytest.raises(SystemExit) as err:
            build_parser().parse_args(["serve", "M", "--limit-mm-per-prompt", bad])
        assert err.value.code == 2 and "--limit-mm-per-prompt" in capsys.readouterr().err, bad


def test_media_io_kwargs_values_the_decoders_cannot_use_fail_start_up(capsys) -> None:
    """``--media-io-kwargs`` values are checked at start-up (found by round 28's newcomer: a
    ``rgba_background_color`` of ``"red"`` was accepted and failed every RGBA image with a 500):
    vLLM 0.33's ``ImageMediaIO`` check and wording for the colour; a positive ``fps``."""
    from render_service.serving.cli import build_parser, settings_from_args

    good = '{"image": {"rgba_background_color": [0, 128, 255]}, "video": {"fps": 1.5, "num_frames": 8}}'
    settings = settings_from_args(build_parser().parse_args(["serve", "M", "--media-io-kwargs", good]))
    assert settings.media_io_kwargs["image"] == {"rgba_background_color": [0, 128, 255]}
    colour = "rgba_background_color must be a list or tuple of 3 integers in the range [0, 255]."
    for bad, reason in (('{"image": {"rgba_background_color": "red"}}', colour),
                        ('{"image": {"rgba_background_color": [1, 2]}}', colour),
                        ('{"image": {"rgba_background_color": null}}', colour),
                        ('{"image": {"rgba_background_color": [300, 0, 0]}}', colour),
                        ('{"image": {"rgba_background_color": [1.5, 0, 0]}}', colour),
                        ('{"video": {"fps": 0}}', "video fps must be a positive number"),
                        ('{"video": {"fps": "2"}}', "video fps must be a positive number"),
                        ('{"image": [1]}', "per-modality objects")):
        with pytest.raises(SystemExit) as err:
            build_parser().parse_args(["serve", "M", "--media-io-kwargs", bad])
        out = capsys.readouterr().err
        assert err.value.code == 2 and "--media-io-kwargs" in out and reason in out, (bad, out)


def test_mm_processor_kwargs_pixel_bounds_fail_start_up(capsys) -> None:
    """``--mm-processor-kwargs`` pixel bounds are positive integers and ``size`` has both edges,
    checked at start-up (round 29's newcomer: ``{"max_pixels": "abc"}`` started and then failed
    every media request)."""
    from render_service.serving.cli import build_parser, settings_from_args

    good = '{"max_pixels": 200000, "videos_kwargs": {"size": {"shortest_edge": 3136, "longest_edge": 99999}}}'
    assert settings_from_args(build_parser().parse_args(["serve", "M", "--mm-processor-kwargs", good])
                              ).mm_processor_kwargs["max_pixels"] == 200000
    for bad in ('{"max_pixels": "abc"}', '{"min_pixels": 0}', '{"images_kwargs": {"max_pixels": 1.5}}',
                '{"videos_kwargs": "x"}', '{"size": {"longest_edge": 100}}'):
        with pytest.raises(SystemExit) as err:
            build_parser().parse_args(["serve", "M", "--mm-processor-kwargs", bad])
        assert err.value.code == 2 and "--mm-processor-kwargs" in capsys.readouterr().err, bad


def test_allowed_local_media_path_must_be_an_existing_folder(tmp_path, capsys) -> None:
    """``--allowed-local-media-path`` is checked at start-up with vLLM 0.33's messages
    (``MediaConnector``): a missing path or a file fails start-up instead of every file:// request."""
    from render_service.serving.cli import build_parser

    assert build_parser().parse_args(["serve", "M", "--allowed-local-media-path", str(tmp_path)]
                                     ).allowed_local_media_path == str(tmp_path)
    (tmp_path / "f").write_text("x")
    for bad, why in ((tmp_path / "missing", "does not exist."), (tmp_path / "f", "must be a directory.")):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["serve", "M", "--allowed-local-media-path", str(bad)])
        assert f"Invalid `--allowed-local-media-path`: The path {bad} {why}" in capsys.readouterr().err


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


@pytest.mark.parametrize(("raw", "value"), [("4096", 4096), ("32k", 32000), ("32K", 32768),
                                            ("25.6k", 25600), ("-1", None), ("auto", None)])
def test_max_model_len_reads_vllm_forms(raw, value) -> None:
    """`--max-model-len` takes vLLM's forms: plain, decimal/binary suffixes, -1/auto = derived."""
    from render_service.serving.cli import build_parser

    assert build_parser().parse_args(["serve", "M", "--max-model-len", raw]).max_model_len == value


@pytest.mark.parametrize("raw", ["0", "-5", "1.5K", "long"])
def test_max_model_len_refuses_what_vllm_refuses(raw, capsys) -> None:
    """Zero, other negatives, decimals with a binary suffix and words stop start-up with the flag
    named (vLLM's ModelConfig: "must be a positive integer"), instead of silently using the
    model's own length (newcomer finding)."""
    from render_service.serving.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "M", "--max-model-len", raw])
    assert "argument --max-model-len" in capsys.readouterr().err
